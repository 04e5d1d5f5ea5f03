"""URL paths before routing: the spellings a client may use for a served path, which
vendor a path looks like, and the served paths as a user reads them (docs/front-door.md,
"Paths").

Runs in: whichever process serves (a transport's caller, or the front door), called by
``serving.Exchange`` before a vendor is chosen. Pure functions of the path.

- :func:`canonical_path`: Azure OpenAI's ``/openai/deployments/{name}/…``,
  ``/openai/v1/…`` and ``/openai/…``, and Anthropic's ``/messages…`` without ``/v1``
  (clients whose base URL must end in ``/v1``, such as ``@ai-sdk/anthropic``, under
  ``replay-actor run`` whose Anthropic base URL has none) become the ``/v1/…`` path the
  vendor shapes route.
  The query (Azure's ``api-version``) is never part of the path here.
- :func:`looks_like`: the vendor whose error envelope an answer to a path no one serves
  (or a 401 / 413 before routing) is written in, so each SDK raises its own error.
- :func:`described`: the served paths a 404 lists, never a regular expression.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from typing import Final

from ..vendors import FAMILIES, Shape

__all__ = ["AZURE_FORMS", "canonical_path", "described", "looks_like"]

_AZURE_DEPLOYMENT: Final = re.compile(r"^/openai/deployments/[^/]+(/.*)$")

#: Each family's look, in the families' order: (name, its paths, its SDKs' headers, its
#: looser paths).
_LOOKS: Final = tuple(
    (
        family.name,
        re.compile(family.paths) if family.paths else None,
        frozenset(family.headers),
        re.compile(family.loose_paths) if family.loose_paths else None,
    )
    for family in FAMILIES
)

#: How a 404 says that the OpenAI paths are served below Azure's prefixes too.
AZURE_FORMS: Final = "the /v1/… paths below /openai/deployments/{name}/ and /openai/ too (Azure)"


def canonical_path(path: str) -> str:
    """``path`` as the vendor shapes route it: Azure's and Anthropic's other spellings
    rewritten to ``/v1/…``, any other path unchanged."""
    azure = _AZURE_DEPLOYMENT.match(path)
    if azure is not None:
        return "/v1" + azure.group(1)
    if path.startswith("/openai/v1/"):
        return path.removeprefix("/openai")
    if path.startswith("/openai/"):
        # openai.AzureOpenAI's endpoints that are not per deployment (files, batches,
        # responses) go below {endpoint}/openai/ with no version in the path.
        return "/v1" + path.removeprefix("/openai")
    if path == "/messages" or path.startswith("/messages/"):
        return "/v1" + path
    return path


def looks_like(path: str, header_names: Collection[str] = ()) -> str:
    """The name of the vendor family a request belongs to by its look, read from the
    families' records (``vendors.FAMILIES``): a path that is one family's alone
    (``anthropic`` for ``/v1/messages…``, ``gemini`` for Google's versioned paths and
    ``models/{model}:method``); then the headers only its SDK sends (``header_names``,
    lower case: ``anthropic-version``; ``x-goog-api-key``, since google-genai's
    ``GET /v1/models/{model}`` is spelled like OpenAI's); then a looser path
    (``ollama`` for ``/api/…``); else the first family, ``openai``."""
    path = canonical_path(path)
    for name, paths, _, _ in _LOOKS:
        if paths is not None and paths.search(path):
            return name
    for name, _, headers, _ in _LOOKS:
        if not headers.isdisjoint(header_names):
            return name
    for name, _, _, loose in _LOOKS:
        if loose is not None and loose.search(path):
            return name
    return FAMILIES[0].name


def described(vendors: Iterable[Shape]) -> list[str]:
    """What each vendor serves, as a user reads it (``POST /v1/chat/completions``): its
    ``paths`` when it has them, else its name (a shape without ``paths`` still serves)."""
    out: list[str] = []
    for vendor in vendors:
        out.extend(vendor.paths if vendor.paths else [f"the {vendor.name} API"])
    return out
