"""httpx (1.x/0.x) transports, for frameworks still built on httpx (docs/sdk.md).

The same routing, mapping and failure answers as ``replay_actor.integrations.transport``
(whose httpx2 classes the current ``openai`` and ``anthropic`` SDKs take); only the HTTP
client library differs, so a framework that builds its own ``httpx.Client`` can replay,
record or go live through a provider too.
"""

from __future__ import annotations

import httpx

from ..serving import Answer, AsyncServing, Serving

__all__ = ["AsyncHttpxProviderTransport", "HttpxProviderTransport"]


def _response(answer: Answer) -> httpx.Response:
    return httpx.Response(answer.status, headers=answer.headers, content=answer.body)


class HttpxProviderTransport(Serving, httpx.BaseTransport):
    """An ``httpx.BaseTransport`` answering ``api``'s endpoint from ``provider``."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        query = url.query.decode("latin-1")
        return _response(
            self.serve(request.method, url.path, request.read(), request.headers, query)
        )


class AsyncHttpxProviderTransport(AsyncServing, httpx.AsyncBaseTransport):
    """The async form of :class:`HttpxProviderTransport`: awaits ``provider.acomplete``."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        url = request.url
        query = url.query.decode("latin-1")
        return _response(await self.serve(request.method, url.path, body, request.headers, query))
