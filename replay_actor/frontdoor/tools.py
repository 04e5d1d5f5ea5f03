"""A tool's HTTP exchange at the front door: read into an ``http`` request, answered from
the provider (docs/tools.md).

Runs in: the process that serves (``replay-actor run``), on its event loop, under
uvicorn. :class:`ToolExchange` owns what happens to a request the child sent through
the proxy to a host other than the front door (a plain ``http://`` request in absolute
form, or a request inside a ``CONNECT`` tunnel, :mod:`.tunnel`):

- a vendor's own host (a family's ``hosts``: a client with a hard-coded
  ``https://api.openai.com/v1``) is the front door itself: its request is served as if
  it had come to the front door's URL, token and all, so it hashes as every chat does;
- any other host's request becomes an :class:`~replay_actor._http_kind.HttpRequest`:
  method, scheme, host, port, path, query (credentials left out), the headers the
  manifest names (``provider.http_headers``) and the body (JSON canonical, text, or
  base64), and goes to the provider once, on the serving's path (counted, logged, a
  miss reported with its ``add`` command);
- a replay answers it from the fixture (status, headers, body; an event stream as the
  recorded events, held open when the recorded client left it open); a recording
  forwards the client's own exchange (its credentials included, which never enter the
  request) through :data:`~replay_actor._http_kind.FORWARDING`, and an event stream is
  relayed to the client as it arrives while it is recorded.

A failure is an answer in OpenAI's error envelope with ``x-should-retry: false``
(422 for a miss or an exhausted sequence, as for every vendor); the request's bytes never
appear in one.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import urllib.parse
from collections.abc import Awaitable, Callable, Collection, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from .._canonical import canonical_json
from .._errors import RequestError
from .._http_kind import (
    FORWARDING,
    HTTP,
    Forwarding,
    HttpAnswer,
    is_credential_parameter,
    read_http_response,
)
from .._request import request_hash
from .._strict_json import MAX_BODY_DEPTH, NotStrictJSON, loads_strict
from ..serving import Answer, AsyncServing, failure_answer
from ..vendors import FAMILIES
from .app import MAX_BODY_BYTES, Receive, Scope, Send

if TYPE_CHECKING:
    from .authority import RunAuthority

__all__ = [
    "DEFAULT_HTTP_HEADERS",
    "VENDOR_HOSTS",
    "ToolExchange",
    "ToolSettings",
    "read_tool_request",
]

#: The request headers hashed by default (``provider.http_headers``).
DEFAULT_HTTP_HEADERS: Final = ("content-type",)
#: Headers of one hop, never forwarded nor replayed: the connection's, not the exchange's.
_HOP: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
    }
)
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
#: The hosts of the vendors' own APIs (each family's ``hosts``): served as the front door.
VENDOR_HOSTS: Final = tuple(host for family in FAMILIES for host in family.hosts)

ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


# -- reading: an exchange into an http request ----------------------------------------------


def _is_json(content_type: str) -> bool:
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def _is_form(content_type: str) -> bool:
    return content_type.partition(";")[0].strip().lower() == "application/x-www-form-urlencoded"


def _pairs(text: str) -> list[tuple[str, str]]:
    """Decoded ``name=value`` pairs in order, credentials left out."""
    pairs = urllib.parse.parse_qsl(text, keep_blank_values=True, errors="replace")
    return [(n, v) for n, v in pairs if not is_credential_parameter(n)]


def _json_body(body: bytes) -> Any:
    """The JSON value of a body, credentials left out of an object's top level; raises
    ValueError when it is not JSON RFC 8785 can say."""
    try:
        value = loads_strict(body.decode("utf-8"), max_depth=MAX_BODY_DEPTH)
    except (UnicodeDecodeError, NotStrictJSON):
        raise ValueError("not JSON") from None
    if type(value) is dict:
        value = {k: v for k, v in value.items() if not is_credential_parameter(k)}
    try:
        canonical_json(value)  # numbers RFC 8785 cannot say exactly: kept as text
    except RequestError:
        raise ValueError("not canonical JSON") from None
    return value


def _body_fields(body: bytes, content_type: str) -> dict[str, Any]:
    """The request's body field: ``json``, ``text`` or ``base64`` (none for no body)."""
    if not body:
        return {}
    if _is_json(content_type):
        try:
            return {"json": _json_body(body)}
        except ValueError:
            pass
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        import base64

        return {"base64": base64.b64encode(body).decode("ascii")}
    if _is_form(content_type):
        return {"text": urllib.parse.urlencode(_pairs(text))}
    return {"text": text}


def read_tool_request(
    origin: tuple[str, str, int],
    scope: Scope,
    body: bytes,
    header_names: Collection[str],
) -> dict[str, Any]:
    """The ``http`` request of one exchange: ``origin`` is ``(scheme, host, port)``,
    ``scope`` the ASGI scope (its origin-form ``raw_path`` and ``query_string``),
    ``header_names`` the headers to hash (lower case)."""
    scheme, host, port = origin
    headers: dict[str, str] = {}
    content_type = ""
    for raw_name, raw_value in scope["headers"]:
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        if name == "content-type":
            content_type = value
        if name in header_names:
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
    request: dict[str, Any] = {
        "kind": HTTP,
        "method": scope["method"],
        "scheme": scheme,
        "host": host,
        "port": port,
        "path": bytes(scope.get("raw_path") or b"/").decode("latin-1"),
    }
    query = _pairs(bytes(scope.get("query_string", b"")).decode("latin-1"))
    if query:
        request["query"] = query
    if headers:
        request["headers"] = headers
    request.update(_body_fields(body, content_type))
    return request


def _url(origin: tuple[str, str, int], scope: Scope) -> str:
    scheme, host, port = origin
    shown = f"[{host}]" if ":" in host else host
    authority = shown if _DEFAULT_PORTS[scheme] == port else f"{shown}:{port}"
    target = bytes(scope.get("raw_path") or b"/").decode("latin-1")
    query = bytes(scope.get("query_string", b"")).decode("latin-1")
    return f"{scheme}://{authority}{target}" + (f"?{query}" if query else "")


# -- answering ---------------------------------------------------------------------------------


def _header_bytes(text: str) -> bytes:
    # A value HTTP/1.1 carries as Latin-1; one the tool sent as UTF-8 goes back as it came.
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8")


def _head(status: int, headers: list[tuple[str, str]], length: int | None) -> dict[str, Any]:
    raw = [
        (_header_bytes(name), _header_bytes(value))
        for name, value in headers
        if name.lower() not in _HOP
    ]
    if length is not None:
        raw.append((b"content-length", str(length).encode()))
    return {"type": "http.response.start", "status": status, "headers": raw}


async def _send_answer(send: Send, answer: Answer) -> None:
    """One of the front door's own answers (a failure)."""
    await send(_head(answer.status, answer.headers, len(answer.body)))
    await send({"type": "http.response.body", "body": answer.body})


async def _until_gone(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _send_stored(send: Send, receive: Receive, answer: HttpAnswer) -> None:
    """A stored answer; one recorded ``open`` is held open until its client leaves."""
    if not answer.open:
        # 204 and 304 have no body to measure (RFC 9110 forbids a length for a 204).
        length = None if answer.status in (204, 304) else len(answer.body)
        await send(_head(answer.status, answer.headers, length))
        await send({"type": "http.response.body", "body": answer.body})
        return
    await send(_head(answer.status, answer.headers, None))
    await send({"type": "http.response.body", "body": answer.body, "more_body": True})
    await _until_gone(receive)


class _Relay:
    """An event stream on its way from the tool host to the client while it is recorded
    (:class:`~replay_actor._http_kind.StreamRelay`): the forwarder calls ``start`` and
    ``chunk`` (from any thread), the exchange sends what comes."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self.items: asyncio.Queue[tuple[int, list[tuple[str, str]]] | bytes] = asyncio.Queue()
        self.left = asyncio.Event()

    def _put(self, item: tuple[int, list[tuple[str, str]]] | bytes) -> None:
        if threading.get_ident() == self._thread:
            self.items.put_nowait(item)
        else:
            self._loop.call_soon_threadsafe(self.items.put_nowait, item)

    def start(self, status: int, headers: list[tuple[str, str]]) -> None:
        self._put((status, headers))

    def chunk(self, data: bytes) -> None:
        self._put(data)

    @property
    def gone(self) -> bool:
        return self.left.is_set()

    async def wait_gone(self) -> None:
        await self.left.wait()


class ToolExchange:
    """``ToolExchange(serving, front_door, header_names=..., vendor_hosts=..., forwards=...)``:
    the applications of the origins the proxy serves (:meth:`app_for`). ``front_door`` is
    the front door's own application (a vendor host's requests), ``forwards`` whether the
    provider forwards an exchange to its host (record and live: the client's own exchange
    is then handed to it)."""

    def __init__(
        self,
        serving: AsyncServing,
        front_door: ASGIApp,
        *,
        header_names: Collection[str] = DEFAULT_HTTP_HEADERS,
        vendor_hosts: Collection[str] = (),
        forwards: bool = False,
    ) -> None:
        self._serving = serving
        self._front_door = front_door
        self._names = frozenset(name.lower() for name in header_names)
        self._vendor_hosts = frozenset(host.lower() for host in vendor_hosts)
        self._forwards = forwards

    def app_for(self, scheme: str, host: str, port: int) -> ASGIApp:
        """The application serving requests for ``scheme://host:port``."""
        if host in self._vendor_hosts:
            return self._front_door
        origin = (scheme, host, port)

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http":
                await self._serve(origin, scope, receive, send)

        return app

    async def _serve(
        self, origin: tuple[str, str, int], scope: Scope, receive: Receive, send: Send
    ) -> None:
        url = _url(origin, scope)
        try:
            body = await _read_body(receive)
        except _Gone:
            return
        if body is None:
            self._serving.refused("invalid", url)
            message = f"the request body exceeds the front door's bound of {MAX_BODY_BYTES} bytes"
            await _send_answer(send, failure_answer(RequestError(message)))
            return
        request = read_tool_request(origin, scope, body, self._names)
        via = (HTTP, url.partition("?")[0])
        if not self._forwards:
            got = await self._serving.ask(request, via, read_http_response)
            await self._finish(got, send, receive)
            return
        await self._forward(request, via, (url, scope, body), receive, send)

    async def _finish(self, got: HttpAnswer | Exception, send: Send, receive: Receive) -> None:
        if isinstance(got, Exception):
            await _send_answer(send, failure_answer(got, self._serving.hint))
        else:
            await _send_stored(send, receive, got)

    async def _forward(
        self,
        request: dict[str, Any],
        via: tuple[str, str],
        exchange: tuple[str, Scope, bytes],
        receive: Receive,
        send: Send,
    ) -> None:
        """Ask a forwarding provider, the client's own exchange handed beside the request;
        an event stream is sent on as it arrives."""
        url, scope, body = exchange
        relay = _Relay()
        try:
            digest = request_hash(request)
        except RequestError as exc:  # the provider refuses it the same way: one path
            got: HttpAnswer | Exception = exc
        else:
            headers = [
                (n.decode("latin-1"), v.decode("latin-1"))
                for n, v in scope["headers"]
                if n.decode("latin-1").lower() not in _HOP and n != b"host"
            ]
            token = FORWARDING.set(Forwarding(digest, url, headers, body, relay))
            try:
                asked = asyncio.ensure_future(self._serving.ask(request, via, read_http_response))
            finally:
                FORWARDING.reset(token)
            relayed = await _relayed(asked, relay, send, receive)
            if relayed is None:
                return  # the stream went to the client as it came
            got = relayed
        await self._finish(got, send, receive)


async def _first(*futures: asyncio.Future[Any]) -> None:
    """Wait until one of ``futures`` is done."""
    await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)


async def _relayed(
    asked: asyncio.Future[HttpAnswer | Exception],
    relay: _Relay,
    send: Send,
    receive: Receive,
) -> HttpAnswer | Exception | None:
    """Send the relayed stream while ``asked`` runs; the answer to send afterwards, or
    None once a relayed stream is complete (what was recorded is what was sent)."""
    first = asyncio.ensure_future(relay.items.get())
    await _first(asked, first)
    if not first.done():
        first.cancel()
        return asked.result()
    head = first.result()
    assert isinstance(head, tuple)  # the forwarder starts before its first chunk
    await send(_head(head[0], head[1], None))
    watching = asyncio.ensure_future(_until_gone(receive))
    watching.add_done_callback(lambda _: relay.left.set())
    try:
        while True:
            item = asyncio.ensure_future(relay.items.get())
            await _first(asked, item)
            if not item.done():
                item.cancel()
                break
            await _send_chunk(send, item.result())
        while not relay.items.empty():
            await _send_chunk(send, relay.items.get_nowait())
        await send({"type": "http.response.body", "body": b""})
    finally:
        watching.cancel()
    await asked
    return None


async def _send_chunk(send: Send, data: tuple[int, list[tuple[str, str]]] | bytes) -> None:
    if isinstance(data, bytes):
        await send({"type": "http.response.body", "body": data, "more_body": True})


class _Gone(Exception):
    """The client left before its body was complete: nothing will read an answer, and
    the provider must not be asked for a request cut short."""


async def _read_body(receive: Receive) -> bytes | None:
    """The request body, or None past the front door's bound; ``_Gone`` if the client
    left first."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message: MutableMapping[str, Any] = await receive()
        if message["type"] != "http.request":
            raise _Gone
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _report_tunnel(host: str, why: str) -> None:
    print(f"replay-actor run: blocked a tunnel to {host}: {why}", file=sys.stderr)


@dataclass(frozen=True)
class ToolSettings:
    """How ``run`` freezes tools (docs/tools.md): the run's ``authority``, the request
    headers hashed (``provider.http_headers``), whether the provider ``forwards`` an
    exchange (record, live) and who hears of a tunnel the client never completed
    (``report(host, why)``, once per host)."""

    authority: RunAuthority
    header_names: tuple[str, ...] = DEFAULT_HTTP_HEADERS
    forwards: bool = False
    report: Callable[[str, str], None] = _report_tunnel

    def serve(
        self,
        serving: AsyncServing,
        front_door: ASGIApp,
        ignored: Callable[[str], bytes | None] = lambda authority: None,
    ) -> tuple[Callable[[str, str, int], ASGIApp], type[asyncio.Protocol]]:
        """The applications of other hosts' exchanges and the protocol that opens
        tunnels, for a front door's ``serving`` (its provider, counts and run log) and
        its own application ``front_door``; ``ignored(authority)`` refuses a tunnel to a
        host the manifest ignores (its raw answer; None: not ignored)."""
        from .tunnel import Tunnels, tunnelling_protocol

        exchange = ToolExchange(
            serving,
            front_door,
            header_names=self.header_names,
            vendor_hosts=VENDOR_HOSTS,
            forwards=self.forwards,
        )
        reported: set[str] = set()

        def blocked(host: str, why: str) -> None:
            serving.refused("blocked", host)
            if host not in reported:
                reported.add(host)
                self.report(host, why)

        tunnels = Tunnels(self.authority, exchange.app_for, on_blocked=blocked, ignored=ignored)
        return exchange.app_for, tunnelling_protocol(tunnels)
