"""A loopback stand-in for a vendor's model: an OpenAI-compatible chat-completions server
on 127.0.0.1 that answers arithmetic questions, for recording evaluations in tests.

``POST /v1/chat/completions``: the answer to the last user message's ``What is A op B?``
(op ``+``, ``-`` or ``times``): the number alone, or, when the message asks to ``Show your
working``, the sum in words (which a scorer looking for the digits marks wrong). When the
system prompt asks for a ``Final Answer:`` line (CrewAI's agents do), the answer comes
in that form. Each answer waits 0 to 80 ms, fixed per question, so concurrent calls
finish in another order than they were asked (what a real endpoint does).

Every request's body is kept in ``bodies``.
"""

from __future__ import annotations

import json
import re
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

__all__ = ["ArithVendor", "answer", "arith_vendor"]

_QUESTION = re.compile(r"What is (\d+) (\+|-|times) (\d+)\?")
_WORDS = [
    *("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"),
    *("ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen"),
    *("seventeen", "eighteen", "nineteen"),
]
_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def _words(n: int) -> str:
    if n < 0:
        return "minus " + _words(-n)
    if n < 20:
        return _WORDS[n]
    if n < 100:
        return _TENS[n // 10] + ("" if n % 10 == 0 else "-" + _WORDS[n % 10])
    return str(n)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def answer(messages: list[dict[str, Any]]) -> str:
    """The stand-in model's answer to a conversation.

    A judge's prompt (an evaluation tool's model-graded metric: the last user message asks
    for JSON and shows the answer it grades, after ``Actual Output:`` as DeepEval's G-Eval
    writes it or as ``"user_answer": "…"`` as ragas's answer accuracy does) gets a JSON
    verdict: full marks when the graded answer is the right number, none otherwise, as
    ``{"rating": 4 or 0}`` where the prompt asks for a ``"rating"`` (ragas), else
    ``{"reason": …, "score": 10 or 0}`` (DeepEval).
    """
    users = [_text(m.get("content")) for m in messages if m.get("role") == "user"]
    system = " ".join(_text(m.get("content")) for m in messages if m.get("role") == "system")
    asked = users[-1] if users else ""
    found = _QUESTION.search(" ".join(users))
    graded = re.findall(r'(?:Actual Output:\s*|"user_answer":\s*")([^\n"]*)', asked)
    if found is None:
        reply = f"I cannot tell: {asked[:40]}"
    else:
        a, op, b = int(found.group(1)), found.group(2), int(found.group(3))
        value = a + b if op == "+" else a - b if op == "-" else a * b
        reply = _words(value).capitalize() + "." if "Show your working" in asked else str(value)
        if "JSON" in asked and graded:  # the last one shown is graded; the rest are examples
            right = graded[-1].strip().rstrip(".") == str(value)
            if '"rating"' in asked:
                return json.dumps({"rating": 4 if right else 0})
            reason = "The answer is the right number." if right else "The number is wrong."
            return json.dumps({"reason": reason, "score": 10 if right else 0})
    if "Final Answer:" in system:
        reply = f"Thought: I now know the final answer\nFinal Answer: {reply}"
    return reply


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # many concurrent clients: well above the default 5
    owner: ArithVendor


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body = json.loads(raw)
        owner = self.server.owner
        with owner.lock:
            owner.bodies.append(body)
        messages = body.get("messages") or []
        reply = answer(messages)
        owner.stopping.wait((zlib.crc32(json.dumps(messages).encode()) % 5) * 0.02)
        data = json.dumps(
            {
                "id": "chatcmpl-arith",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "arith"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": reply},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class ArithVendor:
    """The server and its thread; ``close()`` stops both."""

    def __init__(self) -> None:
        self.bodies: list[Any] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self.port: int = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def close(self) -> None:
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)


@pytest.fixture
def arith_vendor() -> Iterator[ArithVendor]:
    server = ArithVendor()
    try:
        yield server
    finally:
        server.close()
