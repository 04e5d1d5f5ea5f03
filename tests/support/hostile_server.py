"""An OpenAI chat endpoint on 127.0.0.1 that is hostile or unlucky, for the live
adapters' HTTP clients (tests/adapters/test_http.py, test_aclients.py): it trickles its
answer, quotes the API key in an error code or an answer, echoes it in a header, or
answers 200 MiB; and the helpers those tests share (a manifest table aimed at it, what a
reporter would show of an exception, whether text holds a piece of the key)."""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.chat_server import JSONHandler, LoopbackServer

__all__ = [
    "ASK",
    "KEY",
    "TRICKLE_SECONDS",
    "VAR",
    "HostileServer",
    "MiB",
    "hostile",
    "live",
    "pieces",
    "shown",
]

#: A key long enough for the issue's codes (30 to 39 characters), in the code charset.
KEY = "sk-proj-Q7x9LmN3vB2kR8tY4wZ6pD1sHf"
VAR = "REPLAY_ACTOR_HARDENING_KEY"
ASK = {"messages": [{"role": "user", "content": "hello"}]}
MiB = 1024 * 1024
#: How long a trickling scenario would go on if nobody hung up: far past any bound here.
TRICKLE_SECONDS = 120.0


def _completion(content: str | None, **message: Any) -> bytes:
    return json.dumps(
        {
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, **message},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    ).encode()


class _Handler(JSONHandler):
    """``POST /{scenario}/v1/chat/completions``; see ``HostileServer``."""

    def _trickle(self, first: bytes) -> None:
        """Send ``first``, then one byte every 0.2 s until the client hangs up."""
        owner: HostileServer = self.server.owner
        owner.trickling += 1
        try:
            self.wfile.write(first)
            self.wfile.flush()
            until = time.monotonic() + TRICKLE_SECONDS
            while time.monotonic() < until and not owner.stopping.wait(0.2):
                self.wfile.write(b" ")
                self.wfile.flush()
        except OSError:
            pass  # the client hung up: what a deadline does
        finally:
            owner.trickling -= 1
            self.close_connection = True

    def _huge(self, *, chunked: bool) -> None:
        """A 200 MiB chat completion, in 1 MiB writes, until the client hangs up."""
        owner: HostileServer = self.server.owner
        head = b'{"choices":[{"index":0,"finish_reason":"stop","message":{"content":"'
        tail = b'"}}]}'
        block = b"a" * MiB
        total = len(head) + 200 * MiB + len(tail)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(total))
        self.end_headers()
        try:
            for part in [head, *([block] * 200), tail]:
                if chunked:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                else:
                    self.wfile.write(part)
                owner.sent += len(part)
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass
        self.close_connection = True

    def do_POST(self) -> None:
        owner: HostileServer = self.server.owner
        got, _ = self._receive()
        scenario, headers = got.scenario, got.headers
        key = headers.get("authorization", "").removeprefix("Bearer ")
        if scenario == "trickle-body":
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            self._trickle(head + b"Content-Length: 100000\r\n\r\n")
        elif scenario == "trickle-headers":
            self._trickle(b"HTTP/1.1 200 OK\r\nX-Slow: ")
        elif scenario.startswith("code-"):
            code = {
                "invalid": "invalid_" + key[7:],
                "rejected": key[:30] + "_rejected",
                "suffix": "key." + key[-30:],
            }[scenario[5:]]
            self._send(401, json.dumps({"error": {"code": code, "type": code}}).encode())
        elif scenario == "almost-key":
            self._send(200, _completion(f"your key is {key[:-1]}"))
        elif scenario == "key-header":
            self._send(200, _completion("fine"), {"X-Echo-Key": key})
        elif scenario == "huge":
            self._huge(chunked=False)
        elif scenario == "huge-chunked":
            self._huge(chunked=True)
        else:
            owner.ports.append(self.client_address[1])
            self._send(200, _completion("fine"))


class HostileServer(LoopbackServer):
    """Scenarios (the first path segment):

    ``trickle-body``     headers, then one body byte every 0.2 s (for 120 s)
    ``trickle-headers``  the status line, then one header byte every 0.2 s
    ``code-invalid`` / ``code-rejected`` / ``code-suffix``
                         401 whose ``error.code`` is ``"invalid_" + key[7:]``,
                         ``key[:30] + "_rejected"``, ``"key." + key[-30:]``
    ``almost-key``       200 whose content quotes the key less its last character
    ``key-header``       200 with the key echoed in a response header
    ``huge``             200 MiB, with a ``Content-Length``; ``huge-chunked`` without
    anything else        200 ``fine``
    """

    handler = _Handler
    name = "hostile-server"

    def __init__(self) -> None:
        self.trickling = 0
        self.sent = 0
        #: The client port of each plain ``fine`` request: which connection it came on.
        self.ports: list[int] = []
        super().__init__()

    def base_url(self, scenario: str) -> str:
        return f"http://127.0.0.1:{self.port}/{scenario}/v1"


def live(server: HostileServer, scenario: str, **extra: Any) -> dict[str, Any]:
    table: dict[str, Any] = {
        "kind": "live",
        "adapter": "openai",
        "model": "m",
        "base_url": server.base_url(scenario),
        "api_key_env": VAR,
        "retry_backoff": 0.0,
    }
    table.update(extra)
    return {"provider": table}


def shown(exc: BaseException) -> str:
    """Everything a reporter would show: message, repr, args, attributes, and every
    frame's locals below the test's own frame."""
    tb = exc.__traceback__
    assert tb is not None
    report = traceback.TracebackException(type(exc), exc, tb.tb_next, capture_locals=True)
    return " ".join(
        [str(exc), repr(exc), repr(exc.args), repr(vars(exc)), "".join(report.format())]
    )


def pieces(text: str) -> bool:
    """Whether ``text`` holds any 12-character run of the key."""
    return any(KEY[i : i + 12] in text for i in range(len(KEY) - 11))


@pytest.fixture
def hostile() -> Iterator[HostileServer]:
    """A running hostile server for one test, stopped (and its thread joined) afterwards."""
    server = HostileServer()
    try:
        yield server
    finally:
        server.close()
    assert not server.alive
