"""A tool's HTTPS API on 127.0.0.2, with a certificate authority of the test's own: what
an agent's web tool calls (docs/tools.md).

:class:`TestAuthority` makes a CA and a certificate for ``127.0.0.2`` (an IP SAN) with
``cryptography``; ``run`` is told to trust the CA through its own ``SSL_CERT_FILE``
(:meth:`TestAuthority.environment`), as a user's machine trusts the real web's roots.
:class:`SearchAPI` serves, over HTTPS on ``127.0.0.2`` (a free port):

==========================  =====================================================================
``GET /search?q=…``         200 JSON ``{"query", "results": [...], "edition"}``: the results for
                            the query, from ``answers`` (a test changes them to see a changed
                            answer), keys in the server's own order (not sorted)
``POST /summarise``         200 JSON ``{"summary": …}`` of the posted ``text`` (a JSON body's, or a
                            form's)
``GET /events``             an event stream (``text/event-stream``): three events, then the end
``GET /forever``            an event stream that sends one event and never ends (until the
                            server closes)
``GET /binary``             200 ``application/octet-stream``: bytes that are not UTF-8
``GET /status/{n}``         status ``n`` with a JSON body
==========================  =====================================================================

Every request is kept in ``received`` (method, path, lowercased headers, body bytes), so a
test can check what reached the tool: the credentials the client sent, for instance.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: The tool's address: another loopback "host" than the front door's 127.0.0.1.
TOOL_HOST = "127.0.0.2"
BINARY = bytes(range(256)) * 4


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


class TestAuthority:
    """A CA of the test's own and a certificate for ``127.0.0.2``, written to ``folder``:
    ``ca`` (PEM), ``cert`` and ``key``."""

    __test__ = False  # not a test class, whatever pytest thinks of its name

    def __init__(self, folder: Path) -> None:
        now = datetime.datetime.now(datetime.UTC)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca = (
            x509.CertificateBuilder()
            .subject_name(_name("tool test CA"))
            .issuer_name(_name("tool test CA"))
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .sign(ca_key, hashes.SHA256())
        )
        key = ec.generate_private_key(ec.SECP256R1())
        leaf = (
            x509.CertificateBuilder()
            .subject_name(_name(TOOL_HOST))
            .issuer_name(ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(TOOL_HOST))]),
                critical=False,
            )
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        folder.mkdir(parents=True, exist_ok=True)
        self.ca = folder / "tool-ca.pem"
        self.cert = folder / "tool-cert.pem"
        self.key = folder / "tool-key.pem"
        self.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        self.cert.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
        self.key.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, self.key)
        return context

    def environment(self, env: dict[str, str]) -> dict[str, str]:
        """``env`` with ``run`` trusting this CA (its own ``SSL_CERT_FILE``)."""
        return {**env, "SSL_CERT_FILE": str(self.ca)}


@dataclass
class ToolRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class _State:
    answers: dict[str, list[str]] = field(default_factory=dict)
    edition: int = 1
    received: list[ToolRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default stderr log."""

    def _keep(self) -> tuple[str, dict[str, list[str]], bytes]:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        headers = {k.lower(): v for k, v in self.headers.items()}
        state = self.server.state
        with state.lock:
            state.received.append(ToolRequest(self.command, self.path, headers, body))
        parts = urllib.parse.urlsplit(self.path)
        return parts.path, urllib.parse.parse_qs(parts.query), body

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Set-Cookie", "session=tool-session-cookie")
        self.send_header("X-Tool-Edition", str(self.server.state.edition))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        path, query, _ = self._keep()
        state = self.server.state
        if path == "/search":
            asked = query.get("q", [""])[0]
            results = state.answers.get(asked, [f"nothing found for {asked}"])
            # Not sorted: a replay must give the very bytes, not a re-encoding.
            answer = {"results": results, "query": asked, "edition": state.edition}
            self._send(200, json.dumps(answer).encode())
        elif path == "/events":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            for n in range(3):
                self.wfile.write(f'id: {n}\nevent: tick\ndata: {{"n": {n}}}\n\n'.encode())
                self.wfile.flush()
            self.close_connection = True
        elif path == "/forever":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.write(b'event: hello\ndata: {"first": true}\n\n')
            self.wfile.flush()
            state.stopping.wait(30.0)
            self.close_connection = True
        elif path == "/binary":
            self._send(200, BINARY, "application/octet-stream")
        elif path.startswith("/status/"):
            status = int(path.rpartition("/")[2])
            self._send(status, json.dumps({"status": status}).encode())
        else:
            self._send(404, b'{"error": "no such path"}')

    def do_POST(self) -> None:
        path, _, body = self._keep()
        if path == "/summarise":
            if self.headers.get("Content-Type", "").startswith("application/json"):
                text = json.loads(body or b"{}").get("text", "")
            else:
                text = urllib.parse.parse_qs(body.decode()).get("text", [""])[0]
            self._send(200, json.dumps({"summary": text[:20]}).encode())
        else:
            self._send(404, b'{"error": "no such path"}')


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: _State


class SearchAPI:
    """The HTTPS search API on ``127.0.0.2``, in a thread; a context manager. Without an
    ``authority`` it speaks plain HTTP."""

    def __init__(self, authority: TestAuthority | None) -> None:
        self._state = _State()
        self._httpd = _Server((TOOL_HOST, 0), _Handler)
        self._httpd.state = self._state
        self.scheme = "http" if authority is None else "https"
        if authority is not None:
            self._httpd.socket = authority.server_context().wrap_socket(
                self._httpd.socket, server_side=True
            )
        self.port: int = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="search-api",
            daemon=True,
        )
        self._thread.start()

    @property
    def url(self) -> str:
        return f"{self.scheme}://{TOOL_HOST}:{self.port}"

    @property
    def answers(self) -> dict[str, list[str]]:
        return self._state.answers

    @property
    def received(self) -> list[ToolRequest]:
        with self._state.lock:
            return list(self._state.received)

    def set_edition(self, edition: int) -> None:
        self._state.edition = edition

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def close(self) -> None:
        self._state.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10.0)

    def __enter__(self) -> SearchAPI:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@pytest.fixture
def tool_authority(tmp_path: Path) -> TestAuthority:
    return TestAuthority(tmp_path / "tool-ca")


@pytest.fixture
def search_api(tool_authority: TestAuthority) -> Iterator[SearchAPI]:
    """A running search API for one test, stopped (and its thread joined) afterwards."""
    server = SearchAPI(tool_authority)
    try:
        yield server
    finally:
        server.close()
    assert not server.alive
