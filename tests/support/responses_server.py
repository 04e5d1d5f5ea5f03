"""A real HTTP server speaking the OpenAI Responses API shape, for the live/record tests.

It binds 127.0.0.1 on a free port and serves ``POST /{scenario}/v1/responses``, so a
provider's (or an SDK's) ``base_url`` is ``http://127.0.0.1:PORT/{scenario}/v1``.
Scenarios:

=============  ===========================================================================
``echo``       200; text ``"{n}: {last user text}"``, n counting this scenario's calls
``weather``    a tool loop: a ``get_weather`` call (``{"city":"Paris"}``, call id
               ``call_{n}``) unless the last input item is a ``function_call_output``,
               then the text ``"Forecast: {that output}"``
``search``     a tool loop: a ``web_search`` call (``{"query":"weather in Paris"}``) unless the
               last input item is a ``function_call_output``, then ``"Found: {that output}"``
``reasoning``  a reasoning item (with ``encrypted_content``) before the text ``"Hello!"``
``think``      ``weather`` with ``REASONING_ITEM`` before the ``get_weather`` call
``refusal``    a message whose content is a ``refusal`` part
``builtin``    a ``web_search_call`` output item (no neutral form)
``429xN``      the first N calls get 429 with ``Retry-After: 0``, then as ``echo``
=============  ===========================================================================

Every request is kept in ``received`` (scenario, path, lowercased headers, decoded body).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.chat_server import JSONHandler, LoopbackServer

REASONING_ITEM: dict[str, Any] = {
    "id": "rs_test1",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "The user greets me."}],
    "encrypted_content": "ZW5jcnlwdGVkLXJlYXNvbmluZw==",
}


def _last_user_text(body: Any) -> str:
    if not isinstance(body, dict):
        return ""
    items = body.get("input")
    if isinstance(items, str):
        return items
    for item in reversed(items or []):
        if isinstance(item, dict) and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, list):
                return "".join(p.get("text", "") for p in content if isinstance(p, dict))
            return str(content)
    return ""


def _text_item(text: str, n: int) -> dict[str, Any]:
    return {
        "id": f"msg_live{n}",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _response(output: list[dict[str, Any]], n: int, status: str = "completed") -> bytes:
    return json.dumps(
        {
            "id": f"resp_live{n}",
            "object": "response",
            "created_at": 1700000000 + n,
            "status": status,
            "model": "test-model",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": 5,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 3,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 8,
            },
        }
    ).encode()


#: The tool-loop scenarios: the tool called, its arguments, the final answer's prefix.
_TOOL_LOOPS = {
    "weather": ("get_weather", '{"city":"Paris"}', "Forecast: "),
    "think": ("get_weather", '{"city":"Paris"}', "Forecast: "),
    "search": ("web_search", '{"query":"weather in Paris"}', "Found: "),
}


def _tool_loop(scenario: str, last: Any, n: int) -> bytes:
    """A call of the scenario's tool, or the final answer once its output came back."""
    name, arguments, prefix = _TOOL_LOOPS[scenario]
    if isinstance(last, dict) and last.get("type") == "function_call_output":
        return _response([_text_item(f"{prefix}{last.get('output')}", n)], n)
    call = {
        "id": f"fc_live{n}",
        "type": "function_call",
        "status": "completed",
        "call_id": f"call_{n}",
        "name": name,
        "arguments": arguments,
    }
    return _response([REASONING_ITEM, call] if scenario == "think" else [call], n)


class _Handler(JSONHandler):
    def do_POST(self) -> None:
        got, n = self._receive()
        scenario, body = got.scenario, got.body
        items = body.get("input") if isinstance(body, dict) else None
        last = items[-1] if isinstance(items, list) and items else None
        if not self.path.endswith("/v1/responses"):
            self._send(404, b'{"error":{"code":"not_found"}}')
        elif scenario.startswith("429x") and n <= int(scenario[4:]):
            self._send(429, b'{"error":{"code":"rate_limit"}}', {"Retry-After": "0"})
        elif scenario == "echo" or scenario.startswith("429x"):
            self._send(200, _response([_text_item(f"{n}: {_last_user_text(body)}", n)], n))
        elif scenario in _TOOL_LOOPS:
            self._send(200, _tool_loop(scenario, last, n))
        elif scenario == "reasoning":
            self._send(200, _response([REASONING_ITEM, _text_item("Hello!", n)], n))
        elif scenario == "refusal":
            refusal = {
                "id": f"msg_live{n}",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "refusal", "refusal": "I can't help with that."}],
            }
            self._send(200, _response([refusal], n))
        elif scenario == "builtin":
            call = {"id": "ws_1", "type": "web_search_call", "status": "completed"}
            self._send(200, _response([call, _text_item("found", n)], n))
        else:
            self._send(404, b'{"error":{"code":"no_such_scenario"}}')


class ResponsesServer(LoopbackServer):
    """The Responses-wire server and its thread; use as a context manager (or ``close()``)."""

    handler = _Handler
    name = "responses-server"

    def base_url(self, scenario: str = "echo") -> str:
        return f"http://127.0.0.1:{self.port}/{scenario}/v1"


@pytest.fixture
def responses_server() -> Iterator[ResponsesServer]:
    """A running Responses-wire server for one test, stopped afterwards."""
    server = ResponsesServer()
    try:
        yield server
    finally:
        server.close()
    assert not server.alive
