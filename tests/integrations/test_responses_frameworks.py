"""Unchanged applications on the OpenAI Responses API replay (docs/responses.md): an
openai-agents Agent with a function tool on its default Responses path (run, run again,
run streamed), LangChain's ``ChatOpenAI(use_responses_api=True)`` with ``bind_tools``, and
fixtures recorded through one OpenAI shape replayed through the other.

Each fixture is recorded here, by the same application in record mode against a
loopback server speaking the vendor's wire format (tests/support/responses_server.py,
tests/support/chat_server.py); replay then runs with no server at all.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx2
import pytest
from pydantic import SecretStr

from replay_actor import async_openai_client, open_provider, openai_client
from replay_actor.integrations.transport import ProviderTransport
from tests.support.chat_server import ChatServer
from tests.support.responses_server import ResponsesServer


def sdk(manifest: dict[str, Any]) -> Any:
    """An ``openai.OpenAI`` on the manifest's provider, typed loosely: these tests send
    hand-written dict items the SDK's TypedDict overloads do not spell."""
    return openai_client(manifest)


pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(120)]

WEATHER_TOOL: Any = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}


def record_manifest(base_url: str, fixture: Path, adapter: str) -> dict[str, Any]:
    live = {
        "adapter": adapter,
        "model": "test-model",
        "base_url": base_url,
        "max_retries": 0,
        "retry_backoff": 0.0,
    }
    return {"provider": {"kind": "record", "fixture": str(fixture), "live": live}}


def replay_manifest(fixture: Path) -> dict[str, Any]:
    return {"provider": {"kind": "replay", "fixture": str(fixture)}}


def entries(fixture: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in fixture.read_text().splitlines() if line]


# -- openai-agents ------------------------------------------------------------------------


def _agent(client: Any) -> Any:
    import agents

    agents.set_tracing_disabled(True)  # no export to the internet

    @agents.function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    model = agents.OpenAIResponsesModel(model="gpt-5", openai_client=client)
    return agents.Agent(
        name="forecaster", instructions="Use tools.", tools=[get_weather], model=model
    )


async def _run(manifest: dict[str, Any], *, chained: bool = False) -> tuple[str, list[str | None]]:
    import agents

    client = async_openai_client(manifest)
    try:
        result = await agents.Runner.run(
            _agent(client), "Weather in Paris?", auto_previous_response_id=chained
        )
    finally:
        await client.close()
    return str(result.final_output), [r.response_id for r in result.raw_responses]


async def _run_streamed(manifest: dict[str, Any]) -> tuple[str, list[str | None], list[str]]:
    import agents

    client = async_openai_client(manifest)
    try:
        result = agents.Runner.run_streamed(_agent(client), "Weather in Paris?")
        kinds: list[str] = [event.type async for event in result.stream_events()]
    finally:
        await client.close()
    return str(result.final_output), [r.response_id for r in result.raw_responses], kinds


def test_an_openai_agents_agent_replays_on_its_default_responses_path(
    responses_server: ResponsesServer, tmp_path: Path
) -> None:
    fixture = tmp_path / "agent.jsonl"
    recorded = asyncio.run(
        _run(record_manifest(responses_server.base_url("weather"), fixture, "openai-responses"))
    )
    assert recorded[0] == "Forecast: sunny in Paris"
    # The agent sent its random prompt_cache_key to us; the live endpoint got none of it
    # and the fixture has one entry per model call.
    assert len(entries(fixture)) == 2 == len(responses_server.received)
    assert all("prompt_cache_key" not in r.body for r in responses_server.received)
    # Replayed twice (each run sends another random prompt_cache_key): the same hashes
    # (no miss), answers and response ids; then streamed, the same again.
    first = asyncio.run(_run(replay_manifest(fixture)))
    second = asyncio.run(_run(replay_manifest(fixture)))
    streamed_output, streamed_ids, kinds = asyncio.run(_run_streamed(replay_manifest(fixture)))
    assert first == second
    assert first[0] == streamed_output == "Forecast: sunny in Paris"
    assert streamed_ids == first[1] and all(i and i.startswith("resp_") for i in first[1])
    assert "raw_response_event" in kinds
    # Chained by previous_response_id (the agent sends only the new items): expanded
    # from what this client served, the same conversation, the same entries.
    assert asyncio.run(_run(replay_manifest(fixture), chained=True)) == first
    assert len(responses_server.received) == 2  # replay never reached the server


# -- LangChain ----------------------------------------------------------------------------


def _langchain_turns(manifest: dict[str, Any]) -> tuple[Any, Any]:
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_openai import ChatOpenAI

    provider = open_provider(manifest)
    http = httpx2.Client(transport=ProviderTransport(provider, "openai"))
    try:
        model = ChatOpenAI(
            model="gpt-5",
            api_key=SecretStr("unused"),
            use_responses_api=True,
            http_client=http,
            max_retries=0,
        ).bind_tools([WEATHER_TOOL])
        ask = HumanMessage("Weather in Paris?")
        first = model.invoke([ask])
        call = first.tool_calls[0]
        answer = ToolMessage("sunny", tool_call_id=call["id"])
        second = model.invoke([ask, first, answer])
    finally:
        http.close()
    return first, second


def test_langchain_chat_openai_on_the_responses_api_replays_a_tool_turn(
    responses_server: ResponsesServer, tmp_path: Path
) -> None:
    fixture = tmp_path / "lc.jsonl"
    manifest = record_manifest(responses_server.base_url("weather"), fixture, "openai-responses")
    rec_first, rec_second = _langchain_turns(manifest)
    assert rec_first.tool_calls[0]["name"] == "get_weather"
    assert len(entries(fixture)) == 2
    first, second = _langchain_turns(replay_manifest(fixture))
    assert first.tool_calls == rec_first.tool_calls
    # It went through the Responses API: a response object's id and object type.
    assert first.response_metadata["object"] == "response"
    assert first.id == rec_first.id and first.id.startswith("resp_")
    assert first.tool_calls[0]["args"] == {"city": "Paris"}
    assert second.text == rec_second.text == "Forecast: sunny"
    assert len(responses_server.received) == 2


# -- cross-shape fixtures -----------------------------------------------------------------

ASK = "Weather in Paris?"
CHAT_TOOL: Any = {
    "type": "function",
    "function": {k: v for k, v in WEATHER_TOOL.items() if k != "type"},
}


def test_recorded_through_chat_completions_replays_through_responses(
    chat: ChatServer, tmp_path: Path
) -> None:
    fixture = tmp_path / "chat.jsonl"
    with sdk(record_manifest(chat.base_url("tools"), fixture, "openai")) as client:
        messages: list[Any] = [
            {"role": "system", "content": "Use tools."},
            {"role": "user", "content": ASK},
        ]
        first = client.chat.completions.create(model="m", messages=messages, tools=[CHAT_TOOL])
        call = first.choices[0].message.tool_calls[0]
        messages += [
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
        ]
        second = client.chat.completions.create(model="m", messages=messages, tools=[CHAT_TOOL])
    assert len(entries(fixture)) == 2
    with sdk(replay_manifest(fixture)) as client:
        one = client.responses.create(
            model="gpt-5", instructions="Use tools.", input=ASK, tools=[WEATHER_TOOL]
        )
        out = {"type": "function_call_output", "call_id": call.id, "output": "sunny"}
        two = client.responses.create(
            model="gpt-5",
            instructions="Use tools.",
            previous_response_id=one.id,
            input=[out],
            tools=[WEATHER_TOOL],
        )
    replayed = one.output[0]
    assert replayed.type == "function_call"
    assert (replayed.call_id, replayed.name) == (call.id, call.function.name)
    assert json.loads(replayed.arguments) == json.loads(call.function.arguments)
    assert [o.type for o in two.output] == ["function_call"]  # what the chat server said
    assert two.output[0].call_id == second.choices[0].message.tool_calls[0].id


def test_recorded_through_responses_replays_through_chat_completions(
    responses_server: ResponsesServer, tmp_path: Path
) -> None:
    fixture = tmp_path / "responses.jsonl"
    manifest = record_manifest(responses_server.base_url("weather"), fixture, "openai-responses")
    with sdk(manifest) as client:
        one = client.responses.create(
            model="gpt-5", instructions="Use tools.", input=ASK, tools=[WEATHER_TOOL]
        )
        call = one.output[0]
        assert call.type == "function_call"
        out = {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}
        two = client.responses.create(
            model="gpt-5",
            instructions="Use tools.",
            input=[{"role": "user", "content": ASK}, call.model_dump(exclude_none=True), out],
            tools=[WEATHER_TOOL],
        )
    assert two.output_text == "Forecast: sunny"
    with sdk(replay_manifest(fixture)) as client:
        messages: list[Any] = [
            {"role": "developer", "content": "Use tools."},
            {"role": "user", "content": ASK},
        ]
        first = client.chat.completions.create(model="m", messages=messages, tools=[CHAT_TOOL])
        messages += [
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.call_id, "content": "sunny"},
        ]
        with client.chat.completions.stream(
            model="m", messages=messages, tools=[CHAT_TOOL]
        ) as stream:
            second = stream.get_final_completion()
    assert first.choices[0].message.tool_calls[0].id == call.call_id
    assert second.choices[0].message.content == "Forecast: sunny"
