"""httpx2 transports that answer vendor API calls from a provider (docs/sdk.md).

``ProviderTransport`` and ``AsyncProviderTransport`` are what the ``openai`` (3.x) and
``anthropic`` SDKs send through once a client is built on them: the application keeps its
own client and its calls, and the provider from ``open_provider`` (replay, live or
record) answers. Routing, mapping and failure answers are in ``_serve``; these classes
only carry bytes between the HTTP client library and the provider, asking it exactly
once per request (the sync one calls ``complete``, the async one awaits ``acomplete``,
so no worker thread is involved).

Closing the transport (which closing the SDK client does, through its HTTP client)
releases the provider unless ``release_on_close=False``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx2

from ._serve import Answer, Api, Exchange

if TYPE_CHECKING:
    from .._interface import Provider

__all__ = ["AsyncProviderTransport", "ProviderTransport"]


def _response(answer: Answer) -> httpx2.Response:
    status, headers, body = answer
    return httpx2.Response(status, headers=headers, content=body)


class ProviderTransport(httpx2.BaseTransport):
    """An ``httpx2.BaseTransport`` answering ``api``'s endpoint from ``provider``.

    ``api`` is ``"openai"`` (``POST .../chat/completions``) or ``"anthropic"``
    (``POST .../v1/messages``); any other path is answered 404 naming it.
    """

    def __init__(
        self, provider: Provider, api: Api = "openai", *, release_on_close: bool = True
    ) -> None:
        self._exchange = Exchange(api)
        self._provider = provider
        self._release_on_close = release_on_close

    @property
    def provider(self) -> Provider:
        return self._provider

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        got = self._exchange.read(request.method, request.url.path, request.read())
        if isinstance(got, tuple):
            return _response(got)
        try:
            response: dict[str, Any] = self._provider.complete(got.request)
        except Exception as exc:
            return _response(self._exchange.fail(exc))
        return _response(self._exchange.answer(got, response))

    def close(self) -> None:
        if self._release_on_close:
            self._provider.release()

    def __repr__(self) -> str:
        return f"<ProviderTransport {self._exchange.api} {self._provider!r}>"


class AsyncProviderTransport(httpx2.AsyncBaseTransport):
    """The async form of :class:`ProviderTransport`: awaits ``provider.acomplete``."""

    def __init__(
        self, provider: Provider, api: Api = "openai", *, release_on_close: bool = True
    ) -> None:
        self._exchange = Exchange(api)
        self._provider = provider
        self._release_on_close = release_on_close

    @property
    def provider(self) -> Provider:
        return self._provider

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        got = self._exchange.read(request.method, request.url.path, await request.aread())
        if isinstance(got, tuple):
            return _response(got)
        try:
            response: dict[str, Any] = await self._provider.acomplete(got.request)
        except Exception as exc:
            return _response(self._exchange.fail(exc))
        return _response(self._exchange.answer(got, response))

    async def aclose(self) -> None:
        if self._release_on_close:
            self._provider.release()

    def __repr__(self) -> str:
        return f"<AsyncProviderTransport {self._exchange.api} {self._provider!r}>"
