"""Add a response to a fixture: a new entry, or one more element of an existing one.

Runs in: the caller (``replay-actor add``).

For a hash the fixture does not hold, one line is appended; for one it holds, that
entry's line is replaced in place by a ``responses`` sequence with the new response last
(a single ``response`` becomes a sequence of two). Every other line, blank lines and
line numbers included, stays as it was.

Safety, the recorder's: the fixture's ``.lock`` is taken without waiting (a recorder
holds it for its whole session, another ``add`` for a moment), so a concurrent writer
fails at once with a ``ReplayError`` saying so instead of losing an update; the new
bytes are validated whole with the loader before anything is written; and they replace
the file atomically (temp file, fsync, rename, fsync the folder), so a reader sees the
old or the new fixture, complete, at every moment. A fixture with a recording journal
(a recorder crashed) is refused: changing it would make that journal unrecoverable.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from .._errors import FixtureError, RecordingError, RecordingLocked, ReplayError
from ..files.durable import atomic_write, release_lock, take_lock
from ..fixture._ceilings import DEFAULT_CEILINGS, Ceilings
from ..fixture._format import entry_line
from ..fixture._parse import parse_fixture
from ..fixture._read import read_fixture_bytes

__all__ = ["Added", "add_response"]


@dataclass(frozen=True)
class Added:
    """What ``add_response`` did: ``responses`` is the entry's length afterwards."""

    request_hash: str
    created: bool  # a new entry (else appended to an existing one)
    responses: int


class _Hash(msgspec.Struct):
    request_hash: str


_decode_hash = msgspec.json.Decoder(_Hash).decode


def _line_of(data: bytes, request_hash: str) -> tuple[int, int]:
    """(start, end) of the line holding ``request_hash``'s entry, terminator excluded.

    First the lines that spell the hash as it is; then, for an entry that spells it with
    JSON escapes (``"sha256:\\u0031…"``, valid, the same hash), every line decoded.
    """
    needle = request_hash.encode("ascii")
    found = _find_line(data, request_hash, lambda line: needle in line)
    if found is None:
        found = _find_line(data, request_hash, lambda line: b"\\" in line)
    if found is None:  # pragma: no cover - the loader found the hash on some line
        raise ReplayError(f"the entry of {request_hash} could not be located")
    return found


def _find_line(
    data: bytes, request_hash: str, worth: Callable[[bytes], bool]
) -> tuple[int, int] | None:
    start = 0
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        line = data[start:end]
        if worth(line) and _decode_hash(line).request_hash == request_hash:
            return start, end - 1 if line.endswith(b"\r") else end
        start = end + 1
    return None


def add_response(
    fixture: str | os.PathLike[str],
    request_hash: str,
    response: dict[str, Any],
    *,
    ceilings: Ceilings | None = None,
) -> Added:
    """Add ``response`` for ``request_hash`` to ``fixture`` (created if absent).

    Raises ``ValueError`` for a malformed hash, ``FixtureError`` if the fixture is
    rejected as it is, ``ReplayError`` if the folder is missing, another writer holds the
    fixture, a recording journal is pending, or the result would be rejected (too many
    responses, a response too large: nothing is written then).
    """
    ceilings = DEFAULT_CEILINGS if ceilings is None else ceilings
    line = entry_line(request_hash, response=response)  # checks the hash and the response
    path = os.path.abspath(os.fspath(fixture))
    shown = os.fspath(fixture)
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        raise ReplayError(f"{shown}: the folder {os.path.dirname(shown) or '.'} does not exist")
    lock_path = path + ".lock"
    try:
        lock_fd = take_lock(lock_path, "to add to it")
    except RecordingLocked:
        busy = (
            f"{shown}: another writer holds the fixture's lock ({lock_path}): a recording "
            "session or another add; nothing was changed, try again when it has finished"
        )
    except RecordingError as exc:  # not held, but cannot be locked (a symbolic link...)
        raise ReplayError(str(exc)) from None
    else:
        try:
            return _add_locked(
                path=path,
                shown=shown,
                request_hash=request_hash,
                response=response,
                line=line,
                ceilings=ceilings,
            )
        finally:
            release_lock(lock_path, lock_fd)
    raise RecordingLocked(busy)


def _add_locked(
    *,
    path: str,
    shown: str,
    request_hash: str,
    response: dict[str, Any],
    line: bytes,
    ceilings: Ceilings,
) -> Added:
    if os.path.lexists(path + ".journal"):
        raise ReplayError(
            f"{shown}: a recording session left {shown}.journal behind; open the record "
            "manifest once to recover it (or delete the journal) before adding"
        )
    if os.path.lexists(path):
        data = read_fixture_bytes(path, ceilings.max_file_bytes)
        current = parse_fixture(data, ceilings)
    else:
        data = b""
        current = parse_fixture(data, ceilings)
    existing = current.responses_for(request_hash)
    if existing is None:
        separator = b"" if not data or data.endswith(b"\n") else b"\n"
        new = data + separator + line + b"\n"
        added = Added(request_hash, created=True, responses=1)
    else:
        start, end = _line_of(data, request_hash)
        sequence = entry_line(request_hash, responses=[*existing, response])
        new = data[:start] + sequence + data[end:]
        added = Added(request_hash, created=False, responses=len(existing) + 1)
    try:
        parse_fixture(new, ceilings)
    except FixtureError as exc:
        where = "" if exc.line is None else f" at line {exc.line}"
        problem = f"{shown}: not added: the fixture would be rejected: {exc.reason}{where}"
    else:
        atomic_write(path, new)
        return added
    raise ReplayError(problem)
