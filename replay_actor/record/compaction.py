"""Compaction: the journal's records folded into the fixture, which is replaced whole
(atomically), and the journal started again from the new fixture.

Runs in: the caller (any recorder of the fixture: at its release when it is the last
one, at ``compact()``, when the journal has grown past its bound, and at an open that
finds a crashed session's journal).

A compaction is a function of the two files, never of one recorder's memory, so any
recorder can run it, and it runs in two phases so that recording goes on meanwhile:

1. *Without the journal's lock*: read the journal and the fixture, find the anchor that
   names the fixture's digest (``journal.pending``), and write the new fixture to a
   temporary file beside it: the old file's lines as they are (each entry that gains
   responses is taken out and written again in the kept layout, its old responses
   first), then the new entries, in the order their first answer arrived; fsync.
2. *Under the journal's lock*, after checking that neither file was replaced meanwhile
   (else another recorder compacted first, and this one's work is dropped): append an
   anchor naming the new fixture's digest and the last record it holds, fdatasync,
   ``os.replace`` the fixture, fsync the folder, and replace the journal by one that
   starts with that anchor and holds the records that arrived during phase 1.

A crash anywhere leaves a pair the next open reads correctly: before the anchor, the old
fixture and the old journal; between the anchor and the journal's replacement, the new
fixture (named by the new anchor) or the old one (named by an older anchor); after it,
the new pair. A fixture that matches no anchor was changed by hand, and the journal is
kept and refused (``journal.changed_outside``).

The new file is checked as the loader would check it, at a cost that does not depend on
the old lines: the new lines are validated by the loader, and the entry count and file
size against the ceilings. When the old file is the one this recorder last read or
wrote (``FileFacts``) and no entry of it gains a response, it is copied by the kernel
(``copy_file_range``) and its digest is taken from the hash state kept for it, so a
compaction costs about one copy of the file.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import stat
from collections.abc import Callable, Iterable
from typing import Any, Final, NamedTuple

import msgspec

from .._errors import FixtureError, RecordingError
from ..files.durable import fsync_dir, write_all
from ..fixture import Ceilings, parse_fixture, read_fixture_bytes, sequence_line, single_line
from ..fixture._format import HEAD
from .journal import (
    Anchor,
    JournalContent,
    JournalFile,
    Record,
    anchor_line,
    changed_outside,
    legacy_pending,
    pending,
    replace_journal,
)

__all__ = ["FileFacts", "compact", "facts_of", "fold_legacy", "identity"]

#: The old file is copied, and scanned, this much at a time.
_PIECE: Final = 1 << 20


def identity(st: os.stat_result) -> tuple[int, int, int, int]:
    """What tells one fixture file from another: a replacement is a new inode, an edit
    in place changes the size or the modification time."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class FileFacts(NamedTuple):
    """What a recorder knows of a fixture file it read or wrote, so that the next
    compaction need not read it again: its identity, the SHA-256 state of its bytes
    (not finalised), which hashes it holds, its entries and size, and whether it ends
    with a newline."""

    identity: tuple[int, int, int, int]
    hasher: Any
    holds: Callable[[str], bool]
    entries: int
    size: int
    ends_with_newline: bool

    @property
    def digest(self) -> str:
        hexdigest: str = self.hasher.copy().hexdigest()
        return "sha256:" + hexdigest


def facts_of(
    data: bytes, st: os.stat_result, holds: Callable[[str], bool], entries: int
) -> FileFacts:
    """The facts of a fixture file whose bytes are ``data`` (as just read)."""
    return FileFacts(
        identity(st),
        hashlib.sha256(data),
        holds,
        entries,
        len(data),
        not data or data.endswith(b"\n"),
    )


def compact(
    fixture: str, journal_path: str, ceilings: Ceilings, facts: FileFacts | None
) -> FileFacts | None:
    """Fold the journal into the fixture (the module's two phases). Returns the facts
    of the fixture as it is after (None when unknown: another recorder compacted first,
    or this one left it unchanged without knowing it). Raises ``RecordingError`` when
    the journal cannot be folded (corrupt, a fixture changed by hand, a ceiling)."""
    journal = JournalFile(journal_path)
    if not journal.attach():
        return facts
    temporary: str | None = None
    try:
        records = journal.read_new()  # without the lock: a line being written is skipped
        st = os.stat(fixture)
        if facts is None or facts.identity != identity(st):
            facts = None
        digest = facts.digest if facts is not None else _digest_of_file(fixture, ceilings)
        todo = pending(JournalContent(journal.anchors, records), digest)
        if todo is None:
            raise changed_outside(journal_path)
        top = max([anchor.holds for anchor in journal.anchors] + [r.n for r in records])
        if not todo and len(journal.anchors) == 1 and not records:
            return facts  # a journal of its header alone: nothing to fold
        after = facts
        if todo:
            temporary, after = _write_fixture(fixture, todo, ceilings, facts)
        anchor = Anchor(digest if after is None else after.digest, top)
        journal.seen = top
        if not journal.lock_here():
            return None  # another recorder replaced the journal: it compacted first
        try:
            if identity(os.stat(fixture)) != identity(st):
                return None
            tail = journal.read_new()
            if temporary is not None:
                journal.append(anchor_line(anchor))
                journal.sync()
                os.replace(temporary, fixture)
                temporary = None
                fsync_dir(os.path.dirname(fixture))
            replace_journal(journal_path, anchor, tail)
        finally:
            journal.unlock()
        return after
    finally:
        journal.detach()
        if temporary is not None:
            os.unlink(temporary)


def fold_legacy(fixture: str, journal_path: str, ceilings: Ceilings) -> None:
    """Fold a version 1 journal (earlier versions', located by set hashes) into the
    fixture; the caller is alone with it and removes the journal after."""
    try:
        data = read_fixture_bytes(fixture, ceilings.max_file_bytes)
        set_hash = parse_fixture(data, ceilings).fixture_set_hash
    except FixtureError as exc:
        raise RecordingError(f"the fixture cannot be compacted ({exc.reason})") from None
    del data
    pairs = legacy_pending(journal_path, set_hash)
    if not pairs:
        return
    records = [Record(n, h, response) for n, (h, response) in enumerate(pairs, start=1)]
    temporary, _ = _write_fixture(fixture, records, ceilings, None)
    try:
        os.replace(temporary, fixture)
    except BaseException:
        os.unlink(temporary)
        raise
    fsync_dir(os.path.dirname(fixture))


def _digest_of_file(fixture: str, ceilings: Ceilings) -> str:
    try:
        data = read_fixture_bytes(fixture, ceilings.max_file_bytes)
    except FixtureError as exc:
        raise RecordingError(f"the fixture cannot be compacted ({exc.reason})") from None
    return "sha256:" + hashlib.sha256(data).hexdigest()


class _HashOnly(msgspec.Struct):
    request_hash: str


_decode_hash: Final = msgspec.json.Decoder(_HashOnly).decode


def _hash_of(line: bytes) -> str:
    """The request hash of a valid fixture line (in any layout)."""
    if line.startswith(HEAD):
        return line[len(HEAD) : len(HEAD) + 71].decode("ascii")
    return _decode_hash(line).request_hash


def _grouped(todo: Iterable[Record]) -> dict[str, list[bytes]]:
    """The records' responses by hash, hashes in the order their first answer came."""
    groups: dict[str, list[bytes]] = {}
    for record in todo:
        groups.setdefault(record.request_hash, []).append(record.response)
    return groups


class _Writer:
    """The temporary file being written, with the digest of what went into it."""

    def __init__(self, fixture: str, hasher: Any) -> None:
        folder, name = os.path.split(fixture)
        self.path = os.path.join(folder, f".{name}.{secrets.token_hex(6)}.tmp")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
        self.fd = os.open(self.path, flags, 0o600)
        self.hasher = hasher
        self.size = 0

    def write(self, data: bytes) -> None:
        write_all(self.fd, data)
        self.hasher.update(data)
        self.size += len(data)


def _write_fixture(
    fixture: str, todo: list[Record], ceilings: Ceilings, facts: FileFacts | None
) -> tuple[str, FileFacts]:
    """The new fixture in a temporary file (durable), and its facts."""
    groups = _grouped(todo)
    old_holds = facts.holds if facts is not None else None
    fast = old_holds is not None and not any(map(old_holds, groups))
    writer = _Writer(
        fixture, facts.hasher.copy() if facts is not None and fast else hashlib.sha256()
    )
    try:
        if fast:
            assert facts is not None
            entries = facts.entries
            _copy_whole(fixture, facts, writer)
            held: dict[str, tuple[bytes, ...]] = {}
            in_file: set[str] = set()
        else:
            entries, held, in_file = _copy_lines(fixture, groups, ceilings, writer)
        new_lines = b"".join(
            _new_line(h, held.get(h, ()), responses) for h, responses in groups.items()
        )
        try:
            parse_fixture(new_lines, ceilings)
        except FixtureError as exc:
            raise _cannot_fold(exc.reason) from None
        entries += len(groups)
        if entries > ceilings.max_entries:
            raise _cannot_fold("too_many_entries")
        writer.write(new_lines)
        if writer.size > ceilings.max_file_bytes:
            raise _cannot_fold("file_too_large")
        mode = stat.S_IMODE(os.stat(fixture).st_mode)
        os.fchmod(writer.fd, mode)
        os.fsync(writer.fd)
        st = os.fstat(writer.fd)
    except BaseException:
        os.close(writer.fd)
        os.unlink(writer.path)
        raise
    os.close(writer.fd)
    added = frozenset(groups)
    if old_holds is not None and fast:
        before = old_holds

        def holds(request_hash: str) -> bool:
            return request_hash in added or before(request_hash)

    else:
        everything = in_file | added

        def holds(request_hash: str) -> bool:
            return request_hash in everything

    return writer.path, FileFacts(identity(st), writer.hasher, holds, entries, writer.size, True)


def _cannot_fold(reason: str) -> RecordingError:
    return RecordingError(f"the recording journal cannot be folded into the fixture ({reason})")


def _new_line(request_hash: str, held: tuple[bytes, ...], responses: list[bytes]) -> bytes:
    items = [*held, *responses]
    if len(items) == 1:
        return single_line(request_hash, items[0]) + b"\n"
    return sequence_line(request_hash, items) + b"\n"


def _copy_whole(fixture: str, facts: FileFacts, writer: _Writer) -> None:
    """The old file, byte for byte, by the kernel; a newline after a last line that
    had none."""
    fd = os.open(fixture, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if identity(os.fstat(fd)) != facts.identity:
            raise RecordingError("the fixture was replaced during its compaction")
        left = facts.size
        while left > 0:
            copied = os.copy_file_range(fd, writer.fd, left)
            if copied == 0:
                raise RecordingError("the fixture shrank during its compaction")
            left -= copied
        writer.size = facts.size
    finally:
        os.close(fd)
    if not facts.ends_with_newline:
        writer.write(b"\n")


def _copy_lines(
    fixture: str, groups: dict[str, list[bytes]], ceilings: Ceilings, writer: _Writer
) -> tuple[int, dict[str, tuple[bytes, ...]], set[str]]:
    """The old file line by line, without the lines of entries that gain responses;
    returns the entry count of what was copied, those entries' old responses, and every
    hash the old file held."""
    try:
        data = read_fixture_bytes(fixture, ceilings.max_file_bytes)
    except FixtureError as exc:
        raise RecordingError(f"the fixture cannot be compacted ({exc.reason})") from None
    held: dict[str, tuple[bytes, ...]] = {}
    in_file: set[str] = set()
    entries = 0
    kept: list[bytes] = []
    pending_bytes = 0
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    for line in lines:
        if line.strip(b" \t\r"):
            request_hash = _hash_of(line)
            in_file.add(request_hash)
            if request_hash in groups:
                held[request_hash] = _responses_of(line, request_hash, ceilings)
                continue
            entries += 1
        kept.append(line)
        kept.append(b"\n")
        pending_bytes += len(line) + 1
        if pending_bytes >= _PIECE:
            writer.write(b"".join(kept))
            kept.clear()
            pending_bytes = 0
    writer.write(b"".join(kept))
    return entries, held, in_file


def _responses_of(line: bytes, request_hash: str, ceilings: Ceilings) -> tuple[bytes, ...]:
    stored = parse_fixture(line + b"\n", ceilings).stored(request_hash)
    assert stored is not None
    return (stored,) if type(stored) is bytes else stored  # type: ignore[return-value]
