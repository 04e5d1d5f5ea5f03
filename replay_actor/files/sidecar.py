"""The request sidecar: ``<fixture>.requests.jsonl``, the request behind each hash.

Runs in: the caller (record mode, the CLI, and a handle explaining a miss).

A fixture holds hashes and responses only; a hash says *that* a request differs, never
*where*. The sidecar keeps, for each recorded hash, the normalised neutral request it was
computed from, one JSON line each::

    {"request_hash":"sha256:…","request":<the request's RFC 8785 bytes>}

so ``explain`` can name the JSON paths where a missing request differs from its nearest
recorded one. Record mode writes it for every request it records; ``add`` and ``stub``
write it when given ``--request``. The actor never reads it and replay never needs it:
deleting it loses only the explanations.

It holds prompts in the clear, so it is created with mode 0600 and never through a
symbolic link. Writers only ever append, one ``write`` per line (record mode: per batch
of lines, ``append_many``) under an exclusive ``flock`` on the sidecar itself (never
replaced, so every writer locks the same inode), each append fsynced (record mode: once,
at release, ``sync``: the answers are durable in the journal already, and a sidecar line
lost in a crash costs only the explanation of a later miss). A crash can leave a torn
last line without its newline: readers ignore it, and the next writer cuts it off before
appending. A hash already present is
not written again, so the first line for a hash is the only one.

Reading (``read_sidecar``) streams the file line by line, so its memory is one line (at
most ``MAX_LINE_BYTES``) and the hashes seen so far, whatever the file's size; a reader
may also stop after ``max_bytes``. Each line is split into one raw slice per request field
(lists: one per element) and nothing deeper: the explanation decodes only where two
requests differ.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import threading
import time
import warnings
from collections.abc import Container, Iterator
from typing import IO, Any, Final

import msgspec

from .._errors import ReplayError
from .._kinds import CompletionRequest, EmbeddingRequest
from .._request import Request
from .durable import fsync_dir, write_all

__all__ = [
    "LIST_FIELDS",
    "MAX_LINE_BYTES",
    "REQUEST_FIELDS",
    "SUFFIX",
    "SidecarWriter",
    "decode_split",
    "find_request",
    "line_hash",
    "read_sidecar",
    "sidecar_line",
    "sidecar_path",
]

SUFFIX: Final = ".requests.jsonl"
_PREFIX: Final = b'{"request_hash":"'
_HASH_LENGTH: Final = 71  # "sha256:" + 64 hex digits
_FLAGS: Final = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
#: How long a writer waits for another writer's append (each holds the lock briefly).
_LOCK_WAIT: Final = 10.0
_CHUNK: Final = 1 << 20


def sidecar_path(fixture: str | os.PathLike[str]) -> str:
    """The sidecar's path for a fixture's path (the fixture's name + ``.requests.jsonl``)."""
    return os.fspath(fixture) + SUFFIX


def sidecar_line(request_hash: str, canonical: bytes) -> bytes:
    """One sidecar line, newline included, for a hash and its request's canonical bytes."""
    return _PREFIX + request_hash.encode("ascii") + b'","request":' + canonical + b"}\n"


def line_hash(line: bytes) -> str | None:
    """The hash a sidecar line written by :func:`sidecar_line` starts with, else None."""
    if line.startswith(_PREFIX) and line[17 + _HASH_LENGTH : 18 + _HASH_LENGTH] == b'"':
        return line[17 : 17 + _HASH_LENGTH].decode("ascii", "replace")
    return None


class SidecarWriter:
    """Appends requests to one fixture's sidecar, each hash once.

    Keeps the set of hashes already in the file, and on each append reads only what
    other writers added since (the file only grows), so a recording session pays for
    the file once, not once per request.
    """

    def __init__(self, fixture: str | os.PathLike[str]) -> None:
        self.path = sidecar_path(fixture)
        self._known: set[str] = set()
        self._scanned = 0  # bytes of the file already read into _known
        self._lock = threading.Lock()  # threads of one recorder share this writer

    def check(self) -> None:
        """Raise the ``ReplayError`` ``append`` would for a path that cannot be a sidecar
        (a directory, a symbolic link, not a regular file, not writable), changing
        nothing; an absent sidecar passes (``append`` creates it)."""
        try:
            fd, _ = _open(self.path, _FLAGS & ~os.O_CREAT | os.O_NONBLOCK)
        except ReplayError:
            if os.path.lexists(self.path):
                raise
            return
        os.close(fd)

    def append_or_warn(self, request_hash: str, canonical: bytes) -> None:
        """``append`` for record mode: the answer is already in the fixture, so a sidecar
        that cannot be written costs only the explanation, and says so as a warning."""
        try:
            self.append(request_hash, canonical)
        except (ReplayError, OSError) as exc:
            warnings.warn(
                f"the request was recorded, but not its request sidecar line: {exc}",
                RuntimeWarning,
                stacklevel=3,
            )

    def append(self, request_hash: str, canonical: bytes) -> bool:
        """Add the line for ``request_hash`` unless present; True if it was written.

        Raises ``ReplayError`` naming the path if the sidecar cannot be written.
        """
        with self._lock:
            return self._append([(request_hash, canonical)]) == 1

    def append_many_or_warn(self, items: list[tuple[str, bytes]]) -> None:
        """``append_many`` for record mode (the answers are already durable in the
        journal: a sidecar that cannot be written costs the explanations, and says so)."""
        try:
            self.append_many(items, durable=False)
        except (ReplayError, OSError) as exc:
            warnings.warn(
                f"the requests were recorded, but not their request sidecar lines: {exc}",
                RuntimeWarning,
                stacklevel=2,
            )

    def append_many(self, items: list[tuple[str, bytes]], *, durable: bool = True) -> int:
        """``append`` for several ``(hash, canonical request)`` pairs with one write (and,
        if ``durable``, one fsync); how many lines were written. Record mode appends
        each batch of answers so, and makes the file durable once, at release
        (``sync``)."""
        with self._lock:
            return self._append(items, durable=durable)

    def sync(self) -> None:
        """Make every line appended so far durable (if the sidecar exists)."""
        try:
            fd, _ = _open(self.path, _FLAGS & ~os.O_CREAT)
        except ReplayError:
            if os.path.lexists(self.path):
                raise
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _append(self, items: list[tuple[str, bytes]], *, durable: bool = True) -> int:
        fd, created = _open(self.path)
        try:
            _lock(fd, self.path)
            size = _cut_torn_tail(fd)
            if size < self._scanned:  # shrunk under us (edited by hand): read it again
                self._known.clear()
                self._scanned = 0
            self._scan(fd, size)
            lines: dict[str, bytes] = {}
            for request_hash, canonical in items:
                if request_hash not in self._known and request_hash not in lines:
                    lines[request_hash] = sidecar_line(request_hash, canonical)
            if not lines:
                return 0
            data = b"".join(lines.values())
            os.lseek(fd, 0, os.SEEK_END)
            write_all(fd, data)
            if durable:
                os.fsync(fd)
            self._known.update(lines)
            self._scanned = size + len(data)
        finally:
            os.close(fd)  # closing drops the flock
        if created:
            fsync_dir(os.path.dirname(os.path.abspath(self.path)))
        return len(lines)

    def _scan(self, fd: int, size: int) -> None:
        """Read the hashes of the lines between what was scanned and ``size``."""
        if size <= self._scanned:
            return
        data = os.pread(fd, size - self._scanned, self._scanned)
        for line in data.split(b"\n"):
            found = line_hash(line)
            if found is not None:
                self._known.add(found)
        self._scanned = size


def _problem(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "is a symbolic link (refused)"
    return f"cannot be opened ({exc.strerror})" if exc.strerror else "cannot be opened"


def _open(path: str, flags: int = _FLAGS) -> tuple[int, bool]:
    existed = os.path.lexists(path)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        problem = _problem(exc)
    else:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd, not existed
        os.close(fd)
        problem = "is not a regular file"
    raise ReplayError(f"the request sidecar {path} {problem}")


def _lock(fd: int, path: str) -> None:
    deadline = time.monotonic() + _LOCK_WAIT
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise ReplayError(f"cannot lock the request sidecar {path}") from None
        if time.monotonic() >= deadline:
            raise ReplayError(
                f"the request sidecar {path} stayed locked by another writer for "
                f"{_LOCK_WAIT:.0f} s; is a stopped process holding it?"
            )
        time.sleep(0.005)


def _cut_torn_tail(fd: int) -> int:
    """Cut a last line left without its newline (a crash mid-append); the new size."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return size
    end = size - 1
    while end > 0:
        start = max(0, end - _CHUNK)
        newline = os.pread(fd, end - start, start).rfind(b"\n")
        if newline >= 0:
            end = start + newline + 1
            break
        end = start
    os.ftruncate(fd, end)
    return end


# -- reading -----------------------------------------------------------------------------

#: A line longer than this is skipped by readers (a request of that size is not worth
#: comparing on a miss, and reading it would cost that much memory).
MAX_LINE_BYTES: Final = 16 << 20
#: The request fields whose value is a list, split one raw slice per element.
LIST_FIELDS: Final = ("messages", "tools")
#: Every field of ``Request``, and ``scope`` (a request's pairing key) even where this
#: version's ``Request`` lacks it, so a sidecar written with scopes is read, not refused.
#: The fields of the other kinds (``_kinds.py``) are compared the same way.
REQUEST_FIELDS: Final = tuple(
    sorted(
        {
            *Request.__struct_fields__,
            *EmbeddingRequest.__struct_fields__,
            *CompletionRequest.__struct_fields__,
            "scope",
        }
    )
)


def _split_type() -> Any:
    """A Struct with one raw slice per request field (lists: one per element).

    Built from ``Request``'s own fields, so a field added there is compared too.
    """
    fields: list[tuple[str, Any, Any]] = []
    for name in REQUEST_FIELDS:
        if name in LIST_FIELDS:
            fields.append((name, list[msgspec.Raw], msgspec.field(default_factory=list)))
        else:
            fields.append((name, msgspec.Raw | msgspec.UnsetType, msgspec.UNSET))
    return msgspec.defstruct("SplitRequest", fields, forbid_unknown_fields=True)


_Split: Final = _split_type()
#: A request's canonical bytes -> its split form (``msgspec.DecodeError`` if not one).
decode_split: Final = msgspec.json.Decoder(_Split).decode
_REQUEST_AT: Final = len(_PREFIX) + _HASH_LENGTH + len(b'","request":')


class _Line(msgspec.Struct):
    """A sidecar line not in the layout the writer uses (edited by hand)."""

    request_hash: str
    request: msgspec.Raw


_decode_line: Final = msgspec.json.Decoder(_Line).decode


class _Unusable(Exception):
    """A line that is valid JSON but cannot be compared (nested too deeply): skipped."""


def _parse_line(line: bytes) -> tuple[str, Any] | None:
    """(hash, split request) of one line without its newline; None if it is blank.

    Raises ``msgspec.DecodeError`` for a line that is not a sidecar line, ``_Unusable``
    for one nested too deeply to decode.
    """
    try:
        digest = line_hash(line[:_REQUEST_AT])
        if digest is not None and line.endswith(b"}"):
            return digest, decode_split(memoryview(line)[_REQUEST_AT:-1])
        if not line.strip():
            return None
        parsed = _decode_line(line)
        return parsed.request_hash, decode_split(parsed.request)
    except RecursionError:
        raise _Unusable from None


def _skip_rest_of_line(handle: IO[bytes]) -> int:
    """Read past the newline that ends an over-long line; the bytes read."""
    skipped = 0
    while True:
        piece = handle.readline(_CHUNK)
        skipped += len(piece)
        if not piece or piece.endswith(b"\n"):
            return skipped


def read_sidecar(
    path: str | os.PathLike[str],
    *,
    max_bytes: int | None = None,
    max_line: int = MAX_LINE_BYTES,
    wanted: Container[str] | None = None,
) -> Iterator[tuple[str, Any]]:
    """(hash, split request) for each line of a sidecar, the first line of a hash only.

    Streams: the memory held is one line and the set of hashes seen. Skipped: a torn last
    line (no newline: a writer crashed mid-append), a line over ``max_line``, and a
    line nested too deeply to decode. With ``max_bytes``, stops before the line that
    would take the bytes read past it. With ``wanted``, a line in the writer's layout
    whose hash is not wanted is passed over undecoded (``compare`` asks for a few
    requests of a large sidecar). Raises ``ReplayError`` naming the path and line
    for a line that is not a sidecar line or a path that is not a regular file,
    ``FileNotFoundError`` when there is no sidecar.
    """
    shown = os.fspath(path)
    # Opened without blocking and checked to be a regular file: a FIFO planted at the
    # path must not hang a miss. Read, not mapped: a mapping of a file someone truncates
    # meanwhile faults (SIGBUS), and a diagnostic must never crash its process.
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    with open(fd, "rb", closefd=True) as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ReplayError(f"the request sidecar {shown} is not a regular file")
        seen: set[str] = set()
        consumed = 0
        number = 0
        limit = max_line + 1  # the line and its newline
        while line := handle.readline(limit):
            number += 1
            over_long = len(line) == limit and not line.endswith(b"\n")
            if over_long:
                consumed += _skip_rest_of_line(handle)
            elif not line.endswith(b"\n"):
                return  # a torn last line
            consumed += len(line)
            if max_bytes is not None and consumed > max_bytes:
                return
            if wanted is not None and not over_long:
                digest = line_hash(line[:_REQUEST_AT])
                if digest is not None and digest not in wanted:
                    continue
            try:
                entry = None if over_long else _parse_line(line[:-1])
            except _Unusable:
                continue
            except msgspec.DecodeError:
                raise ReplayError(f"{shown}: line {number} is not a request sidecar line") from None
            if entry is not None and entry[0] not in seen:
                seen.add(entry[0])
                yield entry


def find_request(path: str | os.PathLike[str], request_hash: str) -> dict[str, Any] | None:
    """The request the sidecar holds for ``request_hash`` (its first line), else None.

    Streams as :func:`read_sidecar` does and decodes only the matching line. Raises
    ``FileNotFoundError`` without a sidecar, ``ReplayError`` for a path that is not a
    regular file or a matching line that is not a sidecar line.
    """
    shown = os.fspath(path)
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    with open(fd, "rb", closefd=True) as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ReplayError(f"the request sidecar {shown} is not a regular file")
        for number, line in enumerate(handle, start=1):
            if not line.endswith(b"\n") or request_hash.encode("ascii") not in line:
                continue  # a torn last line, or another hash's
            try:
                found = _decode_line(line)
            except msgspec.DecodeError:
                raise ReplayError(f"{shown}: line {number} is not a request sidecar line") from None
            if found.request_hash == request_hash:
                request = msgspec.json.decode(found.request)
                if isinstance(request, dict):
                    return request
    return None
