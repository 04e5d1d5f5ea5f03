"""The recording provider: replay what exists, record the rest, survive crashes.

The live side is the real 127.0.0.1 chat server. The central property: one application
function, run against live, record and replay manifests, gives the answers each mode
should — and replaying the recording gives the recorded answers, in order, with no miss.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import selectors
import signal
import subprocess
import sys
import textwrap
import threading
import traceback
from pathlib import Path
from typing import Any

import msgspec
import pytest

from replay_actor import (
    RecordingError,
    ReplayError,
    ReplayMiss,
    SequenceExhausted,
    entry_line,
    load_fixture,
    request_hash,
)
from replay_actor.manifest import Provider, open_provider
from tests.support.chat_server import ChatServer


def hi(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


WORKFLOW = [hi("plan"), hi("act"), hi("plan"), hi("report")]


def app(provider: Provider) -> list[dict[str, Any]]:
    """The application: the same code whatever the provider's kind."""
    return [provider.complete(request) for request in WORKFLOW]


def live_table(chat: ChatServer, scenario: str = "echo") -> dict[str, Any]:
    return {
        "adapter": "openai",
        "model": "test-model",
        "base_url": chat.base_url(scenario),
        "retry_backoff": 0.0,
        "max_retries": 0,
    }


def record_manifest(chat: ChatServer, fixture: Path, **extra: Any) -> dict[str, Any]:
    return {
        "provider": {"kind": "record", "fixture": str(fixture), "live": live_table(chat), **extra}
    }


def write_toml(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def leftovers(folder: Path) -> list[str]:
    return sorted(
        p.name for p in folder.iterdir() if p.name.endswith((".tmp", ".journal", ".lock"))
    )


# -- one application, three modes -------------------------------------------------------


def test_same_app_in_live_record_and_replay(
    chat: ChatServer, tmp_path: Path, no_leaks: None
) -> None:
    live_manifest = {"provider": {"kind": "live", **live_table(chat)}}
    with open_provider(live_manifest) as live:
        live_answers = app(live)
    assert [a["content"] for a in live_answers] == ["1: plan", "2: act", "3: plan", "4: report"]

    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    manifest = write_toml(
        tmp_path / "record.toml",
        f"""
        [provider]
        kind = "record"
        fixture = "fixtures/recorded.jsonl"
        [provider.live]
        adapter = "openai"
        model = "test-model"
        base_url = "{chat.base_url()}"
        max_retries = 0
        """,
    )
    with open_provider(manifest) as rec:
        recorded = app(rec)
        snap = rec.snapshot()
    assert [a["content"] for a in recorded] == ["5: plan", "6: act", "7: plan", "8: report"]
    assert chat.count("echo") == 8
    assert snap["kind"] == "record"
    assert snap["recorded"] == 4
    assert snap["calls"] == 4
    assert (snap["entries"], snap["sequence_entries"], snap["responses"]) == (3, 1, 4)
    assert leftovers(fixtures) == []

    # The repeated request became a sequence, in call order.
    plan = load_fixture(fixtures / "recorded.jsonl").responses_for(request_hash(hi("plan")))
    assert plan is not None
    assert [r["content"] for r in plan] == ["5: plan", "7: plan"]

    # Recording again: everything is held now, so nothing goes live.
    with open_provider(manifest) as rec:
        assert app(rec) == recorded
        snap = rec.snapshot()
    assert chat.count("echo") == 8
    assert (snap["recorded"], snap["calls"], snap["served"]) == (0, 0, 4)

    # Replaying the recording: the same answers, in the same order, no miss.
    replay = write_toml(
        tmp_path / "replay.toml",
        """
        [provider]
        kind = "replay"
        fixture = "fixtures/recorded.jsonl"
        """,
    )
    with open_provider(replay) as rep:
        assert app(rep) == recorded
        snap = rep.snapshot()
        with pytest.raises(SequenceExhausted):
            rep.complete(hi("plan"))
    assert snap["misses"] == 0
    assert chat.count("echo") == 8


def test_async_app_records_and_replays(chat: ChatServer, tmp_path: Path) -> None:
    fixture = tmp_path / "a.jsonl"

    async def app_async(provider: Provider) -> list[dict[str, Any]]:
        return [await provider.acomplete(request) for request in WORKFLOW]

    with open_provider(record_manifest(chat, fixture)) as rec:
        recorded = asyncio.run(app_async(rec))
    with open_provider(record_manifest(chat, fixture)) as rec:
        again = asyncio.run(app_async(rec))
    assert again == recorded
    assert chat.count("echo") == 4


# -- recording semantics ------------------------------------------------------------------


def test_fixture_is_valid_after_every_call(chat: ChatServer, tmp_path: Path) -> None:
    """Each answer is appended to the journal, never a rewrite of the fixture: the file
    on disk stays the valid (empty) fixture it was, and the session's snapshot, which is
    what the next compaction writes, holds every answer; release writes them."""
    fixture = tmp_path / "f.jsonl"
    with open_provider(record_manifest(chat, fixture)) as rec:
        assert fixture.read_bytes() == b""  # a missing fixture starts empty, and valid
        inode = fixture.stat().st_ino
        seen = []
        for i, request in enumerate([hi("a"), hi("a"), hi("b"), hi("a")], start=1):
            rec.complete(request)
            assert load_fixture(fixture).responses == 0  # valid, and not rewritten
            assert fixture.stat().st_ino == inode
            snap = rec.snapshot()
            seen.append((snap["entries"], snap["responses"]))
            assert snap["responses"] == i
            assert leftovers(tmp_path) == ["f.jsonl.journal", "f.jsonl.lock"]
        final_hash = rec.snapshot()["fixture_set_hash"]
    assert seen == [(1, 1), (1, 2), (2, 3), (2, 4)]
    assert leftovers(tmp_path) == []
    loaded = load_fixture(fixture)
    assert loaded.fixture_set_hash == final_hash
    a = loaded.responses_for(request_hash(hi("a")))
    assert a is not None
    assert [r["content"] for r in a] == ["1: a", "2: a", "4: a"]
    # Each line is what entry_line writes for that entry.
    lines = fixture.read_bytes().splitlines()
    assert entry_line(request_hash(hi("a")), responses=a) in lines


def test_held_entries_answer_with_sequence_semantics(chat: ChatServer, tmp_path: Path) -> None:
    fixture = tmp_path / "held.jsonl"
    fixture.write_bytes(
        entry_line(request_hash(hi("known")), response={"content": "frozen"})
        + b"\n"
        + entry_line(request_hash(hi("seq")), responses=[{"content": "s1"}, {"content": "s2"}])
        + b"\n"
    )
    with open_provider(record_manifest(chat, fixture)) as rec:
        assert [rec.complete(hi("known"))["content"] for _ in range(3)] == ["frozen"] * 3
        assert rec.complete(hi("seq"))["content"] == "s1"
        assert rec.complete(hi("seq"))["content"] == "s2"
        with pytest.raises(SequenceExhausted) as caught:
            rec.complete(hi("seq"))
        assert caught.value.request_hash == request_hash(hi("seq"))
        assert chat.count("echo") == 0
        assert rec.complete(hi("new"))["content"] == "1: new"
        snap = rec.snapshot()
    assert (snap["served"], snap["exhausted"], snap["recorded"]) == (5, 1, 1)


def test_private_exhaustion_carries_no_hash(chat: ChatServer, tmp_path: Path) -> None:
    fixture = tmp_path / "p.jsonl"
    fixture.write_bytes(entry_line(request_hash(hi("seq")), responses=[{"content": "s"}]) + b"\n")
    with open_provider(record_manifest(chat, fixture, data="private")) as rec:
        rec.complete(hi("seq"))
        with pytest.raises(SequenceExhausted) as caught:
            rec.complete(hi("seq"))
    assert caught.value.request_hash is None
    assert "sha256" not in str(caught.value)


def test_answer_is_returned_as_it_will_be_replayed(chat: ChatServer, tmp_path: Path) -> None:
    fixture = tmp_path / "t.jsonl"
    manifest = record_manifest(chat, fixture)
    manifest["provider"]["live"]["base_url"] = chat.base_url("tools")
    with open_provider(manifest) as rec:
        recorded = rec.complete(hi("weather"))
        recorded["content"] = "mutated by the caller"
    stored = load_fixture(fixture).responses_for(request_hash(hi("weather")))
    assert stored is not None
    assert stored[0]["tool_calls"] == [
        {"id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'}
    ]
    assert stored[0]["content"] is None


def test_unrecordable_response_fails_and_changes_nothing(chat: ChatServer, tmp_path: Path) -> None:
    fixture = tmp_path / "small.jsonl"
    manifest = record_manifest(chat, fixture, ceilings={"max_response_bytes": 40})
    with open_provider(manifest) as rec:
        with pytest.raises(ReplayError, match="response_too_large"):
            rec.complete(hi("x"))
        assert fixture.read_bytes() == b""
        assert not (tmp_path / "small.jsonl.journal").exists()
        assert rec.snapshot()["recorded"] == 0


def test_live_failure_records_nothing(chat: ChatServer, tmp_path: Path) -> None:
    from replay_actor import LiveProviderError

    fixture = tmp_path / "fail.jsonl"
    manifest = record_manifest(chat, fixture)
    manifest["provider"]["live"]["base_url"] = chat.base_url("500")
    with open_provider(manifest) as rec, pytest.raises(LiveProviderError):
        rec.complete(hi("x"))
    assert fixture.read_bytes() == b""


def test_concurrent_callers_record_every_answer(chat: ChatServer, tmp_path: Path) -> None:
    fixture = tmp_path / "c.jsonl"
    answers: list[str] = []
    lock = threading.Lock()
    with open_provider(record_manifest(chat, fixture)) as rec:

        def worker(i: int) -> None:
            text = "same" if i % 2 else f"own{i}"
            answer = rec.complete(hi(text))
            with lock:
                answers.append(answer["content"])

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert rec.snapshot()["recorded"] == 8
    loaded = load_fixture(fixture)
    assert (len(loaded), loaded.responses) == (5, 8)
    same = loaded.responses_for(request_hash(hi("same")))
    assert same is not None
    assert sorted(r["content"] for r in same) == sorted(a for a in answers if a.endswith("same"))


def test_release_is_idempotent_and_final(chat: ChatServer, tmp_path: Path) -> None:
    from replay_actor import ProviderClosed

    rec = open_provider(record_manifest(chat, tmp_path / "r.jsonl"))
    rec.complete(hi("x"))
    rec.release()
    rec.release()
    assert rec.closed
    with pytest.raises(ProviderClosed):
        rec.complete(hi("x"))
    with pytest.raises(ProviderClosed):
        asyncio.run(rec.acomplete(hi("x")))
    assert leftovers(tmp_path) == []


def test_snapshot_holds_no_payload_hash_or_path(chat: ChatServer, tmp_path: Path) -> None:
    fixture = tmp_path / "s.jsonl"
    with open_provider(record_manifest(chat, fixture)) as rec:
        rec.complete(hi("secret words"))
        snap = rec.snapshot()
    text = json.dumps(snap)
    assert "secret words" not in text
    assert request_hash(hi("secret words")) not in text
    assert str(tmp_path) not in text
    assert set(snap) >= {"kind", "recorded", "adapter", "model", "calls", "fixture_set_hash"}


# -- several recorders -----------------------------------------------------------------------


def test_two_recorders_in_one_process(chat: ChatServer, tmp_path: Path) -> None:
    """Two sessions of one fixture record side by side (they share its journal); a
    request both ask becomes a sequence in the order the answers came."""
    fixture = tmp_path / "two.jsonl"
    with (
        open_provider(record_manifest(chat, fixture)) as first,
        open_provider(record_manifest(chat, fixture)) as second,
    ):
        assert first.complete(hi("own"))["content"] == "1: own"
        assert second.complete(hi("same"))["content"] == "2: same"
        assert first.complete(hi("same"))["content"] == "3: same"
        assert second.snapshot()["responses"] == 3
    assert leftovers(tmp_path) == []
    loaded = load_fixture(fixture)
    same = loaded.responses_for(request_hash(hi("same")))
    assert same is not None
    assert [r["content"] for r in same] == ["2: same", "3: same"]
    assert loaded.responses == 3


CHILD = """
import json, os, sys, time
from replay_actor.manifest import open_provider

rec = open_provider(sys.argv[1])
answers = [rec.complete({"messages": [{"role": "user", "content": t}]}) for t in sys.argv[3:]]
if sys.argv[2] == "compacted":
    # The crash comes after a compaction (else: with every answer in the journal only).
    rec.compact()
print(json.dumps(answers), flush=True)
time.sleep(120)
"""


def _start_child(manifest: Path, mode: str, *prompts: str) -> tuple[subprocess.Popen[str], Any]:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(manifest), mode, *prompts],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        ready = sel.select(timeout=60)
    if not ready:
        proc.kill()
        proc.wait(timeout=10)
        pytest.fail("the recording child did not report")
    return proc, json.loads(proc.stdout.readline())


def _kill(proc: subprocess.Popen[str]) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.stdout is not None
    proc.stdout.close()


def _record_toml(tmp_path: Path, chat: ChatServer) -> Path:
    return write_toml(
        tmp_path / "record.toml",
        f"""
        [provider]
        kind = "record"
        fixture = "crash.jsonl"
        [provider.live]
        adapter = "openai"
        model = "test-model"
        base_url = "{chat.base_url()}"
        max_retries = 0
        """,
    )


def test_two_recorders_in_two_processes(chat: ChatServer, tmp_path: Path, no_leaks: None) -> None:
    """A second process records the same fixture while the first one does; the first one
    is SIGKILLed, and the survivor folds its answers in when it leaves."""
    manifest = _record_toml(tmp_path, chat)
    proc, answers = _start_child(manifest, "journal-only", "a", "b", "a")
    assert [a["content"] for a in answers] == ["1: a", "2: b", "3: a"]
    try:
        rec = open_provider(manifest)
    finally:
        _kill(proc)
    with rec:
        # What the journal held at the open is answered from it, in order.
        assert rec.complete(hi("a"))["content"] == "1: a"
        assert rec.complete(hi("c"))["content"] == "4: c"
    assert leftovers(tmp_path) == []
    loaded = load_fixture(tmp_path / "crash.jsonl")
    assert loaded.responses == 4
    a = loaded.responses_for(request_hash(hi("a")))
    assert a is not None
    assert [r["content"] for r in a] == ["1: a", "3: a"]


@pytest.mark.parametrize("mode", ["journal-only", "compacted"])
def test_sigkill_mid_recording_loses_nothing(
    chat: ChatServer, tmp_path: Path, mode: str, no_leaks: None
) -> None:
    manifest = _record_toml(tmp_path, chat)
    fixture = tmp_path / "crash.jsonl"
    (tmp_path / "crash.jsonl").write_bytes(b"")
    proc, answers = _start_child(manifest, mode, "a", "b", "a")
    _kill(proc)
    assert [a["content"] for a in answers] == ["1: a", "2: b", "3: a"]
    on_disk = load_fixture(fixture)  # valid, whatever moment the crash hit
    assert on_disk.responses == (0 if mode == "journal-only" else 3)
    assert (tmp_path / "crash.jsonl.journal").exists()

    with open_provider(manifest) as rec:
        replayed = [rec.complete(hi(t)) for t in ("a", "b", "a")]
        snap = rec.snapshot()
    assert replayed == answers
    assert (snap["responses"], snap["calls"]) == (3, 0)  # recovered once, nothing duplicated
    assert chat.count("echo") == 3
    assert leftovers(tmp_path) == []
    assert load_fixture(fixture).responses == 3


# -- the journal, directly -------------------------------------------------------------------


def _journal_line(req: dict[str, Any], response: dict[str, Any], after: str) -> bytes:
    body = {"request_hash": request_hash(req), "response": response, "after": after}
    return msgspec.json.encode(body) + b"\n"


def _empty_hash() -> str:
    return "sha256:" + hashlib.sha256(b"[]").hexdigest()


def test_unfinalised_journal_is_folded_and_torn_tail_ignored(
    chat: ChatServer, tmp_path: Path
) -> None:
    fixture = tmp_path / "j.jsonl"
    fixture.write_bytes(b"")
    journal = tmp_path / "j.jsonl.journal"
    journal.write_bytes(
        msgspec.json.encode({"journal": 1, "base": _empty_hash()})
        + b"\n"
        + _journal_line(hi("q"), {"content": "first"}, "sha256:" + "1" * 64)
        + _journal_line(hi("q"), {"content": "second"}, "sha256:" + "2" * 64)
        + b'{"request_hash":"sha256:'  # torn: the crash hit inside this write
    )
    with open_provider(record_manifest(chat, fixture)) as rec:
        assert rec.complete(hi("q"))["content"] == "first"
        assert rec.complete(hi("q"))["content"] == "second"
        with pytest.raises(SequenceExhausted):
            rec.complete(hi("q"))
    assert not journal.exists()
    assert chat.count("echo") == 0


def test_journal_for_a_changed_fixture_is_refused_and_kept(
    chat: ChatServer, tmp_path: Path
) -> None:
    fixture = tmp_path / "k.jsonl"
    fixture.write_bytes(entry_line(request_hash(hi("other")), response={"content": "x"}) + b"\n")
    journal = tmp_path / "k.jsonl.journal"
    journal.write_bytes(
        msgspec.json.encode({"journal": 1, "base": _empty_hash()})
        + b"\n"
        + _journal_line(hi("q"), {"content": "first"}, "sha256:" + "1" * 64)
    )
    with pytest.raises(ReplayError, match="changed outside the recorder"):
        open_provider(record_manifest(chat, fixture))
    assert journal.exists()
    assert not (tmp_path / "k.jsonl.lock").exists()


def test_corrupt_journal_is_refused(chat: ChatServer, tmp_path: Path) -> None:
    fixture = tmp_path / "c.jsonl"
    fixture.write_bytes(b"")
    (tmp_path / "c.jsonl.journal").write_bytes(
        msgspec.json.encode({"journal": 1, "base": _empty_hash()}) + b"\nnot json\n"
    )
    with pytest.raises(ReplayError, match="corrupt at line 2"):
        open_provider(record_manifest(chat, fixture))


def test_stale_temp_files_are_removed(chat: ChatServer, tmp_path: Path) -> None:
    fixture = tmp_path / "s.jsonl"
    (tmp_path / ".s.jsonl.deadbeef.tmp").write_bytes(b"half a fixture")
    with open_provider(record_manifest(chat, fixture)):
        pass
    assert leftovers(tmp_path) == []


def test_rejected_fixture_is_reported(chat: ChatServer, tmp_path: Path) -> None:
    from replay_actor import FixtureError

    fixture = tmp_path / "bad.jsonl"
    fixture.write_bytes(b"not json\n")
    with pytest.raises(FixtureError) as caught:
        open_provider(record_manifest(chat, fixture))
    assert (caught.value.reason, caught.value.line) == ("invalid_json", 1)
    assert leftovers(tmp_path) == []


def test_complete_many_in_live_record_and_replay(
    chat: ChatServer, tmp_path: Path, no_leaks: None
) -> None:
    fixture = tmp_path / "batch.jsonl"
    batch: list[Any] = [*WORKFLOW, {"messages": []}]
    with open_provider({"provider": {"kind": "live", **live_table(chat)}}) as live:
        live_answers = live.complete_many(batch)
    with open_provider(record_manifest(chat, fixture)) as rec:
        recorded = rec.complete_many(batch)
    with open_provider({"provider": {"kind": "replay", "fixture": str(fixture)}}) as replay:
        replayed = replay.complete_many(batch)
    for answers in (live_answers, recorded, replayed):
        assert [type(a).__name__ for a in answers] == ["dict"] * 4 + ["RequestError"]
    assert recorded[:4] == replayed[:4]


def ask(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def record(fixture: Path, table: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"provider": {"kind": "record", "fixture": str(fixture), "live": table, **extra}}


def replay(fixture: Path) -> dict[str, Any]:
    return {"provider": {"kind": "replay", "fixture": str(fixture)}}


# -- a fork child cannot record into (or tear down) the parent's session ---------------


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.timeout(60)
def test_a_fork_child_is_refused_and_leaves_the_parents_session_whole(
    chat: ChatServer, tmp_path: Path
) -> None:
    fixture = tmp_path / "forked.jsonl"
    table = {"adapter": "openai", "model": "m", "base_url": chat.base_url("echo")}
    rec = open_provider(record(fixture, table))
    try:
        assert rec.complete(ask("before"))["content"] == "1: before"
        pid = os.fork()
        if pid == 0:  # the child: only os._exit leaves it
            code = 9
            try:
                try:
                    rec.complete(ask("child"))
                    code = 1  # it recorded: the parent's next rewrite would drop it
                except RecordingError as exc:
                    code = 0 if "forked child" in str(exc) else 2
                try:
                    asyncio.run(rec.acomplete(ask("child async")))
                    code = code or 3
                except RecordingError:
                    pass
                rec.release()  # must not delete the parent's journal or lock
                rec.release()
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert chat.count("echo") == 1  # the child never asked the model
        assert (tmp_path / "forked.jsonl.journal").exists()
        from replay_actor.authoring.add import add_response

        with pytest.raises(ReplayError, match="another writer holds the fixture's lock"):
            add_response(fixture, request_hash(ask("x")), {"content": "x"})  # still held
        assert rec.complete(ask("after"))["content"] == "2: after"
    finally:
        rec.release()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "forked.jsonl",
        "forked.jsonl.requests.jsonl",
    ]
    with open_provider(replay(fixture)) as rep:
        assert rep.complete(ask("before"))["content"] == "1: before"
        assert rep.complete(ask("after"))["content"] == "2: after"
        with pytest.raises(ReplayMiss):
            rep.complete(ask("child"))


# -- private mode: no hash in the frames of an exhaustion ------------------------------


def _shown(exc: BaseException) -> str:
    tb = exc.__traceback__
    assert tb is not None
    report = traceback.TracebackException(type(exc), exc, tb.tb_next, capture_locals=True)
    return "".join(report.format())


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.timeout(60)
@pytest.mark.parametrize("form", ["sync", "async"])
def test_a_private_exhaustion_holds_no_hash_in_frame_locals(
    chat: ChatServer, tmp_path: Path, form: str
) -> None:
    fixture = tmp_path / "p.jsonl"
    digest = request_hash(ask("seq"))
    fixture.write_bytes(entry_line(digest, responses=[{"content": "s"}]) + b"\n")
    table = {"adapter": "openai", "model": "m", "base_url": chat.base_url("echo")}
    with open_provider(record(fixture, table, data="private")) as rec:
        if form == "sync":
            assert rec.complete(ask("seq"))["content"] == "s"
            with pytest.raises(SequenceExhausted) as caught:
                rec.complete(ask("seq"))
        else:

            async def twice() -> None:
                assert (await rec.acomplete(ask("seq")))["content"] == "s"
                await rec.acomplete(ask("seq"))

            with pytest.raises(SequenceExhausted) as caught:
                asyncio.run(twice())
    text = _shown(caught.value)
    assert "_from_fixture" in text and "complete" in text  # the frames are there
    assert "<request hash>" in text  # ... holding the box, not the hash
    assert digest[7:] not in text and digest[7:23] not in text


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.timeout(60)
def test_a_normal_exhaustion_still_names_its_hash(chat: ChatServer, tmp_path: Path) -> None:
    fixture = tmp_path / "n.jsonl"
    digest = request_hash(ask("seq"))
    fixture.write_bytes(entry_line(digest, responses=[{"content": "s"}]) + b"\n")
    table = {"adapter": "openai", "model": "m", "base_url": chat.base_url("echo")}
    with open_provider(record(fixture, table)) as rec:
        rec.complete(ask("seq"))
        with pytest.raises(SequenceExhausted) as caught:
            rec.complete(ask("seq"))
    assert caught.value.request_hash == digest
