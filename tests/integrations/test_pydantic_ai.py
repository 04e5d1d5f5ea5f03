"""``ReplayModel``: a real pydantic-ai agent with a tool, run and streamed, replayed.

The fixture is written from neutral requests built by hand, so the test checks the
mapping rather than echoing it; one test also runs pydantic-ai's own OpenAI chat model
through an OpenAI client over the same fixture: both ask the very same requests.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent
from pydantic_ai.exceptions import ContentFilterError
from pydantic_ai.messages import ModelRequest, ToolCallPart, UserPromptPart
from pydantic_ai.models import ModelRequestParameters

from replay_actor import ProviderClosed, ReplayMiss, request_hash
from replay_actor._response import Unexpressible
from replay_actor.fixture import entry_line
from replay_actor.pydantic_ai import ReplayModel
from tests.support.paths import ROOT

SYSTEM = {"role": "system", "content": "Answer with the tool's words."}
ASK = {"role": "user", "content": "Weather in Paris?"}
TOOLS = [
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
CALL = {"id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'}
FIRST = {"messages": [SYSTEM, ASK], "tools": TOOLS, "tool_choice": "auto"}
SECOND = {
    "messages": [
        SYSTEM,
        ASK,
        {"role": "assistant", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"},
    ],
    "tools": TOOLS,
    "tool_choice": "auto",
}
FINAL = "It is sunny in Paris, 21 C."


def write_fixture(path: Path, *, with_usage: bool = True) -> Path:
    usage = {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}
    first: dict[str, Any] = {"content": None, "tool_calls": [CALL], "finish_reason": "tool_calls"}
    second: dict[str, Any] = {"content": FINAL, "tool_calls": [], "finish_reason": "stop"}
    if with_usage:
        first["usage"] = second["usage"] = usage
    path.write_bytes(
        entry_line(request_hash(FIRST), first)
        + b"\n"
        + entry_line(request_hash(SECOND), second)
        + b"\n"
    )
    return path


def weather_agent(model: Any = None) -> Agent[None, str]:
    agent = Agent(model, instructions="Answer with the tool's words.")

    # Strict: the neutral tool keeps the flag, so ReplayModel and pydantic-ai's OpenAI
    # model (the cross-check below) send the same request.
    @agent.tool_plain(strict=True)
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return "sunny, 21 C" if city == "Paris" else "unknown"

    return agent


@pytest.fixture
def manifest(tmp_path: Path) -> dict[str, Any]:
    fixture = write_fixture(tmp_path / "weather.jsonl")
    return {"provider": {"kind": "replay", "fixture": str(fixture)}}


@pytest.fixture
def model(manifest: dict[str, Any]) -> Iterator[ReplayModel]:
    with ReplayModel(manifest) as replay:
        yield replay


@pytest.mark.timeout(60)
def test_agent_with_a_tool_runs_on_replay(model: ReplayModel, no_leaks: None) -> None:
    result = weather_agent(model).run_sync("Weather in Paris?")
    assert result.output == FINAL
    calls = [
        part
        for message in result.all_messages()
        for part in message.parts
        if isinstance(part, ToolCallPart)
    ]
    assert [(c.tool_name, c.args_as_dict(), c.tool_call_id) for c in calls] == [
        ("get_weather", {"city": "Paris"}, "call_1")
    ]
    usage = result.usage
    assert (usage.input_tokens, usage.output_tokens) == (40, 10)
    assert model.replay_provider.snapshot()["served"] == 2


@pytest.mark.timeout(60)
def test_streamed_run_gives_the_same_answer(model: ReplayModel, no_leaks: None) -> None:
    agent = weather_agent(model)

    async def stream() -> tuple[list[str], str]:
        async with agent.run_stream("Weather in Paris?") as run:
            pieces = [text async for text in run.stream_text(delta=True)]
            return pieces, await run.get_output()

    pieces, output = asyncio.run(stream())
    assert output == FINAL
    assert "".join(pieces) == FINAL
    assert model.replay_provider.snapshot()["served"] == 2


@pytest.mark.timeout(60)
def test_agent_override_swaps_the_model(model: ReplayModel, no_leaks: None) -> None:
    agent = weather_agent("test")  # pydantic-ai's TestModel: replaced, never asked
    with agent.override(model=model):
        assert agent.run_sync("Weather in Paris?").output == FINAL


@pytest.mark.timeout(60)
def test_replayed_twice_alike(manifest: dict[str, Any], no_leaks: None) -> None:
    outputs = []
    for _ in range(2):
        with ReplayModel(manifest) as replay:
            result = weather_agent(replay).run_sync("Weather in Paris?")
            outputs.append([m.parts for m in result.all_messages()][1:])
    first, second = outputs
    assert [[type(p).__name__ for p in parts] for parts in first] == [
        [type(p).__name__ for p in parts] for parts in second
    ]


@pytest.mark.timeout(60)
def test_a_miss_raises_out_of_the_run(model: ReplayModel, no_leaks: None) -> None:
    with pytest.raises(ReplayMiss) as caught:
        weather_agent(model).run_sync("Weather in Lima?")
    assert str(caught.value).startswith("no replay fixture matches this request (request_hash: ")


@pytest.mark.timeout(60)
def test_close_releases(manifest: dict[str, Any], no_leaks: None) -> None:
    replay = ReplayModel(manifest)
    replay.close()
    replay.close()
    assert replay.replay_provider.closed
    with pytest.raises(ProviderClosed):
        weather_agent(replay).run_sync("Weather in Paris?")


@pytest.mark.timeout(60)
def test_same_requests_as_pydantic_ais_own_openai_model(
    manifest: dict[str, Any], no_leaks: None
) -> None:
    pytest.importorskip("openai")
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from replay_actor.integrations.sdk import async_openai_client

    client = async_openai_client(manifest)

    async def run() -> str:
        async with client:
            openai_model = OpenAIChatModel(
                "gpt-4.1-mini", provider=OpenAIProvider(openai_client=client)
            )
            result = await weather_agent(openai_model).run("Weather in Paris?")
            return result.output

    assert asyncio.run(run()) == FINAL


def test_settings_and_parts_map_as_the_openai_shape(model: ReplayModel) -> None:
    parameters = ModelRequestParameters()
    messages = [
        ModelRequest(parts=[UserPromptPart(content=["Look:", "again"])]),
    ]
    settings: Any = {
        "max_tokens": 32,
        "temperature": 0.5,
        "stop_sequences": ["END"],
        "seed": 3,
        "timeout": 10,
        "extra_headers": {"x": "y"},
    }
    request = model.to_request(messages, settings, parameters)
    assert request == {
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "Look:"}, {"type": "text", "text": "again"}],
            }
        ],
        "params": {"max_tokens": 32, "temperature": 0.5, "stop": ["END"], "seed": 3},
    }


def test_the_core_never_imports_pydantic_ai() -> None:
    code = (
        "import sys, replay_actor; "
        "from replay_actor import acquire, open_provider, request_hash; "
        "assert 'pydantic_ai' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_bundled_example_fixture_is_generated() -> None:
    folder = ROOT / "examples" / "pydantic_ai"
    sys.path.insert(0, str(folder))
    try:
        import make_weather_fixture as module
    finally:
        sys.path.remove(str(folder))
    assert (folder / "weather.jsonl").read_bytes() == module.render()
    assert module.FIRST == FIRST
    assert module.SECOND == SECOND


@pytest.mark.timeout(60)
def test_private_miss_carries_no_hash_in_any_frame(tmp_path: Path, no_leaks: None) -> None:
    fixture = write_fixture(tmp_path / "weather.jsonl")
    manifest = {"provider": {"kind": "replay", "fixture": str(fixture), "data": "private"}}
    with ReplayModel(manifest) as replay, pytest.raises(ReplayMiss) as caught:
        weather_agent(replay).run_sync("Weather in Lima?")
    error = caught.value
    assert error.request_hash is None
    assert str(error) == "no replay fixture matches this request"
    seen: list[str] = []
    chained: BaseException | None = error
    while chained is not None:
        seen.append(repr(chained.args))
        frame_tb = chained.__traceback__
        while frame_tb is not None:
            seen.extend(repr(value) for value in frame_tb.tb_frame.f_locals.values())
            frame_tb = frame_tb.tb_next
        chained = chained.__cause__ or chained.__context__
    assert not any("sha256:" in text for text in seen)


def _one_answer(tmp_path: Path, answer: dict[str, Any]) -> dict[str, Any]:
    """A manifest whose fixture answers the weather agent's first request with ``answer``."""
    fixture = tmp_path / "one.jsonl"
    fixture.write_bytes(entry_line(request_hash(FIRST), answer) + b"\n")
    return {"provider": {"kind": "replay", "fixture": str(fixture)}}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("streamed", [False, True])
def test_a_refusal_replays_as_a_refusal(tmp_path: Path, streamed: bool, no_leaks: None) -> None:
    # As pydantic-ai's OpenAI model answers a refusal (docs/pydantic-ai.md), so the agent raises
    # ContentFilterError with the refusal's text (not an empty answer it retries).
    refused = {"content": None, "refusal": "I can't help with that.", "finish_reason": "stop"}
    with ReplayModel(_one_answer(tmp_path, refused)) as model:
        agent = weather_agent(model)

        async def stream() -> str:
            async with agent.run_stream("Weather in Paris?") as run:
                return await run.get_output()

        def run() -> object:
            return asyncio.run(stream()) if streamed else agent.run_sync("Weather in Paris?")

        with pytest.raises(ContentFilterError, match=re.escape("Refusal: \"I can't help")):
            run()
        assert model.replay_provider.snapshot()["served"] == 1


@pytest.mark.timeout(60)
def test_a_stored_value_of_the_wrong_type_fails_closed(tmp_path: Path, no_leaks: None) -> None:
    # One tolerance (read_response): ``"content": 3`` is not silently an empty answer.
    with (
        ReplayModel(_one_answer(tmp_path, {"content": 3})) as model,
        pytest.raises(Unexpressible, match=r"wrong type at `\$\.content`"),
    ):
        weather_agent(model).run_sync("Weather in Paris?")
