"""``scope``: hashed like every request field, never sent to a live model.

The property that matters to evaluations: otherwise identical requests with different
scopes get their own entries, so concurrent epochs or rollouts pair with their own
recorded answers whatever order they arrive in.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from replay_actor import Request, RequestError, acquire, load_fixture, open_provider, request_hash
from replay_actor._request import canonical_request
from replay_actor.fixture import entry_line
from tests.support.chat_server import ChatServer

HI: dict[str, Any] = {"messages": [{"role": "user", "content": "hi"}]}


def scoped(scope: dict[str, Any] | None) -> dict[str, Any]:
    return {**HI, "scope": scope}


def test_scope_changes_the_hash() -> None:
    assert request_hash(scoped({"epoch": 1})) != request_hash(HI)
    assert request_hash(scoped({"epoch": 1})) != request_hash(scoped({"epoch": 2}))


def test_no_scope_and_empty_scope_hash_as_absent() -> None:
    assert request_hash(scoped(None)) == request_hash(HI)
    assert request_hash(scoped({})) == request_hash(HI)
    assert b"scope" not in canonical_request(scoped({}))


def test_scope_is_canonical_like_every_field() -> None:
    one = scoped({"epoch": 1, "rollout": "a"})
    other = scoped({"rollout": "a", "epoch": 1.0})
    assert request_hash(one) == request_hash(other)
    assert canonical_request(one).endswith(b'"scope":{"epoch":1,"rollout":"a"}}')


def test_struct_and_mapping_hash_alike() -> None:
    struct = Request(messages=HI["messages"], scope={"epoch": 3})
    assert request_hash(struct) == request_hash(scoped({"epoch": 3}))


@pytest.mark.parametrize("bad", ["epoch-1", [1], {"x": float("nan")}, {1: "a"}])
def test_scope_must_be_a_json_object(bad: Any) -> None:
    with pytest.raises(RequestError):
        request_hash(scoped(bad))


def test_scoped_sequences_pair_whatever_the_arrival_order(tmp_path: Path, no_leaks: None) -> None:
    fixture = tmp_path / "f.jsonl"
    with fixture.open("wb") as out:
        for epoch in (1, 2, 3, 4, 5):
            out.write(
                entry_line(request_hash(scoped({"epoch": epoch})), {"content": f"#{epoch}"}) + b"\n"
            )

    async def run(order: list[int]) -> dict[int, str]:
        with acquire(str(fixture)) as provider:
            answers = await asyncio.gather(
                *(provider.acomplete(scoped({"epoch": epoch})) for epoch in order)
            )
        return {epoch: answer["content"] for epoch, answer in zip(order, answers, strict=True)}

    expected = {epoch: f"#{epoch}" for epoch in (1, 2, 3, 4, 5)}
    assert asyncio.run(run([1, 2, 3, 4, 5])) == expected
    assert asyncio.run(run([5, 3, 1, 4, 2])) == expected


def test_scope_is_never_sent_and_the_recording_is_keyed_by_it(
    chat: ChatServer, tmp_path: Path
) -> None:
    fixture = tmp_path / "rec.jsonl"
    live = {"adapter": "openai", "model": "m", "base_url": chat.base_url(), "max_retries": 0}
    manifest = {"provider": {"kind": "record", "fixture": str(fixture), "live": live}}
    with open_provider(manifest) as recorder:
        first = recorder.complete(scoped({"epoch": 1}))
        second = recorder.complete(scoped({"epoch": 2}))
    assert first != second  # two live calls: the scopes made two requests
    assert [r.body["messages"] for r in chat.received] == [HI["messages"], HI["messages"]]
    assert all("scope" not in r.body for r in chat.received)
    loaded = load_fixture(str(fixture))
    assert loaded.snapshot()["entries"] == 2
    with acquire(str(fixture)) as replay:
        assert replay.complete(scoped({"epoch": 2})) == second
        assert replay.complete(scoped({"epoch": 1})) == first


def test_live_provider_never_sends_scope(chat: ChatServer) -> None:
    live = {"adapter": "openai", "model": "m", "base_url": chat.base_url(), "max_retries": 0}
    with open_provider({"provider": {"kind": "live", **live}}) as provider:
        provider.complete(scoped({"epoch": 7}))
        asyncio.run(provider.acomplete(scoped({"rollout": "r"})))
    assert len(chat.received) == 2
    assert all("scope" not in r.body for r in chat.received)


def test_cli_hash_and_lookup_know_scope(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_leaks: None
) -> None:
    from replay_actor.cli import main

    request = tmp_path / "request.json"
    request.write_text(json.dumps(scoped({"epoch": 2})))
    assert main(["hash", str(request)]) == 0
    assert capsys.readouterr().out.strip() == request_hash(scoped({"epoch": 2}))
    fixture = tmp_path / "f.jsonl"
    fixture.write_bytes(entry_line(request_hash(scoped({"epoch": 2})), {"content": "two"}) + b"\n")
    assert main(["lookup", str(fixture), str(request)]) == 0
    assert json.loads(capsys.readouterr().out) == {"content": "two"}
    request.write_text(json.dumps(scoped({"epoch": 3})))
    assert main(["lookup", str(fixture), str(request)]) == 3
