"""Change one entry of a fixture: add a response (a new entry, the next element of an
existing one, or a replacement), or remove the entry.

Runs in: the caller (``replay-actor add`` and ``remove``).

For a hash the fixture does not hold, one line is appended. For one it holds,
``on_existing`` decides: ``"next"`` replaces that entry's line in place by a
``responses`` sequence with the new response last (a single ``response`` becomes a
sequence of two), ``"replace"`` by a line holding the new response alone, ``"refuse"``
raises :class:`EntryExists` and changes nothing (the CLI's default: an author who adds
for a hash twice by mistake would otherwise get a sequence without noticing).
``remove_entry`` deletes the entry's line. Every other line, blank lines included, stays
as it was.

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
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import msgspec

from .._errors import FixtureError, RecordingError, RecordingLocked, ReplayError
from ..files.durable import atomic_write, release_lock, take_lock
from ..fixture import parse_fixture
from ..fixture._ceilings import DEFAULT_CEILINGS, Ceilings
from ..fixture._format import entry_line
from ..fixture._read import read_fixture_bytes

if TYPE_CHECKING:
    from ..fixture import FixtureSet

__all__ = ["Added", "EntryExists", "OnExisting", "add_response", "remove_entry"]

#: What ``add_response`` does for a hash the fixture already holds.
OnExisting = Literal["next", "replace", "refuse"]


class EntryExists(ReplayError):
    """``add_response(..., on_existing="refuse")`` for a hash the fixture holds;
    ``responses`` is how many that entry has."""

    def __init__(self, message: str, responses: int) -> None:
        super().__init__(message)
        self.responses = responses


@dataclass(frozen=True)
class Added:
    """What ``add_response`` did: ``responses`` is the entry's length afterwards."""

    request_hash: str
    created: bool  # a new entry (else appended to, or replaced, an existing one)
    responses: int
    replaced: bool = False


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
    on_existing: OnExisting = "next",
) -> Added:
    """Add ``response`` for ``request_hash`` to ``fixture`` (created if absent);
    ``on_existing`` as the module docstring says.

    Raises ``ValueError`` for a malformed hash, ``FixtureError`` if the fixture is
    rejected as it is, ``EntryExists`` (refused), ``ReplayError`` if the folder is
    missing, another writer holds the fixture, a recording journal is pending, or the
    result would be rejected (too many responses, a response too large: nothing is
    written then).
    """
    line = entry_line(request_hash, response=response)  # checks the hash and the response

    def change(data: bytes, current: FixtureSet, shown: str) -> tuple[bytes, Added]:
        return _added(
            data,
            current,
            shown,
            request_hash=request_hash,
            response=response,
            line=line,
            on_existing=on_existing,
        )

    return _edit(fixture, ceilings, "add", change)


def remove_entry(
    fixture: str | os.PathLike[str], request_hash: str, *, ceilings: Ceilings | None = None
) -> int:
    """Remove ``request_hash``'s entry from ``fixture``; how many responses it held.

    Raises ``ReplayError`` when the fixture does not exist or holds no such entry, and
    as ``add_response`` for a rejected, locked or journaled fixture.
    """

    def change(data: bytes, current: FixtureSet, shown: str) -> tuple[bytes, int]:
        existing = current.responses_for(request_hash)
        if existing is None:
            raise ReplayError(f"{shown} holds no entry for {request_hash}; nothing was removed")
        start, end = _line_of(data, request_hash)
        after = data.find(b"\n", end)
        return data[:start] + (b"" if after < 0 else data[after + 1 :]), len(existing)

    if not os.path.lexists(fixture):
        raise ReplayError(f"{os.fspath(fixture)}: the fixture does not exist")
    return _edit(fixture, ceilings, "remove", change)


_T = TypeVar("_T")


def _edit(
    fixture: str | os.PathLike[str],
    ceilings: Ceilings | None,
    verb: str,
    change: Callable[[bytes, FixtureSet, str], tuple[bytes, _T]],
) -> _T:
    """Under the fixture's lock: read it, ``change`` it, check the result, replace it
    (``verb``: "add" or "remove", for the messages)."""
    ceilings = DEFAULT_CEILINGS if ceilings is None else ceilings
    path = os.path.abspath(os.fspath(fixture))
    shown = os.fspath(fixture)
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        raise ReplayError(f"{shown}: the folder {os.path.dirname(shown) or '.'} does not exist")
    lock_path = path + ".lock"
    try:
        lock_fd = take_lock(lock_path, "to add to it" if verb == "add" else "to remove from it")
    except RecordingLocked:
        busy = (
            f"{shown}: another writer holds the fixture's lock ({lock_path}): a recording "
            "session or another add; nothing was changed, try again when it has finished"
        )
    except RecordingError as exc:  # not held, but cannot be locked (a symbolic link...)
        raise ReplayError(str(exc)) from None
    else:
        try:
            not_done = "not added" if verb == "add" else "not removed"
            return _edit_locked(path, shown, ceilings, change, not_done)
        finally:
            release_lock(lock_path, lock_fd)
    raise RecordingLocked(busy)


def _edit_locked(
    path: str,
    shown: str,
    ceilings: Ceilings,
    change: Callable[[bytes, FixtureSet, str], tuple[bytes, _T]],
    not_done: str,
) -> _T:
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
    new, result = change(data, current, shown)
    try:
        parse_fixture(new, ceilings)
    except FixtureError as exc:
        where = "" if exc.line is None else f" at line {exc.line}"
        problem = f"{shown}: {not_done}: the fixture would be rejected: {exc.reason}{where}"
    else:
        atomic_write(path, new)
        return result
    raise ReplayError(problem)


def _added(
    data: bytes,
    current: FixtureSet,
    shown: str,
    *,
    request_hash: str,
    response: dict[str, Any],
    line: bytes,
    on_existing: OnExisting,
) -> tuple[bytes, Added]:
    existing = current.responses_for(request_hash)
    if existing is None:
        separator = b"" if not data or data.endswith(b"\n") else b"\n"
        return data + separator + line + b"\n", Added(request_hash, created=True, responses=1)
    if on_existing == "refuse":
        held = "a single response" if len(existing) == 1 else f"{len(existing)} responses"
        raise EntryExists(
            f"{shown} already holds {request_hash} ({held}); nothing was changed: "
            "--next makes it a sequence with this response last, --replace replaces the "
            "entry, `replay-actor remove` deletes it",
            len(existing),
        )
    start, end = _line_of(data, request_hash)
    if on_existing == "replace":
        return data[:start] + line + data[end:], Added(
            request_hash, created=False, responses=1, replaced=True
        )
    sequence = entry_line(request_hash, responses=[*existing, response])
    added = Added(request_hash, created=False, responses=len(existing) + 1)
    return data[:start] + sequence + data[end:], added
