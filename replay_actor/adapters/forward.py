"""The live side of the ``http`` kind: a tool's exchange sent on to its own host
(docs/tools.md, "Recording").

Runs in: the caller (a live or record provider's calls; under ``replay-actor run``, the
front door's process). :class:`HttpForwarder` sends an ``http`` request to the host it
names and returns the neutral http response (``_http_kind.http_response``): the status,
the response headers but those of one hop, the encoding, the date and credentials
(``set-cookie``, ``*-key``, ``*-token``), and the body, decoded, whole.

- The request sent is the client's own (:data:`~replay_actor._http_kind.FORWARDING`,
  set by the front door for the call: its credentials, the body's own bytes, the URL as
  it sent it); a request built in code, with no such exchange, is sent as its neutral
  form says (no credentials, the JSON body in its canonical bytes).
- A host is verified against the roots this process trusts (``ssl``'s defaults: its own
  ``SSL_CERT_FILE`` if set, else the system's), never against the run's own authority.
- Redirects are not followed: each hop is an exchange of its own, the client's to make.
- An event stream is relayed to the client as it arrives (the exchange's relay) and
  recorded whole; if the client leaves first, what arrived is recorded as ``open``.
- A body over :data:`MAX_FORWARDED_BYTES` is refused (never truncated), as is a host
  that cannot be reached: ``LiveProviderError`` naming the host and the failure, never
  a header or a byte of the body.

Needs httpx2 (the ``live`` extra).
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import urllib.parse
from typing import TYPE_CHECKING, Any, Final

from .._canonical import canonical_json
from .._errors import LiveProviderError, RequestError
from .._http_kind import FORWARDING, Forwarding, http_response, is_credential_header
from .._request import request_hash

if TYPE_CHECKING:
    import httpx2

__all__ = ["MAX_FORWARDED_BYTES", "HttpForwarder"]

#: The largest answer a forwarder reads (a fixture's response ceiling is the tighter
#: bound for a recording: ``response_too_large``).
MAX_FORWARDED_BYTES: Final = 32 * 1024 * 1024
#: Response headers never recorded: the hop's, and the body's encoding and length (the
#: body is recorded decoded, and its length is the replay's).
_DROPPED: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "content-encoding",
        # The front door's server dates its answers; a recorded date would be a second.
        "date",
    }
)
_EVENT_STREAM: Final = "text/event-stream"


class _Outgoing:
    """What is sent: method, URL, headers, body."""

    __slots__ = ("body", "headers", "method", "url")

    def __init__(self, method: str, url: str, headers: list[tuple[str, str]], body: bytes) -> None:
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body

    def __repr__(self) -> str:
        return "<an outgoing tool exchange>"


def _neutral_body(request: dict[str, Any]) -> bytes:
    if "json" in request:
        return canonical_json(request["json"])
    if "text" in request:
        return str(request["text"]).encode()
    if "base64" in request:
        return base64.b64decode(request["base64"])
    return b""


def _outgoing(request: dict[str, Any]) -> _Outgoing:
    """The client's own exchange when the front door handed it for this request, else
    the neutral request's."""
    handed: Forwarding | None = FORWARDING.get()
    if handed is not None and handed.digest == request_hash(request):
        return _Outgoing(request["method"], handed.url, handed.headers, handed.body)
    host = request["host"]
    shown = f"[{host}]" if ":" in host else host
    query = urllib.parse.urlencode([(name, value) for name, value in request.get("query", [])])
    url = f"{request['scheme']}://{shown}:{request['port']}{request['path']}"
    url += f"?{query}" if query else ""
    headers = list(request.get("headers", {}).items())
    return _Outgoing(request["method"], url, headers, _neutral_body(request))


def _kept(headers: Any) -> list[tuple[str, str]]:
    return [
        (name.lower(), value)
        for name, value in headers.multi_items()
        if name.lower() not in _DROPPED and not is_credential_header(name)
    ]


def _where(request: dict[str, Any]) -> str:
    return f"{request['scheme']}://{request['host']}:{request['port']}"


def _unreachable(request: dict[str, Any], failure: str) -> LiveProviderError:
    return LiveProviderError(f"the tool host {_where(request)} could not be reached ({failure})")


def _too_large(request: dict[str, Any]) -> LiveProviderError:
    return LiveProviderError(
        f"the answer of {_where(request)} is larger than {MAX_FORWARDED_BYTES} bytes; "
        "it was not recorded"
    )


class HttpForwarder:
    """``HttpForwarder()``: sends ``http`` requests to their hosts (``complete``,
    ``acomplete``); ``close`` frees its connections."""

    def __init__(self) -> None:
        try:
            import httpx2
        except ImportError as exc:  # pragma: no cover - the [live] extra is missing
            raise RequestError(
                "recording a tool's HTTP exchange needs httpx2: pip install 'replay-actor[live]'"
            ) from exc
        self._httpx = httpx2
        self._verify = ssl.create_default_context()
        # No read timeout: an event stream may be quiet for minutes; the client leaving
        # ends it. Connecting and writing are bounded.
        self._timeout = httpx2.Timeout(None, connect=30.0, write=60.0, pool=60.0)

    def _client_options(self) -> dict[str, Any]:
        return {"verify": self._verify, "timeout": self._timeout, "follow_redirects": False}

    async def acomplete(self, request: dict[str, Any]) -> dict[str, Any]:
        got = await self._asend(request)
        if isinstance(got, str):
            # Raised outside the except block: no chained HTTP error, whose frames hold
            # the client's headers, is carried along.
            raise _unreachable(request, got)
        return got

    async def _asend(self, request: dict[str, Any]) -> dict[str, Any] | str:
        """The neutral answer, or the name of the HTTP error that stopped it."""
        out = _outgoing(request)
        handed = FORWARDING.get()
        relay = handed.relay if handed is not None else None
        try:
            async with (
                self._httpx.AsyncClient(**self._client_options()) as client,
                client.stream(out.method, out.url, headers=out.headers, content=out.body) as got,
            ):
                return await _read_async(request, got, relay)
        except self._httpx.HTTPError as exc:
            return type(exc).__name__

    def complete(self, request: dict[str, Any]) -> dict[str, Any]:
        got = self._send(request)
        if isinstance(got, str):
            raise _unreachable(request, got)
        return got

    def _send(self, request: dict[str, Any]) -> dict[str, Any] | str:
        out = _outgoing(request)
        try:
            with (
                self._httpx.Client(**self._client_options()) as client,
                client.stream(out.method, out.url, headers=out.headers, content=out.body) as got,
            ):
                chunks, size = [], 0
                for chunk in got.iter_bytes():
                    size += len(chunk)
                    if size > MAX_FORWARDED_BYTES:
                        raise _too_large(request)
                    chunks.append(chunk)
                return http_response(got.status_code, _kept(got.headers), b"".join(chunks))
        except self._httpx.HTTPError as exc:
            return type(exc).__name__

    def close(self) -> None:
        """Nothing is held between calls (a client per call, as the async adapters)."""

    async def aclose(self) -> None:
        """As :meth:`close`."""

    def __repr__(self) -> str:
        return "<HttpForwarder>"


async def _read_async(request: dict[str, Any], got: httpx2.Response, relay: Any) -> dict[str, Any]:
    """Read the answer whole; an event stream relayed as it comes, and left ``open`` if
    the client leaves first."""
    headers = _kept(got.headers)
    streaming = relay is not None and got.headers.get("content-type", "").startswith(_EVENT_STREAM)
    if streaming:
        relay.start(got.status_code, headers)
    chunks: list[bytes] = []
    size = 0
    reading = got.aiter_bytes().__aiter__()
    left = asyncio.ensure_future(relay.wait_gone()) if streaming else None
    try:
        while True:
            step = asyncio.ensure_future(anext(reading, None))
            if left is not None:
                await asyncio.wait({step, left}, return_when=asyncio.FIRST_COMPLETED)
                if not step.done():
                    step.cancel()
                    return http_response(got.status_code, headers, b"".join(chunks), open=True)
            chunk = await step
            if chunk is None:
                return http_response(got.status_code, headers, b"".join(chunks))
            size += len(chunk)
            if size > MAX_FORWARDED_BYTES:
                raise _too_large(request)
            chunks.append(chunk)
            if streaming:
                relay.chunk(chunk)
    finally:
        if left is not None:
            left.cancel()
