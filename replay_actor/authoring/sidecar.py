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
symbolic link. Writers only ever append, one ``write`` per line under an exclusive
``flock`` on the sidecar itself (never replaced, so every writer locks the same inode),
each append fsynced. A crash can leave a torn last line without its newline: readers
ignore it, and the next writer cuts it off before appending. A hash already present is
not written again, so the first line for a hash is the only one.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import threading
import time
import warnings
from typing import Final

from .._errors import ReplayError
from ..record.durable import fsync_dir, write_all

__all__ = ["SUFFIX", "SidecarWriter", "sidecar_line", "sidecar_path"]

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
            return self._append(request_hash, canonical)

    def _append(self, request_hash: str, canonical: bytes) -> bool:
        fd, created = _open(self.path)
        try:
            _lock(fd, self.path)
            size = _cut_torn_tail(fd)
            if size < self._scanned:  # shrunk under us (edited by hand): read it again
                self._known.clear()
                self._scanned = 0
            self._scan(fd, size)
            if request_hash in self._known:
                return False
            line = sidecar_line(request_hash, canonical)
            os.lseek(fd, 0, os.SEEK_END)
            write_all(fd, line)
            os.fsync(fd)
            self._known.add(request_hash)
            self._scanned = size + len(line)
        finally:
            os.close(fd)  # closing drops the flock
        if created:
            fsync_dir(os.path.dirname(os.path.abspath(self.path)))
        return True

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


def _open(path: str) -> tuple[int, bool]:
    existed = os.path.lexists(path)
    problem = "cannot be opened"
    try:
        fd = os.open(path, _FLAGS, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            problem = "is a symbolic link (refused)"
        elif exc.strerror:
            problem = f"cannot be opened ({exc.strerror})"
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
