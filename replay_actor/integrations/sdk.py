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

google-genai (``gemini_client``, docs/gemini.md) is given the transports rather than
HTTP clients (``HttpOptions.client_args`` / ``async_client_args``): it closes only the
clients it built itself, and a given async transport is what keeps it off aiohttp.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

if TYPE_CHECKING:
    import anthropic
    import ollama
    import openai
    from google import genai
    from google.genai.client import AsyncClient as GeminiAsyncClient

    from .._interface import Provider
    from ..manifest import ManifestLike
    from ..serving import AsyncServing, MissHint, Serving

__all__ = [
    "anthropic_client",
    "async_anthropic_client",
    "async_gemini_client",
    "async_ollama_client",
    "async_openai_client",
    "gemini_client",
    "ollama_client",
    "openai_client",
    "PLACEHOLDER_KEY",
]

#: Sent as the SDK's key when the caller gives none; nothing checks it.
PLACEHOLDER_KEY: Final = "replay-actor-no-key"

_T = TypeVar("_T")


def _opened(manifest: ManifestLike) -> tuple[Provider, MissHint]:
    """The manifest's provider, and what a miss's error says to do: the ``add`` command
    naming its fixture (docs/sdk.md, "Failures"). The manifest is read once."""
    from ..manifest import open_provider, read_manifest
    from ..serving import MissHint

    read = read_manifest(manifest)
    hint = MissHint(read.fixture, private=read.private, inspection=read.inspection)
    return open_provider(read), hint


_S = TypeVar("_S", bound="Serving | AsyncServing")


def _hinted(transport: _S, hint: MissHint) -> _S:
    """``transport``, its misses' errors naming the manifest's fixture in their ``add``
    command."""
    transport.hint = hint
    return transport


def _build(
    manifest: ManifestLike,
    sdk_kwargs: dict[str, Any],
    make: Callable[[Provider, dict[str, Any], MissHint], _T],
) -> _T:
    if "http_client" in sdk_kwargs:
        raise TypeError("http_client is built by replay-actor; pass the other SDK options only")
    sdk_kwargs.setdefault("api_key", PLACEHOLDER_KEY)
    provider, hint = _opened(manifest)
    try:
        client = make(provider, sdk_kwargs, hint)
    except BaseException:
        provider.release()
        raise
    # A client dropped without close(): release the provider when the client is
    # collected (or at exit), so neither the actor nor its descriptors outlive it. The
    # SDKs close an http_client they were given only when told to. release() is
    # idempotent, so a client closed first is released once.
    weakref.finalize(client, provider.release)
    return client


def _on_transport(
    manifest: ManifestLike,
    sdk_kwargs: dict[str, Any],
    api: str,
    client_class: Callable[..., _T],
    *,
    asynchronous: bool,
) -> _T:
    """``client_class(http_client=..., **sdk_kwargs)`` over an httpx2 client whose
    transport answers ``api`` from the manifest's provider (``acomplete`` when
    ``asynchronous``)."""
    import httpx2

    from .transport import AsyncProviderTransport, ProviderTransport

    def make(provider: Provider, kwargs: dict[str, Any], hint: MissHint) -> _T:
        http: httpx2.Client | httpx2.AsyncClient
        if asynchronous:
            hinted = _hinted(AsyncProviderTransport(provider, api), hint)
            http = httpx2.AsyncClient(transport=hinted)
        else:
            http = httpx2.Client(transport=_hinted(ProviderTransport(provider, api), hint))
        return client_class(http_client=http, **kwargs)

    return _build(manifest, sdk_kwargs, make)


def openai_client(manifest: ManifestLike, **sdk_kwargs: Any) -> openai.OpenAI:
    """An ``openai.OpenAI`` whose chat completions the manifest's provider answers."""
    import openai

    return _on_transport(manifest, sdk_kwargs, "openai", openai.OpenAI, asynchronous=False)


def async_openai_client(manifest: ManifestLike, **sdk_kwargs: Any) -> openai.AsyncOpenAI:
    """An ``openai.AsyncOpenAI`` on the provider's native async path (``acomplete``)."""
    import openai

    return _on_transport(manifest, sdk_kwargs, "openai", openai.AsyncOpenAI, asynchronous=True)


def anthropic_client(manifest: ManifestLike, **sdk_kwargs: Any) -> anthropic.Anthropic:
    """An ``anthropic.Anthropic`` whose messages the manifest's provider answers."""
    import anthropic

    return _on_transport(manifest, sdk_kwargs, "anthropic", anthropic.Anthropic, asynchronous=False)


def async_anthropic_client(manifest: ManifestLike, **sdk_kwargs: Any) -> anthropic.AsyncAnthropic:
    """An ``anthropic.AsyncAnthropic`` on the provider's native async path."""
    import anthropic

    return _on_transport(
        manifest, sdk_kwargs, "anthropic", anthropic.AsyncAnthropic, asynchronous=True
    )


#: ``HttpOptions`` fields replay-actor sets itself: the HTTP clients (so the provider,
#: not aiohttp or the network, answers) and the retries (a retried 5xx answer would ask
#: the provider again; a live provider retries on its own, see docs/manifest.md).
_GEMINI_OWNED: Final = (
    "client_args",
    "async_client_args",
    "httpx_client",
    "httpx_async_client",
    "aiohttp_client",
    "retry_options",
)


def _gemini(manifest: ManifestLike, sdk_kwargs: dict[str, Any], *, release_by_async: bool) -> Any:
    from google import genai
    from google.genai import types

    from .transport import AsyncProviderTransport, ProviderTransport

    raw = sdk_kwargs.pop("http_options", None)
    if raw is None:
        options = types.HttpOptions()
    elif isinstance(raw, types.HttpOptions):
        options = raw.model_copy()
    else:
        options = types.HttpOptions.model_validate(raw)
    for field in _GEMINI_OWNED:
        if getattr(options, field) is not None:
            raise TypeError(
                f"http_options.{field} is set by replay-actor; pass the other options only"
            )
    # Not Vertex AI unless asked: GOOGLE_GENAI_USE_VERTEXAI in the environment would
    # otherwise want a project and credentials that a replay never needs.
    sdk_kwargs.setdefault("vertexai", False)

    def make(provider: Provider, kwargs: dict[str, Any], hint: MissHint) -> Any:
        # google-genai builds (and closes) its own httpx2 clients around these
        # transports; a transport given this way also turns its aiohttp path off.
        options.client_args = {
            "transport": _hinted(
                ProviderTransport(provider, "gemini", release_on_close=not release_by_async), hint
            )
        }
        options.async_client_args = {
            "transport": _hinted(
                AsyncProviderTransport(provider, "gemini", release_on_close=release_by_async), hint
            )
        }
        client = genai.Client(http_options=options, **kwargs)
        # The object handed back is the one whose collection releases the provider.
        return client.aio if release_by_async else client

    return _build(manifest, sdk_kwargs, make)


def gemini_client(manifest: ManifestLike, **sdk_kwargs: Any) -> genai.Client:
    """A ``google.genai.Client`` whose ``models.generate_content`` (and
    ``generate_content_stream``, and the same calls on ``client.aio``) the manifest's
    provider answers. ``client.close()`` (or a ``with`` block) releases the provider."""
    client: genai.Client = _gemini(manifest, sdk_kwargs, release_by_async=False)
    return client


def async_gemini_client(manifest: ManifestLike, **sdk_kwargs: Any) -> GeminiAsyncClient:
    """The async client (what ``genai.Client(...).aio`` is) on the provider's native async
    path, never aiohttp. ``await client.aclose()`` (or ``async with``) releases the
    provider."""
    client: GeminiAsyncClient = _gemini(manifest, sdk_kwargs, release_by_async=True)
    return client


#: The host an in-process ollama client names; never resolved (the transport answers).
_OLLAMA_HOST: Final = "http://ollama.replay-actor.invalid"


def _ollama(manifest: ManifestLike, sdk_kwargs: dict[str, Any], *, asynchronous: bool) -> Any:
    """An ollama client over an httpx transport answering ``ollama`` (docs/ollama.md).

    The ollama client takes no API key and builds its own ``httpx`` client from its
    keyword arguments: the transport is one of them."""
    if "transport" in sdk_kwargs:
        raise TypeError("transport is built by replay-actor; pass the other client options only")
    import ollama

    from .httpx_transport import AsyncHttpxProviderTransport, HttpxProviderTransport

    provider, hint = _opened(manifest)
    try:
        if asynchronous:
            transport: Any = _hinted(AsyncHttpxProviderTransport(provider, "ollama"), hint)
            client: Any = ollama.AsyncClient(host=_OLLAMA_HOST, transport=transport, **sdk_kwargs)
        else:
            transport = _hinted(HttpxProviderTransport(provider, "ollama"), hint)
            client = ollama.Client(host=_OLLAMA_HOST, transport=transport, **sdk_kwargs)
    except BaseException:
        provider.release()
        raise
    weakref.finalize(client, provider.release)
    return client


def ollama_client(manifest: ManifestLike, **client_kwargs: Any) -> ollama.Client:
    """An ``ollama.Client`` whose ``chat``, ``generate`` and ``embed`` the manifest's
    provider answers (docs/ollama.md). ``client.close()`` releases the provider."""
    client: ollama.Client = _ollama(manifest, client_kwargs, asynchronous=False)
    return client


def async_ollama_client(manifest: ManifestLike, **client_kwargs: Any) -> ollama.AsyncClient:
    """The async ``ollama.AsyncClient`` on the provider's native async path;
    ``await client.close()`` releases the provider."""
    client: ollama.AsyncClient = _ollama(manifest, client_kwargs, asynchronous=True)
    return client
