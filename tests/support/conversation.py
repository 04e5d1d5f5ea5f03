"""One conversation, the weather tool loop, written once in each vendor's words: the
SDK tests ask it through the ``openai``, ``anthropic`` and ``google-genai`` clients, and
its fixture entries are hashed through the vendor mappings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from replay_actor import request_hash
from replay_actor._interface import complete_each
from replay_actor.vendors.anthropic import messages as vendor_anthropic
from replay_actor.vendors.openai import chat as vendor_openai

MODEL = "gpt-test"


CLAUDE = "claude-test"


SYSTEM = "You answer briefly."


WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}


OPENAI_TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": WEATHER_SCHEMA,
        },
    }
]


ANTHROPIC_TOOLS: list[Any] = [
    {"name": "get_weather", "description": "Weather for a city", "input_schema": WEATHER_SCHEMA}
]


TOOL_CALL = {"id": "call_7", "name": "get_weather", "arguments": '{"city":"Paris"}'}


CALL_RESPONSE = {
    "content": None,
    "tool_calls": [TOOL_CALL],
    "finish_reason": "tool_calls",
    "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
}


FINAL_RESPONSE = {
    "content": "It is sunny in Paris.",
    "tool_calls": [],
    "finish_reason": "stop",
    "usage": {"prompt_tokens": 20, "completion_tokens": 7, "total_tokens": 27},
}


GREETING = {"content": "Hello there!", "finish_reason": "stop"}


# The same conversation in each vendor's words.
OPENAI_TURN1: list[Any] = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": "Weather in Paris?"},
]


ANTHROPIC_TURN1: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]


def openai_hash(**body: Any) -> str:
    return request_hash(vendor_openai.read_body({"model": MODEL, **body}).request)


def anthropic_hash(**body: Any) -> str:
    return request_hash(vendor_anthropic.read_body({"model": CLAUDE, **body}).request)


def openai_turn2(first: Any) -> list[Any]:
    """The tool loop's second turn, built from the SDK's own first answer."""
    message = first.choices[0].message
    call = message.tool_calls[0]
    return [
        *OPENAI_TURN1,
        message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "sunny, 24C"},
    ]


def anthropic_turn2(first: Any) -> list[Any]:
    block = first.content[0]
    return [
        *ANTHROPIC_TURN1,
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": block.id, "content": "sunny, 24C"}],
        },
    ]


def write_fixture(path: Path, entries: dict[str, Any]) -> Path:
    lines = []
    for request_hash_, answer in entries.items():
        key = "responses" if isinstance(answer, list) else "response"
        lines.append(json.dumps({"schema_version": 1, "request_hash": request_hash_, key: answer}))
    path.write_text("\n".join(lines) + "\n")
    return path


class Counting:
    """A provider wrapper that counts calls: proves the SDK asked exactly once."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0

    @property
    def closed(self) -> bool:
        return bool(self.inner.closed)

    def complete(self, request: Any) -> dict[str, Any]:
        self.calls += 1
        result: dict[str, Any] = self.inner.complete(request)
        return result

    def complete_many(self, requests: Any) -> list[Any]:
        return complete_each(self.complete, requests)

    async def acomplete(self, request: Any) -> dict[str, Any]:
        self.calls += 1
        result: dict[str, Any] = await self.inner.acomplete(request)
        return result

    def snapshot(self) -> dict[str, Any]:
        result: dict[str, Any] = self.inner.snapshot()
        return result

    def release(self) -> None:
        self.inner.release()

    def __enter__(self) -> Counting:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
