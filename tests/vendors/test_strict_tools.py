"""A tool's ``strict`` flag: part of the neutral tool, so strict tools replay through
either SDK, hit one entry, and are sent again to a live model (docs/sdk.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from replay_actor import Tool, anthropic_client, open_provider, openai_client, request_hash
from replay_actor.vendors.anthropic import messages as vendor_anthropic
from replay_actor.vendors.openai import chat as vendor_openai
from tests.support.anthropic_server import AnthropicServer
from tests.support.chat_server import ChatServer

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(60)]

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}
MESSAGES: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]


def openai_tool(**extra: Any) -> Any:
    function = {"name": "get_weather", "description": "Weather", "parameters": SCHEMA}
    return {"type": "function", "function": {**function, **extra}}


def anthropic_tool(**extra: Any) -> dict[str, Any]:
    return {"name": "get_weather", "description": "Weather", "input_schema": SCHEMA, **extra}


def openai_hash(tool: dict[str, Any]) -> str:
    body = {"model": "m", "messages": MESSAGES, "tools": [tool], "max_tokens": 50}
    return request_hash(vendor_openai.read_body(body).request)


def anthropic_hash(tool: dict[str, Any]) -> str:
    body = {"model": "c", "messages": MESSAGES, "tools": [tool], "max_tokens": 50}
    return request_hash(vendor_anthropic.read_body(body).request)


def test_strict_is_hashed_and_false_is_the_default() -> None:
    strict = openai_hash(openai_tool(strict=True))
    assert strict != openai_hash(openai_tool())
    assert openai_hash(openai_tool(strict=False)) == openai_hash(openai_tool())
    # One neutral tool, whichever vendor's shape it came in.
    assert anthropic_hash(anthropic_tool(strict=True)) == strict
    assert Tool(name="t", strict=True) != Tool(name="t")


def test_a_strict_tool_replays_through_both_sdks_from_one_entry(tmp_path: Path) -> None:
    entry = {"content": "sunny", "finish_reason": "stop"}
    digest = openai_hash(openai_tool(strict=True))
    fixture = tmp_path / "f.jsonl"
    line = {"schema_version": 1, "request_hash": digest, "response": entry}
    fixture.write_text(json.dumps(line) + "\n")
    manifest = {"provider": {"kind": "replay", "fixture": str(fixture)}}
    with openai_client(manifest) as client:
        answer = client.chat.completions.create(
            model="gpt-x", messages=MESSAGES, tools=[openai_tool(strict=True)], max_tokens=50
        )
        assert answer.choices[0].message.content == "sunny"
        with pytest.raises(openai.NotFoundError):  # not strict: another request
            client.chat.completions.create(
                model="gpt-x", messages=MESSAGES, tools=[openai_tool()], max_tokens=50
            )
    with anthropic_client(manifest) as claude_client:
        message = claude_client.messages.create(
            model="claude-x",
            max_tokens=50,
            messages=MESSAGES,
            tools=[anthropic_tool(strict=True)],  # type: ignore[list-item]
        )
        assert message.content[0].text == "sunny"  # type: ignore[union-attr]
        with pytest.raises(anthropic.NotFoundError):
            claude_client.messages.create(
                model="claude-x",
                max_tokens=50,
                messages=MESSAGES,
                tools=[anthropic_tool()],  # type: ignore[list-item]
            )


def test_live_adapters_send_strict_again(chat: ChatServer, claude: AnthropicServer) -> None:
    request = {
        "messages": MESSAGES,
        "tools": [{"name": "get_weather", "parameters": SCHEMA, "strict": True}],
    }
    table = {"model": "m", "retry_backoff": 0.0}
    openai_live = {"provider": {"kind": "live", "adapter": "openai", **table}}
    openai_live["provider"]["base_url"] = chat.base_url("echo")
    with open_provider(openai_live) as llm:
        llm.complete(request)
    assert chat.received[-1].body["tools"][0]["function"]["strict"] is True
    claude_live = {"provider": {"kind": "live", "adapter": "anthropic", **table}}
    claude_live["provider"]["base_url"] = claude.base_url("echo")
    with open_provider(claude_live) as llm:
        llm.complete({**request, "params": {"max_tokens": 20}})
    assert claude.received[-1].body["tools"][0]["strict"] is True
    # Not strict: nothing is added to what the vendor receives.
    with open_provider(openai_live) as llm:
        llm.complete({"messages": MESSAGES, "tools": [{"name": "t", "parameters": SCHEMA}]})
    assert "strict" not in chat.received[-1].body["tools"][0]["function"]
