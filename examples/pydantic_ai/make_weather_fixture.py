"""Regenerate the pydantic-ai example's fixture from neutral requests written out here.

    .venv/bin/python examples/pydantic_ai/make_weather_fixture.py

The two requests are the ones the weather agent asks (instructions as the system
message, the tool, then the tool call and its result);
``tests/integrations/test_pydantic_ai.py`` checks that this script's output matches the
file on disk.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from replay_actor._request import request_hash
from replay_actor.fixture import entry_line

FIXTURE: Final = Path(__file__).resolve().parent / "weather.jsonl"

SYSTEM: Final = {"role": "system", "content": "Answer with the tool's words."}
ASK: Final = {"role": "user", "content": "Weather in Paris?"}
TOOLS: Final = [
    {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "additionalProperties": False,
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "type": "object",
        },
        "strict": True,
    }
]
CALL: Final = {"id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'}
FIRST: Final[dict[str, Any]] = {"messages": [SYSTEM, ASK], "tools": TOOLS, "tool_choice": "auto"}
SECOND: Final[dict[str, Any]] = {
    "messages": [
        SYSTEM,
        ASK,
        {"role": "assistant", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"},
    ],
    "tools": TOOLS,
    "tool_choice": "auto",
}
FINAL: Final = "It is sunny in Paris, 21 C."
USAGE: Final = {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}


def render() -> bytes:
    first = {"content": None, "tool_calls": [CALL], "finish_reason": "tool_calls", "usage": USAGE}
    second = {"content": FINAL, "tool_calls": [], "finish_reason": "stop", "usage": USAGE}
    return b"".join(
        entry_line(request_hash(request), response) + b"\n"
        for request, response in ((FIRST, first), (SECOND, second))
    )


if __name__ == "__main__":
    FIXTURE.write_bytes(render())
    print(f"wrote {FIXTURE}")
