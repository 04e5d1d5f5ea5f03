"""The recording journal: each recorded response is safe on disk before the fixture
is rewritten, and a crashed session's responses are recovered on the next open.

Runs in: the caller (the recorder).

``FIXTURE.journal`` starts with ``{"journal": 1, "base": <fixture_set_hash at session
start>}``; each recorded response appends ``{"request_hash", "response", "after": <the
new fixture_set_hash>}`` and is fsynced before the fixture is replaced. Recovery reads
the fixture on disk, finds where it stands in the journal — at ``base``, or at the last
line whose ``after`` is its hash — and returns only the lines after that point. So a
crash between the journal append and the fixture rewrite loses nothing, a crash after
the rewrite duplicates nothing, and a torn last line (a crash inside the append) is a
response that was never returned to the caller.
"""

from __future__ import annotations

import os
from typing import Final

import msgspec

from .._errors import RecordingError
from ..files.durable import fsync_dir, write_all

__all__ = ["Journal", "pending_records"]

_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW


class _Line(msgspec.Struct, forbid_unknown_fields=True):
    request_hash: str
    response: msgspec.Raw
    after: str


class _Header(msgspec.Struct, forbid_unknown_fields=True):
    journal: int
    base: str


def pending_records(path: str, current_set_hash: str) -> list[tuple[str, bytes]]:
    """The ``(request_hash, response)`` pairs in the journal at ``path`` that the fixture
    (whose set hash is ``current_set_hash``) does not hold yet, in order.

    Raises ``RecordingError`` saying what to do if the journal is corrupt or the fixture
    was changed outside the recorder since.
    """
    with open(path, "rb") as journal:
        data = journal.read()
    lines = data.split(b"\n")
    lines.pop()  # after the last newline: empty, or a torn line never acknowledged
    records: list[_Line] = []
    base = None
    for number, line in enumerate(lines, start=1):
        try:
            if number == 1:
                base = msgspec.json.decode(line, type=_Header).base
            else:
                records.append(msgspec.json.decode(line, type=_Line))
        except msgspec.DecodeError:
            problem = f"the recording journal {path} is corrupt at line {number}"
            break
    else:
        if base is None:
            return []
        start: int | None = 0 if current_set_hash == base else None
        for index in range(len(records) - 1, -1, -1):
            if start is None and records[index].after == current_set_hash:
                start = index + 1
        if start is not None:
            return [(r.request_hash, bytes(r.response)) for r in records[start:]]
        problem = (
            "the fixture was changed outside the recorder since its journal was "
            f"written; remove {path} to discard the unfolded responses"
        )
    raise RecordingError(problem)


class Journal:
    """The session's journal file, created on the first recorded response."""

    __slots__ = ("_fd", "_folder", "keep", "path")

    def __init__(self, path: str) -> None:
        self.path = path
        self._folder = os.path.dirname(path)
        self._fd = -1
        #: Set when the fixture could not be rewritten: the journal must then survive.
        self.keep = False

    def append(self, base: str, request_hash: str, response: bytes, after: str) -> None:
        """Append one record durably (``base``: the set hash the session started from)."""
        if self._fd < 0:
            fd = os.open(self.path, _FLAGS, 0o600)
            write_all(fd, msgspec.json.encode({"journal": 1, "base": base}) + b"\n")
            os.fsync(fd)
            fsync_dir(self._folder)
            self._fd = fd
        line = msgspec.json.encode(
            _Line(request_hash=request_hash, response=msgspec.Raw(response), after=after)
        )
        write_all(self._fd, line + b"\n")
        os.fsync(self._fd)

    def disown(self) -> None:
        """In a fork child: close this process's copy of the descriptor and leave the
        file alone (the parent still appends to it, and removes it)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def finish(self) -> None:
        """Close it; remove it unless ``keep`` (the fixture already holds every line)."""
        if self._fd < 0:
            return
        os.close(self._fd)
        self._fd = -1
        if not self.keep:
            os.unlink(self.path)
            fsync_dir(self._folder)
