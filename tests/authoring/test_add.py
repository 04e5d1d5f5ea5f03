"""add: a new entry, or one more element of an existing one, atomically, under a lock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from replay_actor import Ceilings, FixtureError, ReplayError, load_fixture, request_hash
from replay_actor.authoring.add import Added, add_response, remove_entry
from replay_actor.files.durable import release_lock, take_lock
from replay_actor.files.sidecar import sidecar_path
from replay_actor.fixture._format import entry_line
from tests.support.cli import run, write_json
from tests.support.paths import ROOT

pytestmark = pytest.mark.timeout(90)

A = "sha256:" + "a" * 64
B = "sha256:" + "b" * 64


def test_a_new_fixture_and_a_new_entry(tmp_path: Path) -> None:
    fixture = tmp_path / "fx.jsonl"
    assert add_response(fixture, A, {"content": "one"}) == Added(A, created=True, responses=1)
    assert fixture.read_bytes() == entry_line(A, response={"content": "one"}) + b"\n"
    assert load_fixture(fixture).responses_for(A) == [{"content": "one"}]


def test_appending_turns_a_response_into_a_sequence(tmp_path: Path) -> None:
    fixture = tmp_path / "fx.jsonl"
    add_response(fixture, A, {"content": "one"})
    assert add_response(fixture, A, {"content": "two"}) == Added(A, created=False, responses=2)
    assert add_response(fixture, A, {"content": "three"}).responses == 3
    assert load_fixture(fixture).responses_for(A) == [
        {"content": "one"},
        {"content": "two"},
        {"content": "three"},
    ]


def test_other_lines_blank_lines_and_line_endings_stay(tmp_path: Path) -> None:
    fixture = tmp_path / "fx.jsonl"
    b_line = b'{"request_hash": "' + B.encode() + b'", "schema_version": 1, "response": {}}'
    a_line = entry_line(A, response={"content": "one"})
    fixture.write_bytes(b_line + b"\n\n" + a_line + b"\r\n" + b"   \n")
    add_response(fixture, A, {"content": "two"})
    expected = entry_line(A, responses=[{"content": "one"}, {"content": "two"}])
    assert fixture.read_bytes() == b_line + b"\n\n" + expected + b"\r\n" + b"   \n"


def test_a_missing_final_newline_is_supplied(tmp_path: Path) -> None:
    fixture = tmp_path / "fx.jsonl"
    fixture.write_bytes(entry_line(B, response={}))
    add_response(fixture, A, {})
    assert fixture.read_bytes().splitlines() == [
        entry_line(B, response={}),
        entry_line(A, response={}),
    ]


def test_a_rejected_fixture_is_left_alone(tmp_path: Path) -> None:
    fixture = tmp_path / "fx.jsonl"
    fixture.write_bytes(b'{"schema_version": 1, "SECRET": 1}\n')
    with pytest.raises(FixtureError) as info:
        add_response(fixture, A, {})
    assert (info.value.reason, info.value.line) == ("unknown_key", 1)
    assert fixture.read_bytes() == b'{"schema_version": 1, "SECRET": 1}\n'


def test_a_result_the_loader_would_reject_is_not_written(tmp_path: Path) -> None:
    fixture = tmp_path / "fx.jsonl"
    ceilings = Ceilings(max_sequence_length=2)
    add_response(fixture, A, {"n": 1}, ceilings=ceilings)
    add_response(fixture, A, {"n": 2}, ceilings=ceilings)
    before = fixture.read_bytes()
    with pytest.raises(ReplayError) as info:
        add_response(fixture, A, {"n": 3}, ceilings=ceilings)
    assert str(info.value) == (
        f"{fixture}: not added: the fixture would be rejected: too_many_responses at line 1"
    )
    assert fixture.read_bytes() == before


def test_a_malformed_hash_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="64 lowercase hex"):
        add_response(tmp_path / "fx.jsonl", "sha256:ABC", {})
    assert not (tmp_path / "fx.jsonl").exists()


def test_a_missing_folder_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-folder" / "fx.jsonl"
    with pytest.raises(ReplayError) as info:
        add_response(missing, A, {})
    assert str(info.value) == f"{missing}: the folder {missing.parent} does not exist"


def test_a_pending_recording_journal_is_refused(tmp_path: Path) -> None:
    fixture = tmp_path / "fx.jsonl"
    add_response(fixture, A, {})
    Path(str(fixture) + ".journal").write_bytes(b"")
    with pytest.raises(ReplayError, match=r"left .*fx\.jsonl\.journal behind"):
        add_response(fixture, B, {})


def test_the_loser_gets_a_clear_error_and_nothing_changes(tmp_path: Path) -> None:
    fixture = tmp_path / "fx.jsonl"
    add_response(fixture, A, {})
    before = fixture.read_bytes()
    lock = take_lock(str(fixture) + ".lock")  # as a recorder holds it for its session
    try:
        with pytest.raises(ReplayError) as info:
            add_response(fixture, B, {})
    finally:
        os.close(lock)
    assert str(info.value) == (
        f"{fixture}: another writer holds the fixture's lock ({fixture}.lock): a recording "
        "session or another add; nothing was changed, try again when it has finished"
    )
    assert fixture.read_bytes() == before


_WRITER = """
import sys, time
from pathlib import Path
from replay_actor import ReplayError
from replay_actor.authoring.add import add_response
fixture, me, go = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
while not go.exists():
    time.sleep(0.001)
added = busy = 0
deadline = time.monotonic() + 30
while added < 20 and time.monotonic() < deadline:
    digest = "sha256:%064x" % (me * 1000 + added % 5)
    try:
        add_response(fixture, digest, {"writer": me, "i": added})
        added += 1
    except ReplayError as exc:  # the loser's error; it retries, as a person would
        assert "another writer holds the fixture's lock" in str(exc), exc
        busy += 1
        time.sleep(0.001)
print(added, busy)
"""

_READER = """
import sys, time
from pathlib import Path
from replay_actor import load_fixture
fixture, go, stop = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
while not go.exists():
    time.sleep(0.001)
reads = 0
while not stop.exists():
    load_fixture(fixture)  # raises (and fails the test) if a torn file is ever seen
    reads += 1
print(reads)
"""


def test_concurrent_writers_keep_the_file_valid_and_lose_nothing(
    tmp_path: Path, no_leaks: None
) -> None:
    fixture = tmp_path / "fx.jsonl"
    add_response(fixture, A, {"seed": True})
    go, stop = tmp_path / "go", tmp_path / "stop"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(fixture), str(n), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        for n in range(6)
    ]
    reader = subprocess.Popen(
        [sys.executable, "-c", _READER, str(fixture), str(go), str(stop)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        time.sleep(0.5)  # let every interpreter start, so they race for real
        go.touch()
        results = [writer.communicate(timeout=60) for writer in writers]
        stop.touch()
        reads, reader_err = reader.communicate(timeout=60)
    finally:
        for proc in [*writers, reader]:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for writer, (_out, err) in zip(writers, results, strict=True):
        assert writer.returncode == 0, err.decode()
    assert reader.returncode == 0, reader_err.decode()
    assert int(reads) > 0
    added = sum(int(out.split()[0]) for out, _ in results)
    busy = sum(int(out.split()[1]) for out, _ in results)
    assert added == 6 * 20
    assert busy > 0  # they did contend
    fixture_set = load_fixture(fixture)
    # every successful add is in the file, once; nothing else is
    assert fixture_set.responses - 1 == added
    for n in range(len(results)):
        mine = [
            response
            for i in range(5)
            for response in fixture_set.responses_for("sha256:%064x" % (n * 1000 + i)) or []
        ]
        assert [response["i"] for response in mine] == sorted(range(20), key=lambda i: (i % 5, i))
        assert all(response["writer"] == n for response in mine)


REQUEST: dict[str, Any] = {"messages": [{"role": "user", "content": "hi"}]}
HASH = request_hash(REQUEST)


# -- add on an entry whose hash is spelled with a JSON escape ------------------------


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.timeout(120)
def test_add_appends_to_an_entry_whose_hash_is_spelled_with_an_escape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fixture = tmp_path / "fx.jsonl"
    escaped = "sha256:" + f"\\u{ord(HASH[7]):04x}" + HASH[8:]
    other = request_hash({"messages": [{"role": "user", "content": "other"}]})
    fixture.write_bytes(
        entry_line(other, response={"content": "x"})
        + b"\n"
        + b'{"schema_version":1,"request_hash":"'
        + escaped.encode("ascii")
        + b'","response":{"content":"a"}}\n'
    )
    assert HASH in load_fixture(fixture)  # valid: the escape spells the same hash
    code, out, err = run(capsys, "add", str(fixture), HASH, "--content", "b", "--next")
    assert (code, err) == (0, "")
    assert out == f"appended to {HASH} in {fixture}: a sequence of 2 responses\n"
    lines = fixture.read_bytes().splitlines()
    assert lines[0] == entry_line(other, response={"content": "x"})  # untouched
    assert json.loads(lines[1])["responses"] == [{"content": "a"}, {"content": "b"}]
    assert len(load_fixture(fixture)) == 2


# -- add --request checks the sidecar before changing the fixture --------------------


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.timeout(120)
@pytest.mark.parametrize("planted", ["directory", "symlink"])
def test_add_request_refuses_an_unusable_sidecar_before_changing_the_fixture(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], planted: str
) -> None:
    fixture = tmp_path / "fx.jsonl"
    sidecar = Path(sidecar_path(fixture))
    if planted == "directory":
        sidecar.mkdir()
        problem = "cannot be opened (Is a directory)"
    else:
        (tmp_path / "elsewhere").write_bytes(b"")
        sidecar.symlink_to(tmp_path / "elsewhere")
        problem = "is a symbolic link (refused)"
    request = write_json(tmp_path / "r.json", REQUEST)
    for _ in range(2):  # a rerun must not turn the entry into a sequence either
        code, out, err = run(
            capsys, "add", str(fixture), HASH, "--content", "b", "--request", request
        )
        assert (code, out) == (1, "")
        assert err == f"replay-actor: error: the request sidecar {sidecar} {problem}\n"
        assert not fixture.exists()
    if planted == "symlink":
        assert (tmp_path / "elsewhere").read_bytes() == b""


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.timeout(120)
def test_add_request_still_creates_an_absent_sidecar(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fixture = tmp_path / "fx.jsonl"
    request = write_json(tmp_path / "r.json", REQUEST)
    code, out, _ = run(capsys, "add", str(fixture), HASH, "--content", "b", "--request", request)
    assert code == 0 and out.endswith(f"added the request to {sidecar_path(fixture)}\n")


# -- a symbolic link at FIXTURE.lock ----------------------------------------------


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.timeout(120)
def test_add_names_itself_when_the_lock_is_a_symbolic_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fixture = tmp_path / "fx.jsonl"
    lock = Path(f"{fixture}.lock")
    lock.symlink_to(tmp_path / "nowhere")
    code, out, err = run(capsys, "add", str(fixture), HASH, "--content", "b")
    assert (code, out) == (1, "")
    assert err == (
        "replay-actor: error: cannot lock the fixture to add to it: "
        f"{lock} (a symbolic link, refused)\n"
    )
    assert "recording" not in err
    assert not fixture.exists() and not (tmp_path / "nowhere").exists()


# -- a fixture that is a symbolic link ---------------------------------------------


def test_add_and_remove_through_a_symbolic_link_change_its_target(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    target = tmp_path / "data" / "baseline.jsonl"
    target.write_bytes(entry_line(B, response={"content": "kept"}) + b"\n")
    link = tmp_path / "fx.jsonl"
    link.symlink_to(Path("data") / "baseline.jsonl")  # relative, as a user makes one
    add_response(link, A, {"content": "added"})
    assert link.is_symlink() and os.readlink(link) == os.path.join("data", "baseline.jsonl")
    assert load_fixture(target).responses_for(A) == [{"content": "added"}]
    assert remove_entry(link, B) == 1
    assert link.is_symlink()
    assert load_fixture(target).responses_for(B) is None
    assert target.read_bytes() == entry_line(A, response={"content": "added"}) + b"\n"
    # No lock or temporary file is left beside either name.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "fx.jsonl"]
    assert [p.name for p in (tmp_path / "data").iterdir()] == ["baseline.jsonl"]


def test_add_through_a_link_takes_the_targets_lock(tmp_path: Path) -> None:
    target = tmp_path / "baseline.jsonl"
    target.write_bytes(b"")
    link = tmp_path / "fx.jsonl"
    link.symlink_to(target)
    # A recorder of the target holds the target's lock: add through the link must see it.
    lock = f"{target}.lock"
    fd = take_lock(lock, "to record")
    try:
        with pytest.raises(ReplayError, match="another writer holds the fixture's lock"):
            add_response(link, A, {"content": "x"})
    finally:
        release_lock(lock, fd)
    assert target.read_bytes() == b"" and link.is_symlink()
