"""httpx (1.x/0.x) transports, for frameworks still built on httpx (docs/sdk.md).

The same routing, mapping and failure answers as ``replay_actor.integrations.transport``
(whose httpx2 classes the current ``openai`` and ``anthropic`` SDKs take); only the HTTP
client library differs, so a framework that builds its own ``httpx.Client`` can replay,
record or go live through a provider too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx

from ._serve import Answer, Api, Exchange

if TYPE_CHECKING:
    from .._interface import Provider

__all__ = ["AsyncHttpxProviderTransport", "HttpxProviderTransport"]


def _response(answer: Answer) -> httpx.Response:
    status, headers, body = answer
    return httpx.Response(status, headers=headers, content=body)


class HttpxProviderTransport(httpx.BaseTransport):
    """An ``httpx.BaseTransport`` answering ``api``'s endpoint from ``provider``.

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

    def handle_request(self, request: httpx.Request) -> httpx.Response:
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
        return f"<HttpxProviderTransport {self._exchange.api} {self._provider!r}>"


class AsyncHttpxProviderTransport(httpx.AsyncBaseTransport):
    """The async form of :class:`HttpxProviderTransport`: awaits ``provider.acomplete``."""

    def __init__(
        self, provider: Provider, api: Api = "openai", *, release_on_close: bool = True
    ) -> None:
        self._exchange = Exchange(api)
        self._provider = provider
        self._release_on_close = release_on_close

    @property
    def provider(self) -> Provider:
        return self._provider

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
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
        return f"<AsyncHttpxProviderTransport {self._exchange.api} {self._provider!r}>"
