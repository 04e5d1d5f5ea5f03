"""The front door's ASGI application: token check, body bound, routing (docs/front-door.md).

Runs in: the process that serves (``replay-actor serve`` or ``replay-actor run``), on its
event loop, under uvicorn. It owns what happens to one HTTP request before and after the
provider is asked:

1. the token: ``Authorization: Bearer``, ``x-api-key``, ``x-goog-api-key`` or ``api-key``
   (Azure OpenAI's) must carry it
   (constant-time comparison), else 401 before the body is read, so a request without the
   token never reaches the provider and never consumes a sequence element;
2. the body bound: a declared ``content-length`` above it is refused at once and a body
   that grows past it is refused as soon as it does (413); the body is read chunk by
   chunk, so no more than the bound is ever held;
3. the rest is :class:`~replay_actor.serving.AsyncServing` with ``api=None``,
   given the raw headers: routing by path to every registered vendor, the
   ``x-replay-scope`` header, the provider asked exactly once, every failure an answer
   with ``x-should-retry: false``.

Every answer of this module is in the vendor's own error envelope (chosen by the path),
so the vendor's SDK raises it as its own exception, and none carries a request hash.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final

from ..serving import Answer, AsyncServing, Exchange

__all__ = [
    "MAX_BODY_BYTES",
    "FrontDoorApp",
    "Receive",
    "Scope",
    "Send",
]

#: The largest request body accepted (413 above it): 32 MiB, twice the fixture's
#: default line ceiling, so any request a fixture can hold fits with room for the
#: vendor envelope and inline images.
MAX_BODY_BYTES: Final = 32 * 1024 * 1024

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class _TooLarge(Exception):
    pass


class _Gone(Exception):
    """The client went away before its body was complete: nothing to answer, and the
    provider must not be asked for a request no one will read."""


class FrontDoorApp:
    """``FrontDoorApp(serving, token, max_body_bytes=MAX_BODY_BYTES)``: a bare ASGI 3 app
    answering every registered vendor API from ``serving``'s provider."""

    def __init__(
        self, serving: AsyncServing, token: str, *, max_body_bytes: int = MAX_BODY_BYTES
    ) -> None:
        if not token:
            raise ValueError("the front door needs a non-empty token")
        self._serving = serving
        self._token = token.encode()
        self._bearer = b"bearer " + self._token
        self._max_body = max_body_bytes
        # Only for the envelopes of the answers made here (401, 413): its own vendor
        # objects, so no state of the serving vendors is touched.
        self._envelopes = Exchange(None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            # lifespan is off under our server; anything else (websocket) is not ours.
            return
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        path: str = scope["path"]
        if not self._authorised(headers):
            self._serving.refused("invalid", path)
            await _send(
                send,
                self._envelopes.refusal(
                    path,
                    401,
                    "unauthorized",
                    "this replay-actor front door needs its token in Authorization: Bearer, "
                    "x-api-key, x-goog-api-key or api-key",
                    headers,
                ),
            )
            return
        try:
            body = await self._body(headers, receive)
        except _TooLarge:
            self._serving.refused("invalid", path)
            await _send(
                send,
                self._envelopes.refusal(
                    path,
                    413,
                    "request_too_large",
                    f"the request body exceeds the front door's bound of {self._max_body} bytes",
                    headers,
                ),
            )
            return
        except _Gone:
            return
        try:
            query = bytes(scope.get("query_string", b"")).decode("latin-1")
            answer = await self._serving.serve(scope["method"], path, body, headers, query)
        except Exception as exc:
            # serve answers every failure itself; this is a bug. Still an answer the SDKs
            # do not retry (a 500 from the server would be retried), naming only the type.
            answer = self._envelopes.refusal(
                path,
                500,
                "replay_internal_error",
                f"internal error ({type(exc).__name__})",
                headers,
            )
        await _send(send, answer)

    def _authorised(self, headers: list[tuple[bytes, bytes]]) -> bool:
        # Every candidate is compared (in constant time), so the time taken says nothing
        # about which header or how much of the token matched.
        ok = False
        for name, value in headers:
            if name == b"authorization":
                ok |= hmac.compare_digest(value.lower()[:7] + value[7:], self._bearer)
            elif name in (b"x-api-key", b"x-goog-api-key", b"api-key"):  # api-key: Azure
                ok |= hmac.compare_digest(value, self._token)
        return ok

    async def _body(self, headers: list[tuple[bytes, bytes]], receive: Receive) -> bytes:
        for name, value in headers:
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0  # the server has already refused a malformed length
                if declared > self._max_body:
                    raise _TooLarge
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # http.disconnect
                raise _Gone
            chunk: bytes = message.get("body", b"")
            size += len(chunk)
            if size > self._max_body:
                raise _TooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)


async def _send(send: Send, answer: Answer) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": answer.status,
            "headers": [
                *((k.encode("latin-1"), v.encode("latin-1")) for k, v in answer.headers),
                (b"content-length", str(len(answer.body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": answer.body})
