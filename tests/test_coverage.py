"""coverage: over runs' inspection records, unused entries, partly consumed sequences, misses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replay_actor import ReplayError, load_fixture
from replay_actor.authoring.coverage import coverage, coverage_text
from replay_actor.fixture._format import entry_line

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
