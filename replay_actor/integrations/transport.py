"""httpx2 transports that answer vendor API calls from a provider (docs/sdk.md).

``ProviderTransport`` and ``AsyncProviderTransport`` are what the ``openai`` (3.x) and
``anthropic`` SDKs send through once a client is built on them: the application keeps its
own client and its calls, and the provider from ``open_provider`` (replay, live or
record) answers. Routing, mapping and failure answers are ``serving``'s; these classes
only carry bytes between the HTTP client library and the provider, asking it exactly
once per request (the sync one calls ``complete``, the async one awaits ``acomplete``,
so no worker thread is involved).

Closing the transport (which closing the SDK client does, through its HTTP client)
releases the provider unless ``release_on_close=False``.
"""

from __future__ import annotations

import httpx2

from ..serving import Answer, AsyncServing, Serving

__all__ = ["AsyncProviderTransport", "ProviderTransport"]


def _response(answer: Answer) -> httpx2.Response:
    return httpx2.Response(answer.status, headers=answer.headers, content=answer.body)


class ProviderTransport(Serving, httpx2.BaseTransport):
    """An ``httpx2.BaseTransport`` answering ``api``'s endpoint from ``provider``:
    ``ProviderTransport(provider, api="openai" | "anthropic", release_on_close=True)``.

    ``api`` is ``"openai"`` (``POST .../chat/completions``) or ``"anthropic"``
    (``POST .../v1/messages``); any other path is answered 404 naming it.
    """

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        query = url.query.decode("latin-1")
        return _response(
            self.serve(request.method, url.path, request.read(), request.headers, query)
        )


class AsyncProviderTransport(AsyncServing, httpx2.AsyncBaseTransport):
    """The async form of :class:`ProviderTransport`: awaits ``provider.acomplete``."""

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        url = request.url
        query = url.query.decode("latin-1")
        return _response(await self.serve(request.method, url.path, body, request.headers, query))
