"""Live and record through the vendors' SDK clients, against real 127.0.0.1 servers.

The ``openai`` adapter talks to ``chat_server`` (OpenAI's wire), the ``anthropic``
adapter to ``anthropic_server`` (Anthropic's wire). The application code is the same SDK
call in live, record and replay; a fixture recorded through one vendor's SDK replays
through the other's. A planted API key must never reach a fixture, a journal, an
exception or a log record.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from replay_actor import anthropic_client, async_openai_client
from replay_actor import openai_client as make_openai_client
from tests.support.anthropic_server import AnthropicServer
from tests.support.chat_server import ChatServer
from tests.support.live_tables import KEY_VAR, SECRET_KEY, anthropic_table, live, openai_table

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(60)]

WEATHER = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}
OPENAI_WEATHER: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": WEATHER["input_schema"],
    },
}


@pytest.fixture
def key_env(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_VAR, SECRET_KEY)
    return KEY_VAR


def record(table: dict[str, Any], fixture: Path) -> dict[str, Any]:
    return {"provider": {"kind": "record", "fixture": str(fixture), "live": table}}


def replay(fixture: Path) -> dict[str, Any]:
    return {"provider": {"kind": "replay", "fixture": str(fixture)}}


# -- the application: unchanged SDK calls -------------------------------------------------------


def openai_app(client: openai.OpenAI) -> list[Any]:
    with client:
        a = client.chat.completions.create(
            model="gpt-x", messages=[{"role": "user", "content": "first"}], max_tokens=20
        )
        b = client.chat.completions.create(
            model="gpt-x", messages=[{"role": "user", "content": "second"}], max_tokens=20
        )
    return [a.choices[0].message.content, b.choices[0].message.content]


def anthropic_app(client: anthropic.Anthropic) -> list[Any]:
    with client:
        out = []
        for text in ("first", "second"):
            message = client.messages.create(
                model="claude-x", max_tokens=20, messages=[{"role": "user", "content": text}]
            )
            out.append(message.content[0].text)  # type: ignore[union-attr]
    return out


def test_openai_sdk_live_record_replay(chat: ChatServer, key_env: str, tmp_path: Path) -> None:
    table = openai_table(chat)
    assert openai_app(make_openai_client(live(table))) == ["1: first", "2: second"]
    fixture = tmp_path / "recorded.jsonl"
    recorded = openai_app(make_openai_client(record(table, fixture)))
    assert recorded == ["3: first", "4: second"]
    hits = chat.count("echo")
    assert openai_app(make_openai_client(replay(fixture))) == recorded
    assert chat.count("echo") == hits  # replay sent nothing
    sent = chat.received[-1]
    assert sent.headers["authorization"] == f"Bearer {SECRET_KEY}"
    assert sent.body["messages"] == [{"role": "user", "content": "second"}]
    assert sent.body["max_tokens"] == 20
    assert sent.body["model"] == "test-model"  # the manifest's model, not the SDK call's


def test_anthropic_sdk_live_record_replay(
    claude: AnthropicServer, key_env: str, tmp_path: Path
) -> None:
    table = anthropic_table(claude)
    assert anthropic_app(anthropic_client(live(table))) == ["1: first", "2: second"]
    fixture = tmp_path / "recorded.jsonl"
    recorded = anthropic_app(anthropic_client(record(table, fixture)))
    assert recorded == ["3: first", "4: second"]
    hits = claude.count("echo")
    assert anthropic_app(anthropic_client(replay(fixture))) == recorded
    assert claude.count("echo") == hits
    sent = claude.received[-1]
    assert sent.path == "/echo/v1/messages"
    assert sent.headers["x-api-key"] == SECRET_KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers
    assert sent.body == {
        "model": "claude-test",
        "max_tokens": 20,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "second"}]}],
    }


def test_record_through_openai_replay_through_anthropic(
    chat: ChatServer, key_env: str, tmp_path: Path
) -> None:
    fixture = tmp_path / "cross.jsonl"
    with make_openai_client(record(openai_table(chat, "tools"), fixture)) as client:
        first = client.chat.completions.create(
            model="gpt-x",
            messages=[
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Weather in Paris?"},
            ],
            tools=[OPENAI_WEATHER],
            max_tokens=64,
        )
    recorded_call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
    with anthropic_client(replay(fixture)) as claude_client:
        message = claude_client.messages.create(
            model="claude-x",
            system="Be brief.",
            messages=[{"role": "user", "content": "Weather in Paris?"}],
            tools=[WEATHER],  # type: ignore[list-item]
            max_tokens=64,
        )
    block = message.content[0]
    assert block.type == "tool_use"
    assert (block.id, block.name, block.input) == (
        recorded_call.id,
        "get_weather",
        {"city": "Paris"},
    )
    assert message.stop_reason == "tool_use"


def test_record_through_anthropic_replay_through_openai(
    claude: AnthropicServer, key_env: str, tmp_path: Path
) -> None:
    fixture = tmp_path / "cross.jsonl"
    with anthropic_client(record(anthropic_table(claude, "tools"), fixture)) as client:
        client.messages.create(
            model="claude-x",
            messages=[{"role": "user", "content": "Weather in Paris?"}],
            tools=[WEATHER],  # type: ignore[list-item]
            max_tokens=64,
        )
    assert claude.received[-1].body["tools"] == [WEATHER]

    async def main() -> Any:
        async with async_openai_client(replay(fixture)) as oa:
            return await oa.chat.completions.create(
                model="gpt-x",
                messages=[{"role": "user", "content": "Weather in Paris?"}],
                tools=[OPENAI_WEATHER],
                max_tokens=64,
            )

    answer = asyncio.run(main())
    call = answer.choices[0].message.tool_calls[0]
    assert (call.id, call.function.name, call.function.arguments) == (
        "toolu_1",
        "get_weather",
        '{"city":"Paris"}',
    )
    assert answer.choices[0].finish_reason == "tool_calls"
    assert answer.usage.total_tokens == 6


@pytest.mark.parametrize("field", ["n", "audio"])
def test_live_refuses_unfaithful_fields_before_sending(
    chat: ChatServer, key_env: str, tmp_path: Path, field: str
) -> None:
    extras: dict[str, dict[str, Any]] = {
        "n": {"n": 3},
        "audio": {"audio": {"voice": "alloy", "format": "wav"}, "modalities": ["text", "audio"]},
    }
    extra = extras[field]
    for manifest in (live(openai_table(chat)), record(openai_table(chat), tmp_path / "r.jsonl")):
        with make_openai_client(manifest) as client, pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(
                model="x", messages=[{"role": "user", "content": "hi"}], **extra
            )
        assert field in e.value.body["message"]  # type: ignore[index]
    assert chat.count("echo") == 0


# -- the key never leaks -------------------------------------------------------------------------


def test_planted_key_stays_out_of_fixture_journal_errors_and_logs(
    chat: ChatServer,
    claude: AnthropicServer,
    key_env: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    fixture = tmp_path / "keyed.jsonl"
    seen: list[str] = []
    with make_openai_client(record(openai_table(chat), fixture)) as client:
        client.chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}])
        # While the session is open: the fixture and its crash journal.
        during = [p.read_bytes().decode() for p in tmp_path.rglob("*") if p.is_file()]
    assert len(during) >= 2
    # Endpoints that echo the key in their error bodies (as vendors do).
    for manifest, api in (
        (live(openai_table(chat, "401")), "openai"),
        (live(openai_table(chat, "500")), "openai"),
        (live(anthropic_table(claude, "401")), "anthropic"),
        (live(anthropic_table(claude, "500")), "anthropic"),
    ):
        if api == "openai":
            oa = make_openai_client(manifest)
            with oa, pytest.raises(openai.APIStatusError) as caught:
                oa.chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}])
            err: Exception = caught.value
        else:
            an = anthropic_client(manifest)
            with an, pytest.raises(anthropic.APIStatusError) as other:
                an.messages.create(
                    model="x", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
                )
            err = other.value
        assert err.status_code == 502  # type: ignore[attr-defined]
        assert err.body is not None  # type: ignore[attr-defined]
        seen += [
            str(err),
            repr(err.body),  # type: ignore[attr-defined]
            err.response.text,  # type: ignore[attr-defined]
            "".join(traceback.TracebackException.from_exception(err, capture_locals=True).format()),
        ]
    files = [p.read_bytes().decode() for p in tmp_path.rglob("*") if p.is_file()]
    assert files  # the fixture (and its journal, while it lived) were written
    logs = [record.getMessage() for record in caplog.records]
    for text in seen + during + files + logs:
        assert SECRET_KEY not in text
    assert any(r.headers.get("authorization") == f"Bearer {SECRET_KEY}" for r in chat.received)


def test_the_sdk_key_is_a_placeholder_unless_given(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET_KEY)
    fixture = tmp_path / "empty.jsonl"
    fixture.write_text("")
    with make_openai_client(replay(fixture)) as client:
        assert client.api_key != SECRET_KEY
    with anthropic_client(replay(fixture)) as other:
        assert other.api_key != SECRET_KEY
    with make_openai_client(replay(fixture), api_key="mine") as mine:
        assert mine.api_key == "mine"
