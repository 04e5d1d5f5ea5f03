"""What a vendor said is kept through live, record and replay: an OpenAI refusal (not an
empty answer), Anthropic's refusals and its thinking blocks, sent back first and
verbatim in a later turn.

Every test talks HTTP to a real server on 127.0.0.1; nothing is mocked.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replay_actor import load_fixture, open_provider, request_hash
from replay_actor.vendors.anthropic.messages import to_body
from tests.support.chat_server import ChatServer, JSONHandler, LoopbackServer

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(60)]


def ask(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


# -- a server answering canned bodies -----------------------------------------------------

REFUSAL_TEXT = "I'm sorry, I can't help with that."
THINKING = {
    "type": "thinking",
    "thinking": "The user wants the weather; call the tool.",
    "signature": "EqQBCkYIBxgCKkBsig==",
}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT"}
TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}


def _openai(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }


def _anthropic(content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 4, "output_tokens": 2},
    }


CANNED: dict[str, dict[str, Any]] = {
    "openai-refusal": _openai(
        {"role": "assistant", "content": None, "refusal": REFUSAL_TEXT}, "stop"
    ),
    "anthropic-thinking": _anthropic(
        [THINKING, REDACTED, {"type": "text", "text": "Checking."}, TOOL_USE], "tool_use"
    ),
    "anthropic-refusal": _anthropic([{"type": "text", "text": REFUSAL_TEXT}], "refusal"),
    "anthropic-silent-refusal": _anthropic([], "refusal"),
    "anthropic-text": _anthropic([{"type": "text", "text": "It is sunny."}], "end_turn"),
}


class _Handler(JSONHandler):
    def do_POST(self) -> None:
        got, _ = self._receive()
        self._send(200, json.dumps(CANNED[got.scenario]).encode())


class CannedServer(LoopbackServer):
    """``POST /{scenario}/...`` answers ``CANNED[scenario]`` with 200."""

    handler = _Handler
    name = "canned-server"


@pytest.fixture
def canned() -> Iterator[CannedServer]:
    server = CannedServer()
    try:
        yield server
    finally:
        server.close()
    assert not server.alive


def adapter_table(server: LoopbackServer, scenario: str) -> dict[str, Any]:
    vendor = scenario.split("-", maxsplit=1)[0]
    base = f"http://127.0.0.1:{server.port}/{scenario}"
    return {
        "adapter": vendor,
        "model": "m",
        "base_url": base + ("/v1" if vendor == "openai" else ""),
        "retry_backoff": 0.0,
    }


def record(fixture: Path, table: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"provider": {"kind": "record", "fixture": str(fixture), "live": table, **extra}}


def replay(fixture: Path) -> dict[str, Any]:
    return {"provider": {"kind": "replay", "fixture": str(fixture)}}


def live_record_replay(
    server: LoopbackServer, scenario: str, fixture: Path, request: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The answer to ``request`` live, while recording, and replayed from the recording."""
    table = adapter_table(server, scenario)
    with open_provider({"provider": {"kind": "live", **table}}) as llm:
        live = llm.complete(request)
    with open_provider(record(fixture, table)) as rec:
        recorded = rec.complete(request)
    with open_provider(replay(fixture)) as rep:
        replayed = rep.complete(request)
    return live, recorded, replayed


# -- an OpenAI refusal is kept, not an empty answer -------------------------------------


def test_an_openai_refusal_is_kept_through_live_record_and_replay(
    canned: CannedServer, tmp_path: Path
) -> None:
    fixture = tmp_path / "refusal.jsonl"
    answers = live_record_replay(canned, "openai-refusal", fixture, ask("do something bad"))
    for answer in answers:
        assert answer["refusal"] == REFUSAL_TEXT
        assert answer["content"] is None
        assert answer["finish_reason"] == "stop"
    stored = load_fixture(fixture).responses_for(request_hash(ask("do something bad")))
    assert stored is not None and stored[0]["refusal"] == REFUSAL_TEXT


def test_an_answer_without_a_refusal_has_no_refusal_key(chat: ChatServer, tmp_path: Path) -> None:
    table = {"adapter": "openai", "model": "m", "base_url": chat.base_url("echo")}
    with open_provider(record(tmp_path / "f.jsonl", table)) as rec:
        answer = rec.complete(ask("hi"))
    assert answer["content"] == "1: hi"
    assert "refusal" not in answer and "reasoning" not in answer


# -- Anthropic thinking blocks are kept, and sent back verbatim -----------------------


def test_anthropic_thinking_blocks_are_recorded_and_replayed(
    canned: CannedServer, tmp_path: Path
) -> None:
    fixture = tmp_path / "thinking.jsonl"
    request = ask("weather in Paris?")
    request["params"] = {"thinking": {"type": "enabled", "budget_tokens": 1024}}
    answers = live_record_replay(canned, "anthropic-thinking", fixture, request)
    for answer in answers:
        assert answer["reasoning"] == {"vendor": "anthropic", "items": [THINKING, REDACTED]}
        assert answer["content"] == "Checking."
        assert answer["tool_calls"][0]["name"] == "get_weather"
        assert answer["finish_reason"] == "tool_calls"
        assert "refusal" not in answer
    assert canned.received[-1].body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    stored = load_fixture(fixture).responses_for(request_hash(request))
    assert (
        stored is not None
        and stored[0]["reasoning"]["items"][0]["signature"] == (THINKING["signature"])
    )


def test_thinking_blocks_of_an_earlier_turn_go_back_first_and_verbatim(
    canned: CannedServer,
) -> None:
    table = adapter_table(canned, "anthropic-text")
    turn = {
        "messages": [
            {"role": "user", "content": "weather in Paris?"},
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "Checking."}, THINKING, REDACTED],
                "tool_calls": [
                    {"id": "toolu_1", "name": "get_weather", "arguments": '{"city":"Paris"}'}
                ],
            },
            {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"},
        ]
    }
    with open_provider({"provider": {"kind": "live", **table}}) as llm:
        assert llm.complete(turn)["content"] == "It is sunny."
    sent = canned.received[-1].body["messages"][1]
    assert sent["role"] == "assistant"
    assert sent["content"] == [
        THINKING,
        REDACTED,
        {"type": "text", "text": "Checking."},
        TOOL_USE,
    ]


def test_a_neutral_anthropic_reasoning_on_a_message_is_sent_first_and_others_omitted() -> None:
    message = {"role": "assistant", "content": "Checking."}
    ours = {**message, "reasoning": {"vendor": "anthropic", "items": [THINKING]}}
    theirs = {**message, "reasoning": {"vendor": "openai", "items": [{"type": "reasoning"}]}}
    for sent, blocks in ((ours, [THINKING]), (theirs, [])):
        body = to_body({"messages": [{"role": "user", "content": "q"}, sent]}, "m")
        assert body["messages"][1]["content"] == [*blocks, {"type": "text", "text": "Checking."}]


@pytest.mark.parametrize(
    ("scenario", "text"),
    [("anthropic-refusal", REFUSAL_TEXT), ("anthropic-silent-refusal", "")],
)
def test_an_anthropic_refusal_is_kept(
    canned: CannedServer, tmp_path: Path, scenario: str, text: str
) -> None:
    answers = live_record_replay(canned, scenario, tmp_path / "r.jsonl", ask("bad"))
    for answer in answers:
        assert answer["refusal"] == text
        assert answer["content"] is None
        assert answer["finish_reason"] == "refusal"
