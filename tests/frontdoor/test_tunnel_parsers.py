"""A CONNECT tunnel through each HTTP parser the front door may run on (frontdoor/tunnel.py):
httptools (the default, ``frontdoor/protocol.py``) and h11 (where httptools is not
installed). A real uvicorn server on 127.0.0.1 with each parser's tunnelling protocol, a
real httpx2 client through it as its proxy, trusting only the run's authority: the
request inside the tunnel reaches the origin's application with its host, a plain request
beside it reaches the front door's, a CONNECT with bytes sent before the answer and one
with a bad target are refused, and an ignored host is refused before any tunnel.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
import uvicorn

from replay_actor.frontdoor.authority import RunAuthority
from replay_actor.frontdoor.protocol import http_protocol
from replay_actor.frontdoor.tunnel import Tunnels, _h11_tunnelling, _httptools_tunnelling

pytestmark = pytest.mark.timeout(60)

_REFUSED = b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


def _app(name: str, seen: list[tuple[str, str, str]]) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        seen.append((name, scope["method"], scope["path"]))
        body = f"{name} {scope['path']}".encode()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})

    return app


class _Door:
    """uvicorn on a thread of its own, its protocol ``protocol(tunnels)``."""

    def __init__(self, parser: str) -> None:
        self.authority = RunAuthority()
        self.seen: list[tuple[str, str, str]] = []
        self.blocked: list[str] = []
        tunnels = Tunnels(
            self.authority,
            lambda scheme, host, port: _app(f"{scheme}://{host}:{port}", self.seen),
            on_blocked=lambda host, why: self.blocked.append(host),
            ignored=lambda authority: _REFUSED if authority.startswith("ignored.") else None,
        )
        if parser == "h11":
            protocol = _h11_tunnelling(tunnels)
        else:
            base = http_protocol()
            assert not isinstance(base, str), "httptools is installed by the serve extra"
            protocol = _httptools_tunnelling(tunnels, base)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(
            _app("front", self.seen), http=protocol, lifespan="off", log_level="error"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self._serve)
        self.thread.start()

    def _serve(self) -> None:
        asyncio.run(self.server.serve(sockets=[self.sock]))

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.authority.close()
        self.sock.close()


@pytest.fixture(params=["httptools", "h11"])
def door(request: pytest.FixtureRequest) -> Iterator[_Door]:
    made = _Door(request.param)
    try:
        for _ in range(200):  # until it listens
            if made.server.started:
                break
            threading.Event().wait(0.02)
        yield made
    finally:
        made.close()
    assert not made.thread.is_alive()


def test_a_tunnelled_request_reaches_the_origins_app(door: _Door) -> None:
    trust = ssl.create_default_context(cafile=door.authority.certificate)
    proxy = f"http://127.0.0.1:{door.port}"
    with httpx2.Client(proxy=proxy, verify=trust, timeout=20) as client:
        for _ in range(2):  # two requests on one tunnel
            answer = client.get("https://tool.example:8443/search?q=1")
            assert answer.status_code == 200
            assert answer.text == "https://tool.example:8443 /search"
    with httpx2.Client(timeout=20) as plain:
        assert plain.get(f"{proxy}/v1/models").text == "front /v1/models"
    assert door.seen == [
        ("https://tool.example:8443", "GET", "/search"),
        ("https://tool.example:8443", "GET", "/search"),
        ("front", "GET", "/v1/models"),
    ]
    assert door.blocked == []


def _raw(door: _Door, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", door.port), timeout=20) as raw:
        raw.sendall(data)
        chunks = []
        while chunk := raw.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_bytes_before_the_answer_or_a_bad_target_are_refused(door: _Door) -> None:
    early = _raw(door, b"CONNECT tool.example:443 HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\n")
    assert early.startswith(b"HTTP/1.1 400 Bad Request")
    bad = _raw(door, b"CONNECT tool.example:http HTTP/1.1\r\nHost: x\r\n\r\n")
    assert bad.startswith(b"HTTP/1.1 400 Bad Request")
    assert door.seen == []


def test_an_ignored_host_is_refused_before_any_tunnel(door: _Door) -> None:
    assert _raw(door, b"CONNECT ignored.example:443 HTTP/1.1\r\nHost: x\r\n\r\n") == _REFUSED
    assert door.seen == [] and door.blocked == []


def test_a_client_that_does_not_trust_the_run_is_blocked(door: _Door) -> None:
    proxy = f"http://127.0.0.1:{door.port}"
    with (
        httpx2.Client(proxy=proxy, verify=ssl.create_default_context(), timeout=20) as client,
        pytest.raises(httpx2.ConnectError),
    ):
        client.get("https://tool.example:8443/search")
    for _ in range(200):  # the tunnel's task reports it after the client gave up
        if door.blocked:
            break
        threading.Event().wait(0.02)
    assert door.blocked == ["tool.example:8443"]
    assert door.seen == []
