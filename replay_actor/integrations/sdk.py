"""The vendors' own SDK clients, answered by a provider from a manifest (docs/sdk.md).

::

    client = openai_client("eval.toml")   # an openai.OpenAI; replay, live or record
    client.chat.completions.create(model=..., messages=[...])

Each function opens the manifest's provider, puts a transport over it in the SDK's own
HTTP client (httpx2) and returns the vendor's client class, built with the caller's
keyword arguments. Closing the client closes its HTTP client, which closes the transport,
which releases the provider. A client dropped without ``close()`` releases it when it is
garbage collected, or at interpreter exit at the latest (a ``weakref.finalize`` that
:func:`_build` sets on every client it builds). The SDK's key is never needed: the
provider is local, and a live provider reads its key from the manifest's ``api_key_env``;
a placeholder is given when the caller gives none, so a real key in the environment is
not even read into the client.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, TypeVar

if TYPE_CHECKING:
    import anthropic
    import openai

    from .._interface import Provider

__all__ = [
    "anthropic_client",
    "async_anthropic_client",
    "async_openai_client",
    "openai_client",
]

#: Sent as the SDK's key when the caller gives none; nothing checks it.
PLACEHOLDER_KEY: Final = "replay-actor-no-key"

Manifest = str | os.PathLike[str] | Mapping[str, Any]
_T = TypeVar("_T")


def _build(
    manifest: Manifest,
    sdk_kwargs: dict[str, Any],
    make: Callable[[Provider, dict[str, Any]], _T],
) -> _T:
    if "http_client" in sdk_kwargs:
        raise TypeError("http_client is built by replay-actor; pass the other SDK options only")
    from .. import open_provider

    sdk_kwargs.setdefault("api_key", PLACEHOLDER_KEY)
    provider = open_provider(manifest)
    try:
        client = make(provider, sdk_kwargs)
    except BaseException:
        provider.release()
        raise
    # A client dropped without close(): release the provider when the client is
    # collected (or at exit), so neither the actor nor its descriptors outlive it. The
    # SDKs close an http_client they were given only when told to. release() is
    # idempotent, so a client closed first is released once.
    weakref.finalize(client, provider.release)
    return client


def openai_client(manifest: Manifest, **sdk_kwargs: Any) -> openai.OpenAI:
    """An ``openai.OpenAI`` whose chat completions the manifest's provider answers."""
    import httpx2
    import openai

    from .transport import ProviderTransport

    def make(provider: Provider, kwargs: dict[str, Any]) -> openai.OpenAI:
        http = httpx2.Client(transport=ProviderTransport(provider, "openai"))
        return openai.OpenAI(http_client=http, **kwargs)

    return _build(manifest, sdk_kwargs, make)


def async_openai_client(manifest: Manifest, **sdk_kwargs: Any) -> openai.AsyncOpenAI:
    """An ``openai.AsyncOpenAI`` on the provider's native async path (``acomplete``)."""
    import httpx2
    import openai

    from .transport import AsyncProviderTransport

    def make(provider: Provider, kwargs: dict[str, Any]) -> openai.AsyncOpenAI:
        http = httpx2.AsyncClient(transport=AsyncProviderTransport(provider, "openai"))
        return openai.AsyncOpenAI(http_client=http, **kwargs)

    return _build(manifest, sdk_kwargs, make)


def anthropic_client(manifest: Manifest, **sdk_kwargs: Any) -> anthropic.Anthropic:
    """An ``anthropic.Anthropic`` whose messages the manifest's provider answers."""
    import anthropic
    import httpx2

    from .transport import ProviderTransport

    def make(provider: Provider, kwargs: dict[str, Any]) -> anthropic.Anthropic:
        http = httpx2.Client(transport=ProviderTransport(provider, "anthropic"))
        return anthropic.Anthropic(http_client=http, **kwargs)

    return _build(manifest, sdk_kwargs, make)


def async_anthropic_client(manifest: Manifest, **sdk_kwargs: Any) -> anthropic.AsyncAnthropic:
    """An ``anthropic.AsyncAnthropic`` on the provider's native async path."""
    import anthropic
    import httpx2

    from .transport import AsyncProviderTransport

    def make(provider: Provider, kwargs: dict[str, Any]) -> anthropic.AsyncAnthropic:
        http = httpx2.AsyncClient(transport=AsyncProviderTransport(provider, "anthropic"))
        return anthropic.AsyncAnthropic(http_client=http, **kwargs)

    return _build(manifest, sdk_kwargs, make)
