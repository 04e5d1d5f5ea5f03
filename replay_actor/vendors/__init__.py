"""The vendor shapes: the one place a vendor's wire format is read or written, one folder
per vendor family, each declaring one record (docs/sdk.md, "The mapping").

A family's folder holds a module per API its SDKs speak (a *shape*: its functions and
routes, from which a :class:`Shape` is made) and, in its ``__init__.py``, its
:class:`Family` record: its shapes, which are served together, how its paths and headers
are recognised, its hosts, its ready-line key, ``run``'s variables for its clients, its
SDK client names.
:data:`FAMILIES` is the one list of families; everything else is derived from it:
:data:`REGISTRY` of shape names (``api=`` of the transports, ``--from`` of the CLI,
``adapter =`` of a manifest, every one a built-in live adapter, ``adapters/builtin.py``),
the served-with groups (:func:`served_with`), the vendor a path looks like
(``serving/_routes.py``), the ready line (``frontdoor/server.py``), ``run``'s
environment (``frontdoor/environment.py``) and the package's lazy SDK client names
(:func:`client_names`). A new vendor is its folder and one line in ``_FAMILY_FOLDERS``::

    SDK body --read_body--> VendorCall(neutral request, how to answer)
    provider.complete(request) --> response dict --read_response--> Response
    Response --response_body | stream_body--> vendor JSON | vendor server-sent events
    neutral request --to_body--> live body;  live answer --from_response--> response dict
    live: LiveEndpoint (base URL, path, key header, own keys) --> the live adapter

::

    _family.py      Family, Variables: the record a family declares
    _shape.py       Shape: one vendor API's mapping as one value
    _common.py      rules every shape shares (arguments, one-text-part content, refusals)
    _endpoint.py    LiveEndpoint: where a shape's live adapter sends a request
    _turns.py       a conversation as alternating turns (Anthropic's, Gemini's live bodies)
    _unstreamed.py  unstreamed: the stream body of a shape never streamed (its JSON)
    _vectors.py     embedding texts and vectors: float32 base64 both ways
    _counting.py    token counting: a chat body of kind count_tokens, its input_tokens
    openai/         chat completions, Responses, embeddings, completions, input tokens
    anthropic/      messages, count_tokens
    gemini/         generateContent, embeddings, countTokens
    ollama/         /api/chat, /api/generate, /api/embed (NDJSON streams)
    cohere/         v2 chat

A chat shape's ``live`` endpoint lists, in ``kinds``, the shape that asks each other
request kind live (docs/request.md, "Request kinds"), so one ``openai`` adapter records
chat, embeddings, completions and token counts alike.

A shape that must remember what it served (the Responses API's
``previous_response_id``) is made afresh per serving provider (:func:`make_vendor`), so
it keeps that memory per provider, in memory, and nowhere else.

The public face of the package: what other packages use is named here (the shared
rules included), never imported from a private module of ``vendors/``.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Final, cast

from ._common import (
    MalformedResponse,
    VendorCall,
    canonical_arguments,
    collapse_content,
    identifier,
    refuse_unfaithful,
)
from ._endpoint import EndpointOption, LiveEndpoint
from ._family import Family, Variables
from ._shape import Shape, ShapeModule

__all__ = [
    "FAMILIES",
    "REGISTRY",
    "EndpointOption",
    "Family",
    "LiveEndpoint",
    "MalformedResponse",
    "Shape",
    "Variables",
    "Vendor",
    "VendorCall",
    "canonical_arguments",
    "client_names",
    "collapse_content",
    "identifier",
    "make_vendor",
    "refuse_unfaithful",
    "served_with",
    "vendor_names",
]

#: What callers annotate a vendor shape with: a :class:`Shape`.
Vendor = Shape

#: The families, one folder each, one line each. Their order is the order of
#: :data:`REGISTRY` (each family's own shape first, then the others) and of the ready
#: line; the first is the family a request nobody recognises is answered as.
_FAMILY_FOLDERS: Final = (
    "openai",
    "anthropic",
    "gemini",
    "ollama",
    "cohere",
)

#: Every family's record (reading them imports no mapping code).
FAMILIES: Final[tuple[Family, ...]] = tuple(
    importlib.import_module(f"{__name__}.{folder}").FAMILY for folder in _FAMILY_FOLDERS
)


def _registry() -> dict[str, str]:
    rows = [
        (folder, shape)
        for index in (0, 1)  # every family's own shape, then the rest of each
        for folder, family in zip(_FAMILY_FOLDERS, FAMILIES, strict=True)
        for shape in (family.shapes[:1] if index == 0 else family.shapes[1:])
    ]
    return {name: f"{__name__}.{folder}.{target}" for folder, (name, target) in rows}


#: name -> "module" or "module:function", imported on first use (a vendor's module is
#: only loaded when it is asked for): the module defines the shape
#: (:class:`~._shape.ShapeModule`), or the function makes one (a shape that remembers
#: what it served). Made from :data:`FAMILIES`.
REGISTRY: Final[dict[str, str]] = _registry()

#: The APIs one vendor SDK speaks at one base URL, by family: a transport for
#: ``api="openai"`` answers the OpenAI SDK's chat completions and its Responses API alike.
_SERVED_WITH: Final[dict[str, tuple[str, ...]]] = {
    family.name: tuple(name for name, _ in family.shapes) for family in FAMILIES
}


def served_with(name: str) -> tuple[str, ...]:
    """The vendor APIs a transport for ``name`` answers (``name`` first): a family's
    every shape, or the one shape ``name``."""
    return _SERVED_WITH.get(name, (name,))


def vendor_names() -> tuple[str, ...]:
    """The registered vendor API names, in registry order."""
    return tuple(REGISTRY)


def client_names() -> dict[str, str]:
    """Every family's SDK client names -> the family (``replay_actor``'s lazy names)."""
    return {client: family.name for family in FAMILIES for client in family.clients}


def make_vendor(name: str) -> Shape:
    """The :class:`Shape` registered as ``name`` (a fresh one for a shape that remembers
    what it served); ``ValueError`` naming the known ones."""
    where = REGISTRY.get(name)
    if where is None:
        known = ", ".join(repr(n) for n in REGISTRY)
        raise ValueError(f"api must be one of {known}, not {name!r}")
    module, _, attr = where.partition(":")
    if not attr:
        return _defined_by(module, name)
    made: Shape | Callable[[], Shape] = getattr(importlib.import_module(module), attr)
    return made if isinstance(made, Shape) else made()


@functools.cache
def _defined_by(module: str, name: str) -> Shape:
    """The shape a module defines, made once (it keeps no state)."""
    return Shape.of(cast("ShapeModule", importlib.import_module(module)), name)
