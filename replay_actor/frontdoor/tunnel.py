"""``CONNECT host:port``: the tunnel's TLS terminated at the front door, and each request
inside it served as that host's (docs/tools.md, "How HTTPS is answered").

Runs in: the process that serves (``replay-actor run``), on its event loop, under
uvicorn. A client that honours ``HTTPS_PROXY`` asks the front door for a tunnel to the
host of an ``https://`` URL. :func:`tunnelling_protocol` is the uvicorn protocol that
answers it, when ``run`` freezes tools:

1. the front door's HTTP/1.1 protocol (uvicorn's on httptools, :mod:`.protocol`;
   on h11 where httptools is not installed) parses the connection as always, but hands a
   ``CONNECT`` request to :class:`Tunnels` instead of to the application, and stops
   reading: the connection is no longer HTTP to the front door. httptools (llhttp) ends
   its parse of a CONNECT with ``HttpParserUpgrade`` at the offset of what follows the
   request; h11's connection is told to answer ``PAUSED``;
2. the tunnel answers ``200 Connection established`` and terminates TLS on the same
   socket (``loop.start_tls``, server side) with a certificate for the host made by the
   run's authority (:mod:`.authority`), which the child trusts through ``SSL_CERT_FILE``
   and its kin;
3. a fresh HTTP/1.1 protocol of the same parser serves the decrypted stream, its application the
   one :class:`Tunnels` names for ``(https, host, port)`` (the host's tool exchange, or
   the front door itself for a vendor's own host).

A tunnel the client never completes (it does not trust the run's certificate, or speaks
no TLS inside) is counted ``blocked`` and its host named once on stderr: the client
fails at once, never quietly. Nothing here parses HTTP: httptools (or h11) and uvicorn
do.
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Callable
from typing import Any, Final

import h11

from .authority import RunAuthority
from .protocol import http_protocol

__all__ = ["Tunnels", "parse_authority", "tunnelling_protocol"]

_ESTABLISHED: Final = b"HTTP/1.1 200 Connection established\r\n\r\n"
_BAD_TARGET: Final = (
    b"HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\nx-should-retry: false\r\n"
    b"content-length: 35\r\nconnection: close\r\n\r\nCONNECT needs a target of host:port\n"
)
#: A client that opened a tunnel has this long to complete its TLS handshake.
_HANDSHAKE_SECONDS: Final = 30.0

#: ``app_for(scheme, host, port)``: the ASGI application serving that origin.
AppFor = Callable[[str, str, int], Any]


def parse_authority(target: str, default_port: int) -> tuple[str, int] | None:
    """``(host, port)`` of ``host[:port]`` (``[v6]:port`` too), the host in lower case
    and an IPv6 address without brackets; None when it is not one."""
    host, port = target, default_port
    if target.startswith("["):
        close = target.find("]")
        if close < 0:
            return None
        host, rest = target[1:close], target[close + 1 :]
        if rest:
            if not rest.startswith(":") or not rest[1:].isdigit():
                return None
            port = int(rest[1:])
    elif ":" in target:
        host, _, digits = target.rpartition(":")
        if not digits.isdigit():
            return None
        port = int(digits)
    host = host.lower()
    if not host or not 0 < port < 65536 or any(c in host for c in "/?#@ \\"):
        return None
    if ":" in host:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return None
    return host, port


class Tunnels:
    """``Tunnels(authority, app_for, on_blocked=, ignored=)``: opens each CONNECT's
    tunnel; ``app_for`` names the application for an origin, ``on_blocked(host, why)``
    counts and reports a tunnel the client never completed; ``ignored(authority)`` is the
    raw refusal of a host the manifest ignores (None: not ignored)."""

    def __init__(
        self,
        authority: RunAuthority,
        app_for: AppFor,
        *,
        on_blocked: Callable[[str, str], None],
        ignored: Callable[[str], bytes | None] = lambda authority: None,
    ) -> None:
        self._authority = authority
        self.app_for = app_for
        self._on_blocked = on_blocked
        self._ignored = ignored

    async def open(
        self, target: bytes, outer: Any, inner_class: type[asyncio.Protocol], trailing: bytes
    ) -> None:
        """Answer the CONNECT for ``target`` on ``outer``'s connection (a uvicorn HTTP
        protocol), then serve what the tunnel carries with a new ``inner_class`` protocol;
        ``trailing``: what the client sent after the CONNECT, before any answer."""
        transport = outer.transport
        parsed = parse_authority(target.decode("latin-1"), 443)
        if parsed is None or trailing:
            # A client that sends before the answer is not speaking the tunnel's protocol.
            transport.write(_BAD_TARGET)
            transport.close()
            return
        host, port = parsed
        named = host if ":" not in host else f"[{host}]"
        refusal = self._ignored(f"{named}:{port}")
        if refusal is not None:
            # An ignored host (provider.ignore): refused before any tunnel, as the proxy
            # refuses it without tools (ignore.py).
            transport.write(refusal)
            transport.close()
            return
        inner: Any = inner_class(
            config=outer.config,  # type: ignore[call-arg]
            server_state=outer.server_state,
            app_state=outer.app_state,
        )
        inner.app = self.app_for("https", host, port)
        start = _StartLater(inner)
        transport.write(_ESTABLISHED)
        try:
            tls = await outer.loop.start_tls(
                transport,
                start,
                self._authority.server_context(host),
                server_side=True,
                ssl_handshake_timeout=_HANDSHAKE_SECONDS,
            )
        except (OSError, TimeoutError) as exc:  # ssl.SSLError and ConnectionError included
            transport.close()
            self._on_blocked(
                f"{named}:{port}",
                "the client did not complete TLS with the run's certificate "
                f"({type(exc).__name__}); does it trust SSL_CERT_FILE?",
            )
            return
        if tls is None:  # pragma: no cover - start_tls returns a transport or raises
            transport.close()
            return
        start.begin(tls)


class _StartLater(asyncio.Protocol):
    """The protocol ``start_tls`` is given: it may be handed decrypted data before
    ``start_tls`` returns (a client's request in the same packet as its handshake), so it
    keeps what comes until :meth:`begin` gives the inner protocol its transport."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._pending: list[bytes] = []
        self._eof = False
        self._lost: tuple[Exception | None] | None = None
        self._started = False

    def begin(self, transport: asyncio.Transport) -> None:
        self._started = True
        transport.set_protocol(self._inner)
        self._inner.connection_made(transport)
        for data in self._pending:
            self._inner.data_received(data)
        self._pending.clear()
        if self._eof:
            self._inner.eof_received()
        if self._lost is not None:
            self._inner.connection_lost(self._lost[0])

    def connection_made(self, transport: asyncio.BaseTransport) -> None:  # pragma: no cover
        """Never called: ``start_tls`` does not make the connection for its protocol."""

    def data_received(self, data: bytes) -> None:
        if self._started:  # pragma: no cover - the transport's protocol is the inner one
            self._inner.data_received(data)
        else:
            self._pending.append(data)

    def eof_received(self) -> bool | None:
        self._eof = True
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = (exc,)

    def pause_writing(self) -> None:
        """Nothing is written before :meth:`begin`."""

    def resume_writing(self) -> None:
        """Nothing is written before :meth:`begin`."""


def tunnelling_protocol(tunnels: Tunnels) -> type[asyncio.Protocol]:
    """The front door's HTTP/1.1 protocol with its ``CONNECT`` requests opening tunnels:
    on httptools (:mod:`.protocol`: half of h11's cost a request, and a recording
    through ``run`` relays every call through it), else on h11."""
    base = http_protocol()
    if isinstance(base, str):  # no httptools: h11's
        return _h11_tunnelling(tunnels)
    return _httptools_tunnelling(tunnels, base)


class _ConnectOnHttpTools:
    """What the front door's httptools protocol (uvicorn's) is taught to open tunnels:
    mixed in before it by :func:`_httptools_tunnelling`, which sets the class
    attributes."""

    _tunnels: Tunnels
    #: The protocol what a tunnel carries is served by: the front door's own.
    _inner: type[asyncio.Protocol]
    _parser_error: type[Exception]
    _parser_upgrade: type[Exception]
    _connect_target: bytes | None = None
    # uvicorn's HttpToolsProtocol's, which this is mixed into.
    parser: Any
    url: bytes
    connections: set[Any]
    tasks: set[asyncio.Task[None]]
    flow: Any
    loop: asyncio.AbstractEventLoop
    logger: Any

    def on_headers_complete(self) -> None:
        if self.parser.get_method() == b"CONNECT":
            # No request cycle: the parse ends with HttpParserUpgrade, and the tunnel
            # takes the connection over (data_received).
            self._connect_target = self.url
            return
        super().on_headers_complete()  # type: ignore[misc]

    def on_message_complete(self) -> None:
        if self._connect_target is None:
            super().on_message_complete()  # type: ignore[misc]

    def data_received(self, data: bytes) -> None:
        # uvicorn's, but for a CONNECT, which opens a tunnel with what followed it.
        self._unset_keepalive_if_required()  # type: ignore[attr-defined]
        try:
            self.parser.feed_data(data)
        except self._parser_upgrade as exc:
            self._upgrade(exc.args[0] if exc.args else len(data), data)
        except self._parser_error:
            message = "Invalid HTTP request received."
            self.logger.warning(message)
            self.send_400_response(message)  # type: ignore[attr-defined]

    def _upgrade(self, offset: int, data: bytes) -> None:
        target = self._connect_target
        if target is not None:
            self._connect(target, bytes(data[offset:]))
        elif self._should_upgrade():  # type: ignore[attr-defined]  # as uvicorn's
            self.handle_websocket_upgrade()  # type: ignore[attr-defined]
        else:
            self._unsupported_upgrade_warning()  # type: ignore[attr-defined]

    def _connect(self, target: bytes, trailing: bytes) -> None:
        self.flow.pause_reading()  # what follows is the tunnel's, not HTTP to this parser
        _hand_over(self, self._tunnels, target, self._inner, trailing)


def _hand_over(
    protocol: Any, tunnels: Tunnels, target: bytes, inner: type[asyncio.Protocol], trailing: bytes
) -> None:
    """The tunnel to ``target`` takes ``protocol``'s connection over (either parser's):
    uvicorn no longer counts it as one of its HTTP connections (``inner``, serving what
    the tunnel carries, will be), and the task opening it is uvicorn's to wait for."""
    protocol.connections.discard(protocol)
    task = protocol.loop.create_task(tunnels.open(target, protocol, inner, trailing))
    protocol.tasks.add(task)
    task.add_done_callback(protocol.tasks.discard)


def _httptools_tunnelling(tunnels: Tunnels, base: type[asyncio.Protocol]) -> type[asyncio.Protocol]:
    """The front door's httptools protocol ``base`` with its CONNECTs opening tunnels."""
    import httptools

    attributes = {
        "_tunnels": tunnels,
        "_inner": base,
        # A CONNECT ends the parse with HttpParserUpgrade; anything malformed, Error.
        "_parser_error": httptools.HttpParserError,
        "_parser_upgrade": httptools.HttpParserUpgrade,
    }
    made: type[asyncio.Protocol] = type(
        "TunnellingProtocol", (_ConnectOnHttpTools, base), attributes
    )
    return made


def _h11_tunnelling(tunnels: Tunnels) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with its ``CONNECT`` requests opening tunnels."""
    # uvicorn's own default, which it reads from h11 as this does.
    from h11._connection import DEFAULT_MAX_INCOMPLETE_EVENT_SIZE as _H11_MAX_INCOMPLETE
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class _ConnectAware(h11.Connection):
        """h11's connection, handing a CONNECT request to the tunnel: uvicorn is told
        ``PAUSED`` and stops reading, since what follows is not HTTP to the front door."""

        def __init__(self, on_connect: Callable[[h11.Request], None], *args: Any) -> None:
            super().__init__(*args)
            self._on_connect = on_connect

        def next_event(self) -> Any:
            event = super().next_event()
            if type(event) is h11.Request and event.method == b"CONNECT":
                self._on_connect(event)
                return h11.PAUSED
            return event

    class TunnellingProtocol(H11Protocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            size = self.config.h11_max_incomplete_event_size
            self.conn = _ConnectAware(
                self._connect, h11.SERVER, size if size is not None else _H11_MAX_INCOMPLETE
            )

        def _connect(self, event: h11.Request) -> None:
            self._unset_keepalive_if_required()
            trailing, _ = self.conn.trailing_data
            _hand_over(self, tunnels, event.target, H11Protocol, bytes(trailing))

    return TunnellingProtocol
