"""A real HTTP server speaking the OpenAI chat-completions shape, for the live tests.

It binds 127.0.0.1 on a free port and serves ``POST /{scenario}/v1/chat/completions``;
the scenario (the first path segment, chosen per provider through ``base_url``) decides
the answer:

=============  ================================================================================
``echo``       200; content ``"{n}: {last message's content}"``, n counting this scenario's calls
``jitter``     as ``echo``, after 0-150 ms (fixed per n): answers finish out of order
``tools``      200; one tool call (``get_weather``, ``{"city":"Paris"}``), finish ``tool_calls``
``429xN``      the first N calls get 429 with ``Retry-After: 0``, then as ``echo``
``500``        always 500, with an error body that echoes the Authorization header and prompt
``401``        401 with ``code: invalid_api_key`` and a message echoing the key (as vendors do)
``keycode``    400 whose ``error.code`` and ``error.type`` are the API key itself
``keyusage``   as ``echo``, with the API key echoed inside ``usage``
``slow``       answers only after ``close()`` (or 10 s): past any test's client timeout
``badjson``    200 with a body that is not JSON (and quotes the prompt)
``nochoices``  200 with a JSON object that has no ``choices``
``dropped``    closes the connection without answering
=============  ================================================================================

Every request is kept in ``received`` (scenario, path, lowercased headers, decoded body)
so a test can check exactly what the adapter sent.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

import pytest


@dataclass
class Received:
    scenario: str
    path: str
    headers: dict[str, str]
    body: Any


class LoopbackServer:
    """A ``ThreadingHTTPServer`` on 127.0.0.1 (a free port) in a thread of its own, that
    keeps every request it gets; a vendor's server subclasses it with its handler."""

    handler: type[BaseHTTPRequestHandler]
    name = "loopback-server"

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._httpd = _Server(("127.0.0.1", 0), self.handler)
        self._httpd.owner = self
        self.port: int = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=self.name,
            daemon=True,
        )
        self._thread.start()

    def record(self, received: Received) -> int:
        """Keep a request; return its 1-based number within its scenario."""
        with self._lock:
            self.received.append(received)
            n = self._counts.get(received.scenario, 0) + 1
            self._counts[received.scenario] = n
            return n

    def count(self, scenario: str) -> int:
        with self._lock:
            return self._counts.get(scenario, 0)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def close(self) -> None:
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10.0)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Many clients connect at once in the load tests (the default backlog is 5).
    request_queue_size = 256
    owner: Any  # the LoopbackServer subclass whose handler serves it

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client killed or gone mid-request (the crash tests) is not an error here."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class JSONHandler(BaseHTTPRequestHandler):
    """What every loopback vendor server's handler shares: HTTP/1.1, no stderr log, a
    JSON answer, and a request read whole, decoded and kept by the server."""

    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default stderr log."""

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        try:
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up first (a timeout test's "slow" answer): nothing to report.
            self.close_connection = True

    def _receive(self) -> tuple[Received, int]:
        """The request (its body decoded, None if not JSON), kept by the server, and its
        1-based number among the requests the server got."""
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        parts = self.path.strip("/").split("/")
        headers = {k.lower(): v for k, v in self.headers.items()}
        got = Received(parts[0] if parts else "", self.path, headers, body)
        return got, self.server.owner.record(got)


class _Handler(JSONHandler):
    def do_POST(self) -> None:  # noqa: PLR0912
        owner = self.server.owner
        got, n = self._receive()
        scenario, headers, body = got.scenario, got.headers, got.body
        prompt = ""
        if isinstance(body, dict) and body.get("messages"):
            prompt = str(body["messages"][-1].get("content"))
        auth = headers.get("authorization", "")
        if scenario.startswith("429x") and n <= int(scenario[4:]):
            self._send(429, b'{"error":{"code":"rate_limit"}}', {"Retry-After": "0"})
        elif scenario in ("echo",) or scenario.startswith("429x"):
            self._send(200, _completion(f"{n}: {prompt}", None, "stop"))
        elif scenario == "jitter":
            # Answers finish in another order than they were asked (0 to 150 ms, fixed
            # per call number): what a real endpoint does to concurrent requests.
            owner.stopping.wait(((n * 7) % 4) * 0.05)
            self._send(200, _completion(f"{n}: {prompt}", None, "stop"))
        elif scenario == "tools":
            call = {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
            }
            self._send(200, _completion(None, [call], "tool_calls"))
        elif scenario == "500":
            error = {"error": {"message": f"boom for {auth} asking {prompt}", "code": 500}}
            self._send(500, json.dumps(error).encode())
        elif scenario == "401":
            error = {
                "error": {
                    "message": f"Incorrect API key provided: {auth} for {prompt}",
                    "code": "invalid_api_key",
                }
            }
            self._send(401, json.dumps(error).encode())
        elif scenario == "keycode":
            # A vendor that echoes the key as its "error code" (a short identifier).
            key = auth.removeprefix("Bearer ")
            self._send(400, json.dumps({"error": {"code": key, "type": key}}).encode())
        elif scenario == "keyusage":
            # A vendor that echoes the key inside the usage of a good answer.
            completion = json.loads(_completion(f"{n}: {prompt}", None, "stop"))
            completion["usage"]["note"] = auth.removeprefix("Bearer ")
            self._send(200, json.dumps(completion).encode())
        elif scenario == "slow":
            owner.stopping.wait(10.0)
            self._send(200, _completion("late", None, "stop"))
        elif scenario == "badjson":
            self._send(200, b'{"choices": [' + prompt.encode() + auth.encode())
        elif scenario == "nochoices":
            self._send(200, b'{"object": "chat.completion"}')
        elif scenario == "dropped":
            self.close_connection = True
            self.connection.shutdown(2)
        else:
            self._send(404, b'{"error":{"code":"no_such_scenario"}}')


def _completion(content: str | None, tool_calls: list[Any] | None, finish: str) -> bytes:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    return json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "test-model",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        }
    ).encode()


class ChatServer(LoopbackServer):
    """The OpenAI-wire server and its thread; use as a context manager (or ``close()``)."""

    handler = _Handler
    name = "chat-server"

    def base_url(self, scenario: str = "echo") -> str:
        return f"http://127.0.0.1:{self.port}/{scenario}/v1"


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    """A running server for one test, stopped (and its thread joined) afterwards."""
    server = ChatServer()
    try:
        yield server
    finally:
        server.close()
    assert not server.alive
