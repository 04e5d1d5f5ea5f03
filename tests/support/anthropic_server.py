"""A real HTTP server speaking Anthropic's Messages API shape, for the live tests.

It binds 127.0.0.1 on a free port and serves ``POST /{scenario}/v1/messages``, so a
provider's ``base_url`` is ``http://127.0.0.1:PORT/{scenario}`` (the vendor's own form:
the SDK and the adapter append ``/v1/messages``). Scenarios:

=========  ===============================================================================
``echo``   200; one text block ``"{n}: {last user text}"``, n counting this scenario's calls
``tools``  200; one ``tool_use`` block (``get_weather``, ``{"city": "Paris"}``), ``tool_use``
``think``  a thinking tool loop: a ``thinking`` and a ``redacted_thinking`` block (with
           signatures) before the ``tool_use`` of ``tools``, unless the last message holds a
           ``tool_result``, then the text ``"Forecast: {its content}"``
``429xN``  the first N calls get 429 with ``retry-after: 0``, then as ``echo``
``500``    always 500, with an error body echoing the x-api-key header and the prompt
``401``    401 ``authentication_error`` echoing the key (as vendors do)
=========  ===============================================================================

Every request is kept in ``received`` (scenario, path, lowercased headers, decoded body).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.chat_server import JSONHandler, LoopbackServer

#: What the ``think`` scenario's model thought before its tool call (as the API sends it).
THINKING: list[dict[str, Any]] = [
    {"type": "thinking", "thinking": "The user wants weather.", "signature": "c2lnLTE="},
    {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"},
]


def _last_user_text(body: Any) -> str:
    if not isinstance(body, dict) or not body.get("messages"):
        return ""
    content = body["messages"][-1].get("content")
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return str(content)


def _tool_result(body: Any) -> Any:
    """The content of the last message's ``tool_result`` block, or None."""
    if not isinstance(body, dict) or not body.get("messages"):
        return None
    content = body["messages"][-1].get("content")
    for block in content if isinstance(content, list) else ():
        if isinstance(block, dict) and block.get("type") == "tool_result":
            return block.get("content")
    return None


def _message(content: list[dict[str, Any]], stop: str) -> bytes:
    return json.dumps(
        {
            "id": "msg_test",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 4, "output_tokens": 2},
        }
    ).encode()


class _Handler(JSONHandler):
    def do_POST(self) -> None:
        got, n = self._receive()
        scenario, headers, body = got.scenario, got.headers, got.body
        prompt = _last_user_text(body)
        key = headers.get("x-api-key", "")
        if not self.path.endswith("/v1/messages"):
            self._send(404, b'{"type":"error","error":{"type":"not_found_error"}}')
        elif scenario.startswith("429x") and n <= int(scenario[4:]):
            limited = b'{"type":"error","error":{"type":"rate_limit_error"}}'
            self._send(429, limited, {"retry-after": "0"})
        elif scenario == "echo" or scenario.startswith("429x"):
            self._send(200, _message([{"type": "text", "text": f"{n}: {prompt}"}], "end_turn"))
        elif scenario == "tools":
            block = {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "get_weather",
                "input": {"city": "Paris"},
            }
            self._send(200, _message([block], "tool_use"))
        elif scenario == "think":
            result = _tool_result(body)
            if result is not None:
                self._send(
                    200, _message([{"type": "text", "text": f"Forecast: {result}"}], "end_turn")
                )
            else:
                use = {
                    "type": "tool_use",
                    "id": f"toolu_{n}",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                }
                self._send(200, _message([*THINKING, use], "tool_use"))
        elif scenario == "500":
            error = {"type": "error", "error": {"type": "api_error", "message": f"{key} {prompt}"}}
            self._send(500, json.dumps(error).encode())
        elif scenario == "401":
            error = {
                "type": "error",
                "error": {"type": "authentication_error", "message": f"invalid x-api-key {key}"},
            }
            self._send(401, json.dumps(error).encode())
        else:
            self._send(404, b'{"type":"error","error":{"type":"not_found_error"}}')


class AnthropicServer(LoopbackServer):
    """The Anthropic-wire server and its thread; use as a context manager (or ``close()``)."""

    handler = _Handler
    name = "anthropic-server"

    def base_url(self, scenario: str = "echo") -> str:
        return f"http://127.0.0.1:{self.port}/{scenario}"


@pytest.fixture
def claude() -> Iterator[AnthropicServer]:
    """A running Anthropic-wire server for one test, stopped afterwards."""
    server = AnthropicServer()
    try:
        yield server
    finally:
        server.close()
    assert not server.alive
