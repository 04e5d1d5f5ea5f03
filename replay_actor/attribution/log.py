"""The run log's line and its writer: one JSON line per call, appended durably
(docs/attribution.md).

Runs in: the process that owns the provider (the ``run``/``serve`` process, or the
application's own process for an in-process client, Inspect, pydantic-ai or the pytest
plugin); every thread and asyncio task of it writes through one :class:`RunLog`.

A line::

    {"seq":3,"time":1733312345.123456,"pid":4242,"provider":"replay","kind":"chat",
     "vendor":"openai","path":"/v1/chat/completions","scope":{"sample":2},
     "outcome":"served","request_hash":"sha256:…","line":17,"element":1,
     "row":{"sample":"q17","epoch":1}}

``outcome`` is ``served``, ``miss``, ``exhausted``, ``invalid``, ``blocked`` or ``failed``
(the provider lost or released, a live endpoint's failure). ``line`` is the fixture line
that answered and ``element`` the 0-based index into its ``responses`` (``null`` for a
single ``response``); both are ``null`` for live and recorded answers. ``vendor`` and
``path`` are the HTTP API the call came through (``null`` for a direct ``complete``).
``row`` is the eval row the integration named (``row.py``; ``null`` outside one): it is
not part of the request and not hashed.

Each process that writes counts its own ``seq`` from 1 (a fork child too, and a copy of
the provider sent to another process, which reopens the file): ``pid`` tells them apart.

Durability: the file is opened ``O_APPEND`` and each line is one ``write`` of the whole
line, so lines from many threads or processes never interleave, and a run killed at any
moment (SIGKILL included) keeps every line whose call returned: the kernel has it. (A
power loss is another matter: lines are not fsynced, which would cost a disk flush per
call.) The neutral request goes to the log's own request sidecar (``FILE.requests.jsonl``,
``files/sidecar.py``), once per hash, so the log stays small.

Private data: no ``request_hash``, no sidecar, and the file is created owner-only
(0600). ``line`` and ``element`` stay: they are what lets two private logs be compared,
and the file is the owner's alone, like the inspection record.
"""

from __future__ import annotations

import os
import stat
import threading
import time
import warnings
import weakref
from typing import Any, Final

import msgspec

from .._errors import ReplayError
from ..files.sidecar import SidecarWriter

__all__ = ["OUTCOMES", "Fields", "LogLine", "RunLog", "sidecar_of"]

#: Every ``outcome`` a line may have.
OUTCOMES: Final = ("served", "miss", "exhausted", "invalid", "blocked", "failed")
# O_NONBLOCK: a FIFO at the path fails at once instead of waiting for a reader.
_FLAGS: Final = (
    os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
)


class LogLine(msgspec.Struct, omit_defaults=False):
    """One call, as the log holds it (the reader decodes into the same Struct)."""

    seq: int
    time: float
    outcome: str
    pid: int = 0
    provider: str | None = None
    kind: str = "chat"
    vendor: str | None = None
    path: str | None = None
    scope: dict[str, Any] | None = None
    request_hash: str | None = None
    line: int | None = None
    element: int | None = None
    row: dict[str, Any] | None = None


_encode: Final = msgspec.json.Encoder().encode
_FIELDS: Final = frozenset(LogLine.__struct_fields__)
#: :meth:`RunLog.record`'s fields: kind, vendor, path, scope, request_hash, line, element,
#: row.
Fields = tuple[str, str | None, str | None, Any, str | None, int | None, int | None, Any]


def sidecar_of(log: str | os.PathLike[str]) -> str:
    """The request sidecar of a log: ``FILE.requests.jsonl``."""
    return os.fspath(log) + ".requests.jsonl"


class RunLog:
    """``RunLog(path, private=False, provider="replay")``: appends one line per call.

    Safe from many threads; ``close()`` is idempotent. Raises ``ReplayError`` if the path
    cannot be a log (a directory, a symbolic link, not writable).
    """

    def __init__(
        self, path: str | os.PathLike[str], *, private: bool = False, provider: str | None = None
    ) -> None:
        self.path = os.path.abspath(os.fspath(path))
        self.private = private
        self.provider = provider
        self._fd = _open(self.path, private)
        self._lock = threading.Lock()
        self._seq = 0
        self._pid = os.getpid()
        # The sidecar is written once per hash: the hashes already handed to it.
        self._sidecar = None if private else SidecarWriter(self.path)
        self._in_sidecar: set[str] = set()
        _OPEN.add(self)

    def _forked(self) -> None:
        # In a fork child: its own writer (pid, seq from 1), and a fresh lock (another
        # thread of the parent may have held this one at the fork).
        self._lock = threading.Lock()
        self._seq = 0
        self._pid = os.getpid()

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def wants_request(self, request_hash: str) -> bool:
        """Whether the sidecar still needs this hash's request (normal mode only)."""
        return self._sidecar is not None and request_hash not in self._in_sidecar

    def keep_request(self, request_hash: str, canonical: bytes) -> None:
        """Put a request into the log's sidecar (once per hash; a failure only warns)."""
        if self._sidecar is None or request_hash in self._in_sidecar:
            return
        self._in_sidecar.add(request_hash)
        try:
            self._sidecar.append(request_hash, canonical)
        except (ReplayError, OSError) as exc:
            # The call is logged all the same; only compare's diff for it is lost.
            warnings.warn(f"the run log's request sidecar was not written: {exc}", stacklevel=3)

    def write(self, outcome: str, **fields: Any) -> None:
        """Append one line (``fields``: :class:`LogLine`'s); a hash is dropped in private
        mode. Never raises for a closed log: a call after ``close`` is not logged."""
        unknown = fields.keys() - _FIELDS
        if unknown:
            raise TypeError(f"not a run log field: {sorted(unknown)}")
        get = fields.get
        self.record(
            outcome,
            (
                get("kind", "chat"),
                get("vendor"),
                get("path"),
                get("scope"),
                get("request_hash"),
                get("line"),
                get("element"),
                get("row"),
            ),
        )

    def record(self, outcome: str, fields: Fields) -> None:
        """:meth:`write` with every other field given, in :class:`LogLine`'s order (no
        keyword dictionary: this runs once per call)."""
        if self.private:
            fields = (*fields[:4], None, *fields[5:])
        with self._lock:
            if self._fd < 0:
                return
            self._seq += 1
            # Microseconds: an integer division is exact and cheaper than round().
            now = time.time_ns() // 1000 / 1e6
            line = LogLine(self._seq, now, outcome, self._pid, self.provider, *fields)
            data = _encode(line) + b"\n"
            # One write per line: O_APPEND places it whole at the end, whoever else writes.
            written = os.write(self._fd, data)
            if written != len(data):  # pragma: no cover - a full disk
                raise ReplayError("the run log could not be written whole (disk full?)")

    def refused(self, outcome: str, where: str | None = None) -> None:
        """A request answered before any provider call (``invalid``, ``blocked``)."""
        self.write(outcome, path=where)

    def close(self) -> None:
        with self._lock:
            fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    def __repr__(self) -> str:
        return f"<RunLog {self.path!r}{' private' if self.private else ''}>"


#: Every log open in this process, so a fork child gets writers of its own.
_OPEN: Final[weakref.WeakSet[RunLog]] = weakref.WeakSet()


def _after_fork() -> None:
    for log in list(_OPEN):
        log._forked()


os.register_at_fork(after_in_child=_after_fork)


def _open(path: str, private: bool) -> int:
    try:
        fd = os.open(path, _FLAGS, 0o600 if private else 0o644)
    except OSError as exc:
        reason = "a symbolic link" if os.path.islink(path) else os.strerror(exc.errno or 0)
        raise ReplayError(f"the run log cannot be opened ({reason})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise ReplayError("the run log must be a regular file")
    if private and info.st_mode & 0o077:
        os.fchmod(fd, 0o600)  # an existing file made owner-only before a line is written
    return fd
