"""Recording appends: each answer goes to the journal (many per sync), the fixture is
rewritten only when the journal is folded in, and it is valid at every moment.

The live side is the real 127.0.0.1 chat server (tests/support/chat_server.py); nothing is mocked.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from replay_actor import ReplayError, entry_line, load_fixture, request_hash
from replay_actor.authoring.add import add_response
from replay_actor.manifest import open_provider
from replay_actor.record.committer import Answer, RequestHash
from replay_actor.record.journal import Anchor, Record, anchor_line, header_line, record_line
from replay_actor.record.provider import COMPACT_BYTES_VARIABLE, RecordingProvider
from tests.support.chat_server import ChatServer

pytestmark = [pytest.mark.timeout(120)]


def hi(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def manifest(chat: ChatServer, fixture: Path, **extra: Any) -> dict[str, Any]:
    live = {"adapter": "openai", "model": "m", "base_url": chat.base_url(), "max_retries": 0}
    return {"provider": {"kind": "record", "fixture": str(fixture), "live": live, **extra}}


def journal_lines(path: Path) -> list[dict[str, Any]]:
    """The journal's complete lines (it is preallocated: its end is the first NUL)."""
    data = path.read_bytes().split(b"\0", 1)[0]
    return [json.loads(line) for line in data.split(b"\n") if line]


def test_answers_are_appended_to_the_journal_never_rewriting_the_fixture(
    chat: ChatServer, tmp_path: Path
) -> None:
    fixture = tmp_path / "f.jsonl"
    fixture.write_bytes(entry_line(request_hash(hi("held")), response={"content": "x"}) + b"\n")
    before = fixture.stat()
    with open_provider(manifest(chat, fixture)) as rec:
        for i in range(20):
            rec.complete(hi(f"q{i % 7}"))
        after = fixture.stat()
        assert (after.st_ino, after.st_mtime_ns, after.st_size) == (
            before.st_ino,
            before.st_mtime_ns,
            before.st_size,
        )
        lines = journal_lines(tmp_path / "f.jsonl.journal")
    # The header names the fixture the journal continues, then come the answers,
    # numbered in the order they were written.
    header = lines[0]
    assert set(header) == {"journal", "fixture", "holds"}
    assert header["journal"] == 2 and header["holds"] == 0
    assert [line["n"] for line in lines[1:]] == list(range(1, 21))
    assert [line["response"]["content"] for line in lines[1:]] == [
        f"{i + 1}: q{i % 7}" for i in range(20)
    ]
    loaded = load_fixture(fixture)
    assert loaded.responses == 21
    q0 = loaded.responses_for(request_hash(hi("q0")))
    assert q0 is not None
    assert [r["content"] for r in q0] == ["1: q0", "8: q0", "15: q0"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.jsonl", "f.jsonl.requests.jsonl"]


def test_the_journal_header_names_the_fixture_by_its_bytes(
    chat: ChatServer, tmp_path: Path
) -> None:
    import hashlib

    fixture = tmp_path / "f.jsonl"
    fixture.write_bytes(entry_line(request_hash(hi("held")), response={"content": "x"}) + b"\n")
    with open_provider(manifest(chat, fixture)) as rec:
        rec.complete(hi("new"))
        header = journal_lines(tmp_path / "f.jsonl.journal")[0]
    assert (
        header["fixture"]
        == "sha256:"
        + hashlib.sha256(
            entry_line(request_hash(hi("held")), response={"content": "x"}) + b"\n"
        ).hexdigest()
    )


def test_concurrent_answers_share_one_sync(chat: ChatServer, tmp_path: Path) -> None:
    """Answers that arrive while a batch is being written go out together: ten answers
    handed over while the journal is locked by another writer take at most two syncs."""
    fixture = tmp_path / "g.jsonl"
    rec = open_provider(manifest(chat, fixture))
    assert isinstance(rec, RecordingProvider)
    try:
        rec.complete(hi("first"))  # the journal exists from here on
        committer = rec._committer
        assert committer.syncs == 1
        holder = os.open(tmp_path / "g.jsonl.journal", os.O_RDONLY)
        try:
            fcntl.flock(holder, fcntl.LOCK_EX)  # another writer, mid-append
            answers = [
                Answer(RequestHash(request_hash(hi(f"b{i}"))), b'{"content":"b%d"}' % i, b"{}")
                for i in range(10)
            ]
            for answer in answers:
                committer.submit(answer)
            time.sleep(0.2)
            assert committer.syncs == 1  # nothing written while the lock is held
        finally:
            os.close(holder)  # the other writer is done
        for answer in answers:
            answer.wait()
        assert committer.syncs <= 3
    finally:
        rec.release()
    loaded = load_fixture(fixture)
    assert loaded.responses == 11
    assert loaded.responses_for(request_hash(hi("b9"))) == [{"content": "b9"}]


def test_threads_share_syncs(chat: ChatServer, tmp_path: Path) -> None:
    fixture = tmp_path / "t.jsonl"
    with open_provider(manifest(chat, fixture)) as rec:
        assert isinstance(rec, RecordingProvider)
        errors: list[BaseException] = []

        def worker(i: int) -> None:
            try:
                for j in range(25):
                    rec.complete(hi(f"w{i}-{j % 5}"))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=90)
        assert not errors
        syncs = rec._committer.syncs
        assert rec.snapshot()["recorded"] == 400
    assert syncs <= 400
    loaded = load_fixture(fixture)
    assert (len(loaded), loaded.responses) == (80, 400)


@pytest.mark.slow  # most of a minute or more: make test-tools runs it
def test_a_reader_sees_a_valid_fixture_at_every_moment(
    chat: ChatServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compactions (made frequent here) replace the fixture while a reader loads it in a
    loop: every load succeeds, and what it sees only grows."""
    monkeypatch.setenv(COMPACT_BYTES_VARIABLE, "1")  # the journal's bound: the fixture
    fixture = tmp_path / "v.jsonl"
    seen: list[int] = []
    stop = threading.Event()
    failures: list[BaseException] = []

    def reader() -> None:
        while not stop.is_set():
            try:
                seen.append(load_fixture(fixture).responses)
            except BaseException as exc:
                failures.append(exc)
                return

    with open_provider(manifest(chat, fixture)) as rec:
        thread = threading.Thread(target=reader)
        thread.start()
        try:
            for i in range(300):
                rec.complete(hi(f"r{i % 40}"))
        finally:
            stop.set()
            thread.join(timeout=30)
        during = load_fixture(fixture).responses
    assert not failures
    assert seen == sorted(seen)
    assert during > 0  # compactions happened while recording
    assert max(seen) > 0
    assert load_fixture(fixture).responses == 300


@pytest.mark.slow  # most of a minute or more: make test-tools runs it
def test_the_journal_stays_bounded(
    chat: ChatServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(COMPACT_BYTES_VARIABLE, "4096")
    fixture = tmp_path / "b.jsonl"
    largest = 0
    with open_provider(manifest(chat, fixture)) as rec:
        for i in range(400):
            rec.complete(hi(f"bounded {i}"))
            journal = tmp_path / "b.jsonl.journal"
            largest = max(largest, len(journal.read_bytes().split(b"\0", 1)[0]))
        on_disk = load_fixture(fixture).responses
    total = sum(len(line) for line in fixture.read_bytes().splitlines())
    assert on_disk > 200  # most answers were folded in while recording
    # Compactions run in the background: the journal overshoots its bound by what
    # arrives meanwhile, never by the whole recording.
    assert largest < total / 2


def test_an_entry_that_gains_responses_after_a_compaction(chat: ChatServer, tmp_path: Path) -> None:
    """The fixture's other lines are copied as they are (another layout included); an
    entry that gains a response is written again, its responses in order."""
    fixture = tmp_path / "c.jsonl"
    foreign = json.dumps(
        {"request_hash": request_hash(hi("held")), "schema_version": 1, "response": {"a": 1.5}},
        indent=None,
    ).encode()
    fixture.write_bytes(foreign + b"\n\n")  # another layout, and a blank line
    with open_provider(manifest(chat, fixture)) as rec:
        assert isinstance(rec, RecordingProvider)
        rec.complete(hi("again"))
        rec.compact()
        assert load_fixture(fixture).responses == 2
        rec.complete(hi("again"))
        rec.complete(hi("other"))
    data = fixture.read_bytes()
    assert data.startswith(foreign + b"\n\n")
    loaded = load_fixture(fixture)
    again = loaded.responses_for(request_hash(hi("again")))
    assert again is not None
    assert [r["content"] for r in again] == ["1: again", "2: again"]
    assert loaded.responses == 4


def test_the_fixtures_mode_is_kept(chat: ChatServer, tmp_path: Path) -> None:
    fixture = tmp_path / "m.jsonl"
    fixture.write_bytes(b"")
    fixture.chmod(0o640)
    with open_provider(manifest(chat, fixture)) as rec:
        rec.complete(hi("x"))
    assert fixture.stat().st_mode & 0o777 == 0o640
    assert load_fixture(fixture).responses == 1


def test_add_is_refused_while_recording_and_works_after(chat: ChatServer, tmp_path: Path) -> None:
    fixture = tmp_path / "a.jsonl"
    with open_provider(manifest(chat, fixture)) as rec:
        rec.complete(hi("x"))
        with pytest.raises(ReplayError, match="another writer holds the fixture's lock"):
            add_response(fixture, request_hash(hi("y")), {"content": "y"})
    add_response(fixture, request_hash(hi("y")), {"content": "y"})
    assert load_fixture(fixture).responses == 2


# -- recovery of a version 2 journal ---------------------------------------------------


def _digest(data: bytes) -> str:
    import hashlib

    return "sha256:" + hashlib.sha256(data).hexdigest()


def _record(n: int, text: str, content: str) -> bytes:
    return record_line(Record(n, request_hash(hi(text)), b'{"content":"%s"}' % content.encode()))


def test_a_crash_between_the_anchor_and_the_new_journal(chat: ChatServer, tmp_path: Path) -> None:
    """The fixture was replaced (it holds answers 1-2, named by the anchor a compaction
    wrote), the journal was not: only the answers after the anchor are folded."""
    old = b""
    new = (
        entry_line(request_hash(hi("a")), response={"content": "1"})
        + b"\n"
        + entry_line(request_hash(hi("b")), response={"content": "2"})
        + b"\n"
    )
    fixture = tmp_path / "k.jsonl"
    fixture.write_bytes(new)
    (tmp_path / "k.jsonl.journal").write_bytes(
        header_line(Anchor(_digest(old), 0))
        + _record(1, "a", "1")
        + _record(2, "b", "2")
        + _record(3, "a", "3")
        + anchor_line(Anchor(_digest(new), 2))
        + _record(4, "c", "4")
        + b'{"n":5,"request_hash":"sha'  # torn: never acknowledged
        + b"\0" * 100
    )
    with open_provider(manifest(chat, fixture)) as rec:
        assert rec.complete(hi("a"))["content"] == "1"
        assert rec.complete(hi("a"))["content"] == "3"
        assert rec.complete(hi("c"))["content"] == "4"
    assert chat.count("echo") == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.jsonl"]
    assert load_fixture(fixture).responses == 4


def test_a_v2_journal_of_a_changed_fixture_is_refused_and_kept(
    chat: ChatServer, tmp_path: Path
) -> None:
    fixture = tmp_path / "h.jsonl"
    fixture.write_bytes(entry_line(request_hash(hi("edited")), response={"content": "x"}) + b"\n")
    journal = tmp_path / "h.jsonl.journal"
    journal.write_bytes(header_line(Anchor(_digest(b""), 0)) + _record(1, "a", "1"))
    with pytest.raises(ReplayError, match="changed outside the recorder"):
        open_provider(manifest(chat, fixture))
    assert journal.exists()
    assert not (tmp_path / "h.jsonl.lock").exists()


def test_a_torn_line_left_by_a_killed_writer_is_overwritten(
    chat: ChatServer, tmp_path: Path
) -> None:
    fixture = tmp_path / "w.jsonl"
    with open_provider(manifest(chat, fixture)) as rec:
        rec.complete(hi("one"))
        journal = tmp_path / "w.jsonl.journal"
        data = journal.read_bytes()
        end = data.index(b"\0")
        with journal.open("r+b") as file:  # another writer died inside its write
            file.seek(end)
            file.write(b'{"n":2,"request_hash":"sha256:0000')
        rec.complete(hi("two"))
        lines = journal_lines(journal)
        assert [line.get("n") for line in lines] == [None, 1, 2]
        assert lines[2]["response"]["content"] == "2: two"
    assert load_fixture(fixture).responses == 2


def test_a_refused_answer_in_private_mode_shows_no_hash_in_any_frame(
    chat: ChatServer, tmp_path: Path
) -> None:
    """The refusal is decided in the journal's writer thread, whose frames hold every
    answer's hash: the caller's error carries none of them."""
    import traceback

    fixture = tmp_path / "p.jsonl"
    private = manifest(chat, fixture, data="private", ceilings={"max_response_bytes": 160})
    long = "a question whose answer is too large " * 3
    shown = ""
    with open_provider(private) as rec:
        for _ in range(2):  # before the journal exists, then once it does
            with pytest.raises(ReplayError, match="response_too_large") as caught:
                rec.complete(hi(long))
            exc = caught.value
            shown += "".join(
                traceback.TracebackException(
                    type(exc), exc, exc.__traceback__, capture_locals=True
                ).format()
            )
            rec.complete(hi("hi"))
    assert load_fixture(fixture).responses == 2
    digest = request_hash(hi(long))
    assert digest not in shown
    assert digest.removeprefix("sha256:") not in shown
