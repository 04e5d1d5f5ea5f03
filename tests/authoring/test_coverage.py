"""coverage: over runs' inspection records, unused entries, partly consumed sequences, misses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from replay_actor import ReplayError, load_fixture, request_hash
from replay_actor.authoring.coverage import coverage, coverage_text
from replay_actor.fixture._format import entry_line
from tests.support.cli import run
from tests.support.paths import ROOT as REPO

pytestmark = pytest.mark.timeout(60)


def h(n: int) -> str:
    return f"sha256:{n:064x}"


SINGLE, SEQ3, SEQ2, DEAD = h(1), h(2), h(3), h(4)
MISS_A, MISS_B = h(100), h(101)


@pytest.fixture
def fixture(tmp_path: Path) -> Path:
    path = tmp_path / "fx.jsonl"
    path.write_bytes(
        entry_line(SINGLE, response={}) + b"\n"
        + entry_line(SEQ3, responses=[{"n": 1}, {"n": 2}, {"n": 3}]) + b"\n"
        + entry_line(SEQ2, responses=[{"n": 1}, {"n": 2}]) + b"\n"
        + entry_line(DEAD, response={}) + b"\n"
    )  # fmt: skip
    return path


def write_record(path: Path, events: list[tuple[str, str]]) -> Path:
    lines = [
        json.dumps({"event": event, "request_hash": digest, "call": call})
        for call, (event, digest) in enumerate(events, start=1)
    ]
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_three_runs(fixture: Path, tmp_path: Path) -> None:
    runs = [
        # run 1: the single entry twice, one element of SEQ3, a miss
        [("served", SINGLE), ("served", SINGLE), ("served", SEQ3), ("miss", MISS_A)],
        # run 2: two elements of SEQ3, SEQ2 consumed and then exhausted, two misses
        [
            ("served", SEQ3),
            ("served", SEQ3),
            ("served", SEQ2),
            ("served", SEQ2),
            ("exhausted", SEQ2),
            ("miss", MISS_A),
            ("miss", MISS_B),
        ],
        # run 3: nothing but the single entry
        [("served", SINGLE)],
    ]
    records = [write_record(tmp_path / f"run{i}.jsonl", run) for i, run in enumerate(runs)]
    report = coverage(load_fixture(fixture), records)
    assert report.as_json() == {
        "entries": 4,
        "unused": [DEAD],
        "partly_consumed": [{"request_hash": SEQ3, "served": 2, "length": 3}],
        "misses": [{"request_hash": MISS_A, "count": 2}, {"request_hash": MISS_B, "count": 1}],
        "exhausted": [{"request_hash": SEQ2, "count": 1}],
    }
    assert report.served_events == 8
    assert coverage_text("fx.jsonl", report).splitlines() == [
        "fx.jsonl: 4 entries, 3 inspection records",
        "unused entries: 1",
        f"  {DEAD}",
        "sequences not fully consumed: 1",
        f"  {SEQ3}  served 2 of 3",
        "misses: 2 requests, 3 calls",
        f"  {MISS_A}  2 calls",
        f"  {MISS_B}  1 call",
        "exhausted sequences: 1 request, 1 call past the end",
        f"  {SEQ2}  1 call",
    ]


def test_an_exhaustion_alone_counts_as_fully_consumed(fixture: Path, tmp_path: Path) -> None:
    record = write_record(tmp_path / "run.jsonl", [("exhausted", SEQ3)])
    report = coverage(load_fixture(fixture), [record])
    assert SEQ3 not in report.unused
    assert report.partly_consumed == []


def test_records_without_served_events_say_so(fixture: Path, tmp_path: Path) -> None:
    record = write_record(tmp_path / "run.jsonl", [("miss", MISS_A)])
    report = coverage(load_fixture(fixture), [record])
    assert report.served_events == 0
    assert report.unused == sorted([SINGLE, SEQ3, SEQ2, DEAD])


def test_torn_last_lines_and_unknown_events_are_skipped(fixture: Path, tmp_path: Path) -> None:
    record = tmp_path / "run.jsonl"
    lines: list[dict[str, Any]] = [
        {"event": "served", "request_hash": SINGLE, "call": 1},
        {"event": "nearest", "request_hash": MISS_A, "nearest": {"request_hash": SINGLE}},
    ]
    record.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"event": "ser')
    report = coverage(load_fixture(fixture), [record])
    assert SINGLE not in report.unused and report.misses == []


def test_a_corrupt_or_missing_record_is_named(fixture: Path, tmp_path: Path) -> None:
    record = tmp_path / "run.jsonl"
    record.write_text('{"event": "served", "request_hash": "x"}\nSECRET-7\n')
    with pytest.raises(ReplayError) as info:
        coverage(load_fixture(fixture), [record])
    assert str(info.value) == f"{record}: line 2 is not an inspection record line"
    with pytest.raises(ReplayError, match=r"missing\.jsonl: cannot read the inspection record"):
        coverage(load_fixture(fixture), [tmp_path / "missing.jsonl"])


REQUEST: dict[str, Any] = {"messages": [{"role": "user", "content": "hi"}]}
HASH = request_hash(REQUEST)


# -- coverage on a FIFO -----------------------------------------------------------------


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.timeout(120)
def test_coverage_refuses_a_fifo_instead_of_blocking(tmp_path: Path) -> None:
    fixture = tmp_path / "fx.jsonl"
    fixture.write_bytes(entry_line(HASH, response={"content": "hi"}) + b"\n")
    fifo = tmp_path / "record.fifo"
    os.mkfifo(fifo)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "replay_actor", "coverage", str(fixture), str(fifo)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:  # blocked on the FIFO: the defect
            proc.kill()
            proc.wait()
    assert proc.returncode == 1 and out == b""
    assert err.decode() == (
        f"replay-actor: error: {fifo}: cannot read the inspection record (not a regular file)\n"
    )


# -- coverage prints only well-formed hashes -------------------------------------------


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.timeout(120)
def test_coverage_skips_and_counts_forged_hash_fields(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fixture = tmp_path / "fx.jsonl"
    fixture.write_bytes(entry_line(HASH, response={"content": "hi"}) + b"\n")
    good = "sha256:" + "a" * 64
    forged = [
        "sha256:\x1b[31m" + "a" * 60,  # a terminal escape
        "sha256:" + "a" * 63 + "\x07",  # a bell
        f"sha256:{'b' * 64}\n{good}  1 call",  # a newline forging an output line
        "sha256:" + "A" * 64,  # upper case
    ]
    record = tmp_path / "record.jsonl"
    lines = [{"event": "miss", "request_hash": digest, "call": 1} for digest in forged]
    lines.append({"event": "miss", "request_hash": good, "call": 1})
    record.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    code, out, err = run(capsys, "coverage", str(fixture), str(record))
    assert code == 0
    assert "\x1b" not in out and "\x07" not in out
    assert out.splitlines()[-3:-1] == ["misses: 1 request, 1 call", f"  {good}  1 call"]
    assert (
        "replay-actor: note: skipped 4 record lines whose request_hash is not 'sha256:' and "
        "64 lowercase hexadecimal digits\n"
    ) in err
    code, out, _ = run(capsys, "coverage", "--json", str(fixture), str(record))
    assert json.loads(out)["misses"] == [{"request_hash": good, "count": 1}]
