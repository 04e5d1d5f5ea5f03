"""A real HTTP server speaking Google's Gemini API shape, for the live tests.

It binds 127.0.0.1 on a free port and serves
``POST /{scenario}/{version}/models/{model}:generateContent``, so a provider's
``base_url`` is ``http://127.0.0.1:PORT/{scenario}`` (the vendor's own form: the SDK and
the adapter append the version and the model). Scenarios:

============  ==================================================================================
``echo``      200; one text part ``"{n}: {last user text}"``, n counting this scenario's calls
``tools``     200; a thought part, then ``get_weather({"city": "Paris"})`` with no id and a
              ``thoughtSignature`` (what Gemini's thinking models send), ``STOP``
``think``     ``tools`` unless the last turn holds a ``functionResponse``, then the text
              ``"Forecast: {its response's result}"`` (a thinking model's tool loop)
``blocked``   200; no candidates, ``promptFeedback.blockReason: SAFETY``
``429xN``     the first N calls get 429 with ``retry-after: 0``, then as ``echo``
``500``       always 500, with an error body echoing the x-goog-api-key header and the prompt
``401``       401 ``UNAUTHENTICATED`` echoing the key
============  ==================================================================================

Every request is kept in ``received`` (scenario, path, lowercased headers, decoded body).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.chat_server import JSONHandler, LoopbackServer

THOUGHT = {"text": "The user wants the weather.", "thought": True}
SIGNATURE = "c2lnbmVkLXRob3VnaHQ="


def _last_user_text(body: Any) -> str:
    if not isinstance(body, dict) or not body.get("contents"):
        return ""
    parts = body["contents"][-1].get("parts") or []
    return "".join(p.get("text", "") for p in parts if isinstance(p, dict))


def _function_response(body: Any) -> Any:
    """The ``result`` of the last turn's ``functionResponse``, or None."""
    contents = body.get("contents") if isinstance(body, dict) else None
    if not contents or not isinstance(contents[-1], dict):
        return None
    for part in contents[-1].get("parts") or ():
        if isinstance(part, dict) and isinstance(part.get("functionResponse"), dict):
            return (part["functionResponse"].get("response") or {}).get("result")
    return None


def _answer(parts: list[dict[str, Any]], finish: str) -> bytes:
    return json.dumps(
        {
            "candidates": [
                {"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": 0}
            ],
            "usageMetadata": {
                "promptTokenCount": 4,
                "candidatesTokenCount": 2,
                "thoughtsTokenCount": 1,
                "totalTokenCount": 7,
            },
            "modelVersion": "gemini-test-001",
            "responseId": "live-response-id",
        }
    ).encode()


class _Handler(JSONHandler):
    def _error(self, status: int, name: str, message: str, headers: Any = None) -> None:
        error = {"error": {"code": status, "message": message, "status": name}}
        self._send(status, json.dumps(error).encode(), headers)

    def do_POST(self) -> None:
        got, n = self._receive()
        scenario, headers, body = got.scenario, got.headers, got.body
        prompt = _last_user_text(body)
        key = headers.get("x-goog-api-key", "")
        if not self.path.endswith(":generateContent"):
            self._error(404, "NOT_FOUND", "no such method")
        elif scenario.startswith("429x") and n <= int(scenario[4:]):
            self._error(429, "RESOURCE_EXHAUSTED", "slow down", {"retry-after": "0"})
        elif scenario == "echo" or scenario.startswith("429x"):
            self._send(200, _answer([{"text": f"{n}: {prompt}"}], "STOP"))
        elif scenario == "think" and _function_response(body) is not None:
            self._send(200, _answer([{"text": f"Forecast: {_function_response(body)}"}], "STOP"))
        elif scenario in ("tools", "think"):
            call = {
                "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                "thoughtSignature": SIGNATURE,
            }
            self._send(200, _answer([THOUGHT, call], "STOP"))
        elif scenario == "blocked":
            self._send(200, json.dumps({"promptFeedback": {"blockReason": "SAFETY"}}).encode())
        elif scenario == "500":
            self._error(500, "INTERNAL", f"boom for {key} asking {prompt}")
        elif scenario == "401":
            self._error(401, "UNAUTHENTICATED", f"API key not valid: {key}")
        else:
            self._error(404, "NOT_FOUND", "no such scenario")


class GeminiServer(LoopbackServer):
    """The Gemini-wire server and its thread; use as a context manager (or ``close()``)."""

    handler = _Handler
    name = "gemini-server"

    def base_url(self, scenario: str = "echo") -> str:
        return f"http://127.0.0.1:{self.port}/{scenario}"


@pytest.fixture
def gemini_server() -> Iterator[GeminiServer]:
    """A running Gemini-wire server for one test, stopped afterwards."""
    server = GeminiServer()
    try:
        yield server
    finally:
        server.close()
    assert not server.alive
