"""Reasoning sent back in a later request (docs/request.md, "Reasoning sent back"): not
hashed, but carried to the live endpoint of the vendor that produced it.

For each of the three vendors with reasoning (OpenAI Responses, Anthropic, Gemini), a
thinking model's two-turn tool loop is recorded through the vendor's own SDK client
against a real 127.0.0.1 server: turn 2 sends turn 1's reasoning back, and the server
must receive it verbatim (a reasoning model rejects or re-does a tool turn without it);
the fixture entry recorded for turn 2 is the one the same conversation WITHOUT the
reasoning hashes to; and the recorded loop replays with the server stopped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from google.genai import types

from replay_actor import (
    Message,
    Request,
    RequestError,
    anthropic_client,
    gemini_client,
    openai_client,
    request_hash,
)
from replay_actor._request import canonical_request
from replay_actor._response import Reasoning
from replay_actor.adapters.live import prepare_request
from replay_actor.vendors.anthropic import messages as vendor_anthropic
from replay_actor.vendors.gemini import generate as vendor_gemini
from replay_actor.vendors.openai import chat as vendor_openai
from replay_actor.vendors.openai import responses as vendor_responses
from tests.support.anthropic_server import THINKING, AnthropicServer
from tests.support.gemini_server import SIGNATURE, THOUGHT, GeminiServer
from tests.support.responses_server import REASONING_ITEM, ResponsesServer

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(60)]

KEY_VAR = "REPLAY_ACTOR_REASONING_TEST_KEY"


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_VAR, "test-key-not-a-secret")


def _record(adapter: str, base_url: str, fixture: Path) -> dict[str, Any]:
    live = {
        "adapter": adapter,
        "model": "thinking-model",
        "base_url": base_url,
        "api_key_env": KEY_VAR,
        "max_retries": 0,
        "retry_backoff": 0.0,
    }
    return {"provider": {"kind": "record", "fixture": str(fixture), "live": live}}


def _replay(fixture: Path) -> dict[str, Any]:
    return {"provider": {"kind": "replay", "fixture": str(fixture)}}


def _hashes(fixture: Path) -> list[str]:
    return [json.loads(line)["request_hash"] for line in fixture.read_text().splitlines()]


# -- the unhashed field ---------------------------------------------------------------------

ASK: list[dict[str, Any]] = [{"role": "user", "content": "Weather?"}]
CALL = {"id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'}
ANSWER = {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}


def _conversation(reasoning: dict[str, Any] | None) -> dict[str, Any]:
    assistant: dict[str, Any] = {"role": "assistant", "tool_calls": [CALL]}
    if reasoning is not None:
        assistant["reasoning"] = reasoning
    return {"messages": [*ASK, assistant, ANSWER], "params": {"temperature": 0}}


def test_request_hash_ignores_reasoning_and_the_live_request_keeps_it() -> None:
    reasoning = {"vendor": "anthropic", "items": [THINKING[0]]}
    without = _conversation(None)
    carried = _conversation(reasoning)
    assert request_hash(carried) == request_hash(without)
    assert canonical_request(carried) == canonical_request(without)
    assert b"reasoning" not in canonical_request(carried)
    # The same through the Structs, and with content parts (the slower path).
    struct = Request(
        messages=[
            Message(role="user", content=[{"type": "text", "text": "Weather?"}]),
            Message(
                role="assistant",
                content="Let me look.",
                reasoning=Reasoning(vendor="gemini", items=[THOUGHT]),
            ),
        ]
    )
    plain_struct = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Weather?"}]},
            {"role": "assistant", "content": "Let me look."},
        ]
    }
    assert request_hash(struct) == request_hash(plain_struct)
    # A live provider gets it back on its message, and only there.
    digest, plain, canonical = prepare_request(carried)
    assert digest == request_hash(without)
    # The bytes hashed, which a recorder keeps for its request sidecar, are the plain
    # request's canonical bytes too: the reasoning put back is left out again.
    assert canonical == canonical_request(plain) == canonical_request(without)
    assert plain["messages"][1]["reasoning"] == reasoning
    assert "reasoning" not in plain["messages"][0] and "reasoning" not in plain["messages"][2]
    assert prepare_request(struct)[1]["messages"][1]["reasoning"] == {
        "vendor": "gemini",
        "items": [THOUGHT],
    }
    # Not hashed, but checked like the rest of the request.
    with pytest.raises(RequestError, match=r"messages\[1\]\.reasoning"):
        request_hash(_conversation({"vendor": 3, "items": []}))
    with pytest.raises(RequestError, match=r"messages\[1\]\.reasoning"):
        request_hash(_conversation({"vendor": "x", "items": [{"a": object()}]}))


def test_each_vendor_sends_back_its_own_reasoning_only() -> None:
    theirs = {
        "openai-responses": {"vendor": "openai-responses", "items": [REASONING_ITEM]},
        "anthropic": {"vendor": "anthropic", "items": THINKING},
        "gemini": {
            "vendor": "gemini",
            "items": [THOUGHT, {"thoughtSignature": SIGNATURE, "part": 0}],
        },
    }

    def responses(request: dict[str, Any]) -> list[Any]:
        return [
            i
            for i in vendor_responses.to_body(request, "m")["input"]
            if i.get("type") == "reasoning"
        ]

    def anthropic(request: dict[str, Any]) -> list[Any]:
        content = vendor_anthropic.to_body(request, "m")["messages"][1]["content"]
        return [b for b in content if b["type"] != "tool_use"]

    def gemini(request: dict[str, Any]) -> list[Any]:
        parts = vendor_gemini.to_body(request, "m")["contents"][1]["parts"]
        return [p for p in parts if p.get("thought") or "thoughtSignature" in p]

    readers = {"openai-responses": responses, "anthropic": anthropic, "gemini": gemini}
    for vendor, read in readers.items():
        for other, reasoning in theirs.items():
            sent = read(_conversation(reasoning))
            assert bool(sent) == (vendor == other), (vendor, other)
        # The chat completions wire has no place for any of it.
        for reasoning in theirs.values():
            body = vendor_openai.to_body(_conversation(reasoning), "m")
            assert "reasoning" not in json.dumps(body["messages"])
    assert responses(_conversation(theirs["openai-responses"])) == [REASONING_ITEM]
    assert anthropic(_conversation(theirs["anthropic"])) == THINKING
    assert gemini(_conversation(theirs["gemini"])) == [
        THOUGHT,
        {
            "functionCall": {"id": "call_1", "name": "get_weather", "args": {"city": "Paris"}},
            "thoughtSignature": SIGNATURE,
        },
    ]


# -- OpenAI Responses ------------------------------------------------------------------------

WEATHER_TOOL: Any = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    "strict": False,
}


def _responses_loop(client: Any, *, send_reasoning: bool = True) -> list[str]:
    """The application: a two-turn tool loop, turn 1's output items sent back."""
    with client:
        one = client.responses.create(model="gpt-5", input="Weather?", tools=[WEATHER_TOOL])
        call = next(item for item in one.output if item.type == "function_call")
        sent_back = [i for i in one.output if send_reasoning or i.type != "reasoning"]
        output = {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}
        two = client.responses.create(
            model="gpt-5",
            input=[{"role": "user", "content": "Weather?"}, *sent_back, output],
            tools=[WEATHER_TOOL],
        )
        return [one.output[0].type, two.output_text]


def test_responses_reasoning_goes_back_unhashed(
    responses_server: ResponsesServer, tmp_path: Path
) -> None:
    fixture = tmp_path / "loop.jsonl"
    base_url = responses_server.base_url("think")
    recorded = _responses_loop(openai_client(_record("openai-responses", base_url, fixture)))
    assert recorded == ["reasoning", "Forecast: sunny"]
    sent = responses_server.received[1].body["input"]
    assert sent[1] == REASONING_ITEM  # verbatim, before the call it led to
    assert [item.get("type") for item in sent] == [
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    assert len(_hashes(fixture)) == 2
    responses_server.close()
    # Replayed with the server gone: the loop, and the same loop without the reasoning,
    # hit the same entries (the reasoning is not part of the hash).
    assert _responses_loop(openai_client(_replay(fixture))) == recorded
    assert _responses_loop(openai_client(_replay(fixture)), send_reasoning=False) == recorded


# -- Anthropic -------------------------------------------------------------------------------

WEATHER = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def _anthropic_loop(client: Any, *, send_thinking: bool = True) -> list[Any]:
    with client:
        ask = {"role": "user", "content": "Weather?"}
        one = client.messages.create(
            model="claude-x", max_tokens=200, tools=[WEATHER], messages=[ask]
        )
        use = next(block for block in one.content if block.type == "tool_use")
        content = [b for b in one.content if send_thinking or b.type == "tool_use"]
        result = {"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}
        two = client.messages.create(
            model="claude-x",
            max_tokens=200,
            tools=[WEATHER],
            messages=[
                ask,
                {"role": "assistant", "content": content},
                {"role": "user", "content": [result]},
            ],
        )
        return [[b.type for b in one.content], two.content[0].text]


def test_anthropic_thinking_goes_back_unhashed(claude: AnthropicServer, tmp_path: Path) -> None:
    fixture = tmp_path / "loop.jsonl"
    recorded = _anthropic_loop(
        anthropic_client(_record("anthropic", claude.base_url("think"), fixture))
    )
    assert recorded == [["thinking", "redacted_thinking", "tool_use"], "Forecast: sunny"]
    assistant = claude.received[1].body["messages"][1]
    assert assistant["role"] == "assistant"
    # The thinking blocks, signatures included, verbatim and first, as the API requires.
    assert assistant["content"][:2] == THINKING
    assert [b["type"] for b in assistant["content"]] == [
        "thinking",
        "redacted_thinking",
        "tool_use",
    ]
    assert len(_hashes(fixture)) == 2
    claude.close()
    assert _anthropic_loop(anthropic_client(_replay(fixture))) == recorded
    assert _anthropic_loop(anthropic_client(_replay(fixture)), send_thinking=False) == recorded


# -- Gemini ----------------------------------------------------------------------------------

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"city": {"type": "string"}}}
TOOLS: list[Any] = [
    types.Tool(
        function_declarations=[
            types.FunctionDeclaration(name="get_weather", parameters_json_schema=SCHEMA)
        ]
    )
]


def _gemini_loop(client: Any, *, send_thoughts: bool = True) -> list[Any]:
    config = types.GenerateContentConfig(tools=TOOLS)
    ask = types.Content(role="user", parts=[types.Part(text="Weather in Paris?")])
    with client:
        one = client.models.generate_content(model="gemini-x", contents=[ask], config=config)
        content = one.candidates[0].content
        call = next(p.function_call for p in content.parts if p.function_call is not None)
        if not send_thoughts:
            content = types.Content(role="model", parts=[types.Part(function_call=call)])
        answer = types.Part.from_function_response(name=call.name, response={"result": "sunny"})
        two = client.models.generate_content(
            model="gemini-x",
            contents=[ask, content, types.Content(role="user", parts=[answer])],
            config=config,
        )
        return [[bool(p.thought) for p in one.candidates[0].content.parts], two.text]


def test_gemini_thoughts_and_signatures_go_back_unhashed(
    gemini_server: GeminiServer, tmp_path: Path
) -> None:
    fixture = tmp_path / "loop.jsonl"
    recorded = _gemini_loop(
        gemini_client(_record("gemini", gemini_server.base_url("think"), fixture))
    )
    assert recorded == [[True, False], "Forecast: sunny"]
    model_turn = gemini_server.received[1].body["contents"][1]
    assert model_turn == {
        "role": "model",
        "parts": [
            THOUGHT,
            {
                "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                "thoughtSignature": SIGNATURE,
            },
        ],
    }
    assert len(_hashes(fixture)) == 2
    gemini_server.close()
    assert _gemini_loop(gemini_client(_replay(fixture))) == recorded
    assert _gemini_loop(gemini_client(_replay(fixture)), send_thoughts=False) == recorded
