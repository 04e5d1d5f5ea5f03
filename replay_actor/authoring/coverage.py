"""What runs used of a fixture, from their inspection records.

Runs in: the caller (``replay-actor coverage``).

An inspection record holds the events of one or more acquisitions: ``miss``,
``exhausted`` and — when the run asked for them with ``inspection_served=True`` — one
``served`` line per hit, each with ``call``, the call's 1-based index within its
acquisition. Acquisitions that appended to the same file one after another are told
apart by ``call`` starting again (a line whose ``call`` is not above the previous one
starts a new acquisition); acquisitions that wrote to one file at the same time cannot be
told apart, so give concurrent runs a record each. Over all those acquisitions:

- ``unused``: entries that no record shows served (or exhausted);
- ``partly_consumed``: sequences whose most-consumed acquisition still left elements
  unserved (``served`` is that acquisition's count, ``length`` the sequence's);
- ``misses``: each missed hash with its count, summed over the records;
- ``exhausted``: each hash whose sequence ran out, with how many calls found it so,
  summed over the records (a run that asked once too often is a failure too).

Without ``served`` lines a record cannot tell a used entry from an unused one, so every
entry looks unused: ``CoverageReport.served_events`` says whether any record had them.
A torn last line (a run killed mid-write) is ignored; lines of events this version does
not know (such as ``nearest``) are skipped. A line whose ``request_hash`` is not
``sha256:`` and 64 lowercase hexadecimal digits is skipped and counted
(``CoverageReport.skipped_lines``): the report prints hashes, and a forged field must not
put terminal escapes, bells or line breaks into it.

A record must be a regular file: it is opened without blocking and checked, so a FIFO (or
a device) named by mistake is refused at once instead of hanging the command.
"""

from __future__ import annotations

import dataclasses
import os
import re
import stat
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from .._errors import ReplayError
from ..fixture import FixtureSet

__all__ = [
    "CoverageReport",
    "coverage",
    "coverage_text",
]


class _Event(msgspec.Struct):
    event: str
    request_hash: str
    call: int = 0  # absent from lines that are not about a call (``nearest``)


_decode_event = msgspec.json.Decoder(_Event).decode
_HASH: Final = re.compile(r"sha256:[0-9a-f]{64}\Z")


@dataclass(frozen=True)
class CoverageReport:
    entries: int
    unused: list[str]
    partly_consumed: list[dict[str, Any]]
    misses: list[dict[str, Any]]
    records: int
    served_events: int
    skipped_lines: int = 0  # lines whose request_hash is malformed
    exhausted: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """``coverage --json``'s document."""
        return {
            "entries": self.entries,
            "unused": self.unused,
            "partly_consumed": self.partly_consumed,
            "misses": self.misses,
            "exhausted": self.exhausted,
        }


def _read_record(path: str | os.PathLike[str]) -> bytes:
    """A record's bytes: opened without blocking, and only if it is a regular file."""
    shown = os.fspath(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        problem = exc.strerror or type(exc).__name__
    else:
        with open(fd, "rb", closefd=True) as handle:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                problem = "not a regular file"
            else:
                try:
                    return handle.read()
                except OSError as exc:
                    problem = exc.strerror or type(exc).__name__
    raise ReplayError(f"{shown}: cannot read the inspection record ({problem})")


def _events(path: str | os.PathLike[str]) -> tuple[list[_Event], int]:
    """The record's events with a well-formed hash, and how many lines were skipped for
    a malformed one."""
    lines = _read_record(path).split(b"\n")
    lines.pop()  # after the last newline: empty, or a torn line
    events: list[_Event] = []
    skipped = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            event = _decode_event(line)
        except msgspec.DecodeError:
            problem = f"{os.fspath(path)}: line {number} is not an inspection record line"
            break
        if _HASH.match(event.request_hash):
            events.append(event)
        else:
            skipped += 1
    else:
        return events, skipped
    raise ReplayError(problem)


def _fold(most_served: Counter[str], served: Counter[str]) -> None:
    for digest, count in served.items():
        most_served[digest] = max(most_served[digest], count)


def coverage(fixture: FixtureSet, records: Sequence[str | os.PathLike[str]]) -> CoverageReport:
    """Coverage of ``fixture`` over the runs whose inspection ``records`` are given."""
    most_served: Counter[str] = Counter()
    misses: Counter[str] = Counter()
    exhausted: Counter[str] = Counter()
    served_events = 0
    skipped = 0
    for record in records:
        served: Counter[str] = Counter()
        last_call = 0
        events, skipped_here = _events(record)
        skipped += skipped_here
        for event in events:
            if event.call:
                if event.call <= last_call:  # the next acquisition's first call
                    _fold(most_served, served)
                    served = Counter()
                last_call = event.call
            if event.event == "served":
                served[event.request_hash] += 1
                served_events += 1
            elif event.event == "exhausted":
                exhausted[event.request_hash] += 1
                stored = fixture.stored(event.request_hash)
                length = len(stored) if isinstance(stored, tuple) else 1
                served[event.request_hash] = max(served[event.request_hash], length)
            elif event.event == "miss":
                misses[event.request_hash] += 1
        _fold(most_served, served)
    hashes = fixture.request_hashes()
    unused = sorted(digest for digest in hashes if most_served[digest] == 0)
    partly = []
    for digest in sorted(hashes):
        stored = fixture.stored(digest)
        if isinstance(stored, tuple) and 0 < most_served[digest] < len(stored):
            partly.append(
                {"request_hash": digest, "served": most_served[digest], "length": len(stored)}
            )
    return CoverageReport(
        entries=len(fixture),
        unused=unused,
        partly_consumed=partly,
        misses=[{"request_hash": h, "count": n} for h, n in sorted(misses.items())],
        records=len(records),
        served_events=served_events,
        skipped_lines=skipped,
        exhausted=[{"request_hash": h, "count": n} for h, n in sorted(exhausted.items())],
    )


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def coverage_text(fixture: str, report: CoverageReport) -> str:
    """``coverage``'s human-readable report."""
    runs = _plural(report.records, "inspection record")
    entries = "1 entry" if report.entries == 1 else f"{report.entries} entries"
    lines = [f"{fixture}: {entries}, {runs}"]
    lines.append(f"unused entries: {len(report.unused)}")
    lines.extend(f"  {digest}" for digest in report.unused)
    lines.append(f"sequences not fully consumed: {len(report.partly_consumed)}")
    lines.extend(
        f"  {item['request_hash']}  served {item['served']} of {item['length']}"
        for item in report.partly_consumed
    )
    total = sum(item["count"] for item in report.misses)
    lines.append(f"misses: {_plural(len(report.misses), 'request')}, {_plural(total, 'call')}")
    lines.extend(
        f"  {item['request_hash']}  {_plural(item['count'], 'call')}" for item in report.misses
    )
    total = sum(item["count"] for item in report.exhausted)
    lines.append(
        f"exhausted sequences: {_plural(len(report.exhausted), 'request')}, "
        f"{_plural(total, 'call')} past the end"
    )
    lines.extend(
        f"  {item['request_hash']}  {_plural(item['count'], 'call')}" for item in report.exhausted
    )
    return "\n".join(lines) + "\n"
