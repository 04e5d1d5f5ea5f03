"""The recording journal, ``FIXTURE.journal``: every recorded answer is appended to it and
made durable before its call returns; a compaction later folds it into the fixture.

Runs in: the caller (every recorder of one fixture, in any process, shares the file).

The file is JSON Lines (version 2)::

    {"journal":2,"fixture":"sha256:D","holds":N}       the header, an anchor
    {"n":N,"request_hash":"sha256:…","response":{…}}   one recorded answer, numbered
    {"fixture":"sha256:D","holds":N}                  an anchor a compaction wrote

An *anchor* says: the fixture file whose bytes have the SHA-256 digest D holds every
answer numbered N or less. Answers are numbered under the journal's lock, one after the
other, so their order is the order in which they arrived, whichever recorder wrote them.
Recovery reads the fixture on disk, finds the last anchor naming its digest and folds
the answers numbered above it (``pending``); no anchor naming it means the fixture was
changed outside the recorders, and the journal is refused (and kept).

**Appends** (``JournalFile``): a writer takes the journal's ``flock``, reads what others
appended since it last looked (so it knows every answer before checking its own against
the ceilings), writes its lines with one ``pwrite`` at the logical end, drops the lock
and makes them durable with ``fdatasync``. The file is *preallocated*
(``posix_fallocate``, a few MiB at a time) and its logical end is the first NUL byte, so
an append changes no file size and ``fdatasync`` flushes the data alone: on the disks
measured it took 0.1 ms where an append that grows the file took 2-4 ms, and every call
of a recording waits for it. A JSON line never holds a NUL byte. A writer that dies
inside its ``pwrite`` leaves a torn line (no newline) before the NULs: it was never
acknowledged, readers skip it, and the next writer overwrites it.

**A compaction** (``compaction.py``) replaces the journal by a new one, header first,
through ``os.replace`` while holding the old one's lock; a writer that then takes the old
file's lock sees that the path names another file (``_follow``), reads the old file to its
end and goes on in the new one, skipping the answers it has already seen (by number).

Version 1 journals (one recorder, an ``after`` set hash per line, written by earlier
versions) are still recovered: ``legacy_pending``.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import secrets
import time
from collections.abc import Iterable
from typing import Final, NamedTuple

import msgspec

from .._errors import RecordingError
from ..files.durable import fsync_dir, write_all

__all__ = [
    "LOCK_WAIT",
    "Anchor",
    "JournalContent",
    "JournalFile",
    "Record",
    "anchor_line",
    "changed_outside",
    "create_journal",
    "digest_of",
    "header_line",
    "is_legacy",
    "legacy_pending",
    "pending",
    "read_journal",
    "record_line",
    "replace_journal",
]

#: How much is preallocated at a time (and at least), past the logical end.
_CHUNK: Final = 4 << 20
#: A read of the journal's new lines takes this much at a time.
_READ: Final = 1 << 16
#: How long a writer waits for the journal's lock (held by another for one append, or
#: for the moment a compaction swaps the files) before it gives up.
LOCK_WAIT: Final = 30.0


class Anchor(NamedTuple):
    """The fixture file with the digest ``fixture`` holds every answer numbered
    ``holds`` or less."""

    fixture: str
    holds: int


class Record(NamedTuple):
    """One recorded answer: its number, its request hash, its canonical response."""

    n: int
    request_hash: str
    response: bytes


class _Line(msgspec.Struct, forbid_unknown_fields=True):
    journal: int | None = None
    fixture: str | None = None
    holds: int | None = None
    n: int | None = None
    request_hash: str | None = None
    # (a ``Raw`` cannot be in a union: an absent response is an empty one)
    response: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b""))


_decode_line: Final = msgspec.json.Decoder(_Line).decode


def digest_of(data: bytes | bytearray | memoryview) -> str:
    """The digest an anchor names for a fixture file's bytes."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def header_line(anchor: Anchor) -> bytes:
    return b'{"journal":2,"fixture":"%s","holds":%d}\n' % (anchor.fixture.encode(), anchor.holds)


def anchor_line(anchor: Anchor) -> bytes:
    return b'{"fixture":"%s","holds":%d}\n' % (anchor.fixture.encode(), anchor.holds)


def record_line(record: Record) -> bytes:
    return b'{"n":%d,"request_hash":"%s","response":%s}\n' % (
        record.n,
        record.request_hash.encode("ascii"),
        record.response,
    )


class JournalContent(NamedTuple):
    """A journal read from its start: every anchor (the header first) and record, in
    file order."""

    anchors: list[Anchor]
    records: list[Record]


class _Reader:
    """Turns a journal's bytes into anchors and records, line by line, from any offset;
    remembers where the last complete line ended and how long a torn line after it is."""

    __slots__ = ("anchors", "line", "path", "records", "torn")

    def __init__(self, path: str, line: int) -> None:
        self.path = path
        self.line = line  # the number of lines read so far
        self.anchors: list[Anchor] = []
        self.records: list[Record] = []
        self.torn = 0

    def feed(self, data: bytes) -> int:
        """Read the complete lines of ``data`` (which ends at the logical end); the
        bytes they take."""
        lines = data.split(b"\n")
        last = lines.pop()  # after the last newline: empty, or a torn line
        self.torn = len(last)
        for raw in lines:
            self.line += 1
            self._one(raw)
        return len(data) - len(last)

    def _one(self, raw: bytes) -> None:
        try:
            line = _decode_line(raw)
        except msgspec.DecodeError:
            line = None
        if line is not None:
            if self.line == 1:
                if line.journal == 2 and line.fixture and line.holds is not None:
                    self.anchors.append(Anchor(line.fixture, line.holds))
                    return
            elif line.n is not None and line.request_hash and line.response:
                if line.journal is None and line.fixture is None and line.holds is None:
                    self.records.append(Record(line.n, line.request_hash, bytes(line.response)))
                    return
            elif line.fixture and line.holds is not None and line.journal is None:
                self.anchors.append(Anchor(line.fixture, line.holds))
                return
        raise RecordingError(f"the recording journal {self.path} is corrupt at line {self.line}")


def _logical(fd: int, offset: int) -> bytes:
    """The bytes from ``offset`` to the journal's logical end (its first NUL byte, or the
    end of the file)."""
    pieces: list[bytes] = []
    while True:
        piece = os.pread(fd, _READ, offset)
        stop = piece.find(b"\0")
        if stop >= 0:
            pieces.append(piece[:stop])
            break
        pieces.append(piece)
        if len(piece) < _READ:
            break
        offset += len(piece)
    return b"".join(pieces)


def read_journal(fd: int, path: str) -> JournalContent:
    """The whole journal open at ``fd``: its anchors and records. Raises
    ``RecordingError`` for a corrupt line (a torn last line is not one)."""
    reader = _Reader(path, 0)
    reader.feed(_logical(fd, 0))
    if not reader.anchors or reader.line == 0:
        raise RecordingError(f"the recording journal {path} is corrupt at line 1")
    return JournalContent(reader.anchors, reader.records)


def pending(content: JournalContent, digest: str) -> list[Record] | None:
    """The records the fixture whose bytes have ``digest`` does not hold yet, in order;
    None if no anchor names it (the fixture was changed outside the recorders)."""
    holds = None
    for anchor in content.anchors:
        if anchor.fixture == digest:
            holds = anchor.holds
    if holds is None:
        return None
    return [record for record in content.records if record.n > holds]


def _new_file(path: str, content: bytes) -> str:
    """A temporary file beside ``path`` holding ``content`` then preallocated room,
    durable; its path."""
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, f".{name}.{secrets.token_hex(6)}.tmp")
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
    fd = os.open(tmp, flags, 0o600)
    try:
        write_all(fd, content)
        _allocate(fd, 0, len(content) + _CHUNK)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    return tmp


def _allocate(fd: int, offset: int, length: int) -> None:
    """Make room for ``length`` bytes from ``offset`` without writing them (reads give
    NULs); a file system without ``fallocate`` gets a sparse extension instead."""
    try:
        os.posix_fallocate(fd, offset, length)
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise
        if os.fstat(fd).st_size < offset + length:
            os.ftruncate(fd, offset + length)


def create_journal(path: str, anchor: Anchor) -> bool:
    """Create the journal with its header, whole, unless one exists; True if this call
    made it (``os.link`` of a complete file: no one ever sees it half written)."""
    tmp = _new_file(path, header_line(anchor))
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)
        fsync_dir(os.path.dirname(path))
    return True


def replace_journal(path: str, anchor: Anchor, records: Iterable[Record]) -> None:
    """Replace the journal by a new one: ``anchor`` as its header, then ``records``.
    The caller holds the old journal's lock."""
    body = b"".join([header_line(anchor), *map(record_line, records)])
    tmp = _new_file(path, body)
    try:
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    fsync_dir(os.path.dirname(path))


class JournalFile:
    """One recorder's handle on the shared journal: it follows the file through
    compactions, appends under the lock and reads what the others appended.

    ``seen`` is the number of the last record read or written through this handle;
    every record numbered above it that the file holds is returned by the next
    ``lock`` or ``read_new``, once.
    """

    __slots__ = ("_end", "_fd", "_line", "_size", "_torn", "anchors", "path", "seen")

    def __init__(self, path: str, seen: int = 0) -> None:
        self.path = path
        self.seen = seen
        self._fd = -1
        self._end = 0  # the logical end: after the last complete line read
        self._torn = 0  # bytes of a torn line after it
        self._line = 0  # lines read so far
        self._size = 0  # the file's size (preallocated room included)
        #: The anchors read so far from the file attached (its header first).
        self.anchors: list[Anchor] = []

    @property
    def attached(self) -> bool:
        return self._fd >= 0

    def attach(self) -> bool:
        """Open the journal at the path, if there is one (True), and read it whole."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise RecordingError(
                f"cannot open the recording journal {self.path} "
                f"({os.strerror(exc.errno) if exc.errno else type(exc).__name__})"
            ) from None
        self.detach()
        self._fd = fd
        self._end = self._torn = self._line = 0
        self._size = os.fstat(fd).st_size
        self.anchors = []
        return True

    def detach(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    # -- the lock -------------------------------------------------------------------

    def lock(self) -> list[Record]:
        """Take the journal's lock, on the file the path names now, and return the
        records appended since this handle last read, in order (with anchors skipped).
        Raises ``RecordingError`` if the lock stays held for ``LOCK_WAIT`` seconds or
        the journal is corrupt; the journal must exist (``attach``)."""
        fresh: list[Record] = []
        while True:
            _flock(self._fd, self.path)
            if self._current():
                fresh += self.read_new()
                return fresh
            # A compaction replaced the file while we waited: what the old one holds
            # past our position was written before the swap; then on to the new one.
            fresh += self.read_new()
            self.detach()
            if not self.attach():
                raise RecordingError(
                    f"the recording journal {self.path} was removed while recording"
                )

    def lock_here(self) -> bool:
        """Take the lock of the file attached; False (and not locked) if the path names
        another file by then (a compaction replaced it)."""
        _flock(self._fd, self.path)
        if self._current():
            return True
        self.unlock()
        return False

    def unlock(self) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _current(self) -> bool:
        try:
            on_disk = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            return False
        mine = os.fstat(self._fd)
        return (on_disk.st_ino, on_disk.st_dev) == (mine.st_ino, mine.st_dev)

    # -- reading and appending --------------------------------------------------------

    def read_new(self) -> list[Record]:
        """The records past this handle's position (numbered above ``seen``), in order."""
        reader = _Reader(self.path, self._line)
        self._end += reader.feed(_logical(self._fd, self._end))
        self._torn = reader.torn
        self._line = reader.line
        self.anchors += reader.anchors
        fresh = [record for record in reader.records if record.n > self.seen]
        if fresh:
            self.seen = fresh[-1].n
        return fresh

    def append(self, lines: bytes) -> None:
        """Write ``lines`` at the logical end (under the lock, after ``lock`` read the
        file to that end), over any torn line; ``sync`` makes them durable."""
        data = lines + b"\0" * max(0, self._torn - len(lines))
        end = self._end + len(data)
        if end > self._size:
            _allocate(self._fd, self._size, max(_CHUNK, end - self._size))
            self._size = os.fstat(self._fd).st_size
        written = os.pwrite(self._fd, data, self._end)
        while written < len(data):
            written += os.pwrite(self._fd, data[written:], self._end + written)
        self._end += len(lines)
        self._torn = 0
        self._line += lines.count(b"\n")

    def sync(self) -> None:
        """Make what this handle wrote durable (the data; no size changed)."""
        os.fdatasync(self._fd)

    @property
    def size(self) -> int:
        """The journal's logical size: the bytes of its complete lines."""
        return self._end


def _flock(fd: int, path: str) -> None:
    """``flock`` the journal, waiting at most ``LOCK_WAIT`` seconds (another writer
    holds it for one append, a compaction for the moment of its swap): a stopped
    process holding it must not stop every other recorder for ever."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    deadline = time.monotonic() + LOCK_WAIT
    pause = 0.0002
    while True:
        time.sleep(pause)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise RecordingError(
                    f"the recording journal {path} stayed locked by another recorder for "
                    f"{LOCK_WAIT:.0f} s; is a stopped process holding it?"
                ) from None
            pause = min(pause * 2, 0.005)


# -- version 1 ---------------------------------------------------------------------------


class _LegacyLine(msgspec.Struct, forbid_unknown_fields=True):
    request_hash: str
    response: msgspec.Raw
    after: str


class _LegacyHeader(msgspec.Struct, forbid_unknown_fields=True):
    journal: int
    base: str


def is_legacy(first_line: bytes) -> bool:
    """True if a journal's first line is a version 1 header."""
    try:
        return msgspec.json.decode(first_line, type=_LegacyHeader).journal == 1
    except msgspec.DecodeError:
        return False


def legacy_pending(path: str, current_set_hash: str) -> list[tuple[str, bytes]]:
    """The ``(request_hash, response)`` pairs of a version 1 journal that the fixture
    (whose set hash is ``current_set_hash``) does not hold yet, in order: it is at the
    ``base``, or at the last line whose ``after`` is its set hash.

    Raises ``RecordingError`` saying what to do if the journal is corrupt or the fixture
    was changed outside the recorder since.
    """
    with open(path, "rb") as journal:
        data = journal.read()
    lines = data.split(b"\n")
    lines.pop()  # after the last newline: empty, or a torn line never acknowledged
    records: list[_LegacyLine] = []
    base = None
    for number, line in enumerate(lines, start=1):
        try:
            if number == 1:
                base = msgspec.json.decode(line, type=_LegacyHeader).base
            else:
                records.append(msgspec.json.decode(line, type=_LegacyLine))
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
        problem = _changed_outside(path)
    raise RecordingError(problem)


def _changed_outside(path: str) -> str:
    return (
        "the fixture was changed outside the recorder since its journal was "
        f"written; remove {path} to discard the unfolded responses"
    )


def changed_outside(path: str) -> RecordingError:
    """The error for a journal no anchor of which names the fixture on disk."""
    return RecordingError(_changed_outside(path))
