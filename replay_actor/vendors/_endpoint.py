"""Where a vendor API lives over HTTP: the data a vendor shape declares as its ``live``
attribute, from which ``adapters/builtin.py`` makes the shape's built-in live adapter.

Data only: no I/O and no checking here. The adapter reads and checks the manifest's keys
(``adapters/_config.py``); this says which keys there are beyond the common ones, where
the endpoint is, and how the API key travels.
"""

from __future__ import annotations

import msgspec

__all__ = ["EndpointOption", "LiveEndpoint", "sibling"]


class EndpointOption(msgspec.Struct, frozen=True):
    """A key of the adapter table beyond the common HTTP ones (docs/manifest.md)."""

    #: The manifest key (``anthropic_version``).
    key: str
    #: Its value when the table does not set it.
    default: str
    #: The request header it is sent as; ``None``: it fills ``{key}`` in the path.
    header: str | None = None
    #: What a value must match (a regular expression); ``None``: any string, an empty
    #: one meaning the default.
    pattern: str | None = None
    #: The error when the value does not match ``pattern`` (it names the key, never the
    #: value).
    problem: str = ""


class LiveEndpoint(msgspec.Struct, frozen=True):
    """How the built-in adapter of one vendor shape reaches its API."""

    #: The adapter class's name (its ``repr``, and what the package's entry point names).
    adapter: str
    #: What a good answer is, for the error about one that is not ("a chat completion").
    shape: str
    #: The vendor's own base URL, used when the table sets no ``base_url``.
    base_url: str
    #: The endpoint below the base URL. ``{model}`` is the table's model (a leading
    #: ``models/``, Google's resource spelling, left out; percent-encoded) and ``{KEY}``
    #: the value of the path option ``KEY``.
    path: str
    #: The header the key from ``api_key_env`` is sent in, after ``key_prefix``.
    key_header: str
    key_prefix: str = ""
    options: tuple[EndpointOption, ...] = ()
    #: The request kinds (docs/request.md, "Request kinds") this adapter asks through
    #: another endpoint of the same API: ``(kind, registry name of the shape)`` pairs. The
    #: named shape's ``path`` (below this base URL), ``to_body`` and ``from_response``
    #: serve that kind; a kind not listed (chat aside) is refused before anything is sent.
    kinds: tuple[tuple[str, str], ...] = ()


def sibling(
    of: LiveEndpoint,
    adapter: str,
    shape: str,
    path: str,
    *,
    kinds: tuple[tuple[str, str], ...] = (),
) -> LiveEndpoint:
    """Another endpoint of the API ``of`` is in: its base URL, key header and prefix and
    options, with an adapter, answer and path of its own (and, unless given, no ``kinds``:
    a sibling asks only its own kind). One API's endpoints thus cannot drift apart."""
    return msgspec.structs.replace(of, adapter=adapter, shape=shape, path=path, kinds=kinds)
