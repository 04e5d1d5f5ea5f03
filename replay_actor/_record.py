"""The recording provider: replay what the fixture holds, ask the live model for the rest.

A request whose hash the fixture held when the session opened is answered from the
fixture, with the usual sequence semantics. Every other call goes to the live provider;
its response is appended to that hash's entry (a repeat turns a single ``response`` into
a ``responses`` sequence) and returned exactly as it will be replayed (canonical JSON,
decoded afresh).

Durability, per recorded response, in this order::

    1. build the new fixture in memory and validate it (parse_fixture): a response that
       cannot be recorded fails the call and changes nothing
    2. append {"request_hash", "response", "after": <new fixture_set_hash>} to the
       journal (FIXTURE.journal) and fsync it             <- the response is now safe
    3. write FIXTURE's new bytes to a temp file in the same folder, fsync, os.replace,
       fsync the folder                                    <- the fixture is valid throughout

The journal's first line is ``{"journal": 1, "base": <fixture_set_hash at session start>}``.
Recovery (at the next open of the same fixture) reads the fixture on disk, finds where it
stands in the journal — at ``base``, or at the last line whose ``after`` is its hash —
folds in only the lines after that point, rewrites the fixture and removes the journal. So
a crash between 2 and 3 loses nothing, a crash after 3 duplicates nothing, and a torn last
journal line (a crash inside 2) is a response that was never returned to the caller.

Exclusion: ``fcntl.flock`` on FIXTURE.lock, non-blocking; a second recorder of the same
fixture (in this process or another) fails at once. The lock file is unlinked on release
while still locked, and a locker checks that the path still names the inode it locked, so
two recorders can never hold "the" lock at once.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import os
import secrets
import stat
import threading
from types import TracebackType
from typing import Any, Final

import msgspec

from ._canonical import canonical_json
from ._ceilings import Ceilings
from ._errors import (
    FixtureError,
    ProviderClosed,
    ReplayError,
    RequestError,
    SequenceExhausted,
)
from ._fixture import FixtureSet, load_fixture, parse_fixture
from ._live import LiveProvider, prepare_request
from ._request import RequestLike

__all__ = ["RecordingProvider"]

#: An entry: a single response's canonical bytes, or a sequence's (a list, in order).
_Value = bytes | list[bytes]

_JOURNAL_FLAGS: Final = (
    os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW
)
_LOCK_ATTEMPTS: Final = 20
_NOT_HELD: Final = object()


class _JournalLine(msgspec.Struct, forbid_unknown_fields=True):
    request_hash: str
    response: msgspec.Raw
    after: str


class _JournalHeader(msgspec.Struct, forbid_unknown_fields=True):
    journal: int
    base: str


# -- files ----------------------------------------------------------------------------------


def _fsync_dir(folder: str) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _new_file_mode() -> int:
    """0666 less the umask, read without the thread-unsafe set-and-restore of os.umask."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o644


def _atomic_write(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a reader sees the old or the new file,
    whole, at every moment; durable once this returns."""
    folder, name = os.path.split(path)
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = _new_file_mode()
    tmp = os.path.join(folder, f".{name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        try:
            _write_all(fd, data)
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(folder)


def _remove_stale_temps(path: str) -> None:
    """Temp files a crashed recorder left behind (we hold the lock: none is live)."""
    folder, name = os.path.split(path)
    prefix = f".{name}."
    for entry in os.listdir(folder):
        if entry.startswith(prefix) and entry.endswith(".tmp"):
            try:
                os.unlink(os.path.join(folder, entry))
            except OSError:
                pass


def _take_lock(lock_path: str) -> int:
    """Lock ``lock_path`` (flock, non-blocking); ``ReplayError`` if another holds it."""
    for _ in range(_LOCK_ATTEMPTS):
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            problem = os.strerror(exc.errno) if exc.errno else type(exc).__name__
            break
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            held = exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
            problem = "held" if held else (os.strerror(exc.errno) if exc.errno else "error")
            break
        try:
            on_disk = os.stat(lock_path, follow_symlinks=False)
        except FileNotFoundError:
            on_disk = None
        mine = os.fstat(fd)
        if on_disk is not None and (on_disk.st_ino, on_disk.st_dev) == (mine.st_ino, mine.st_dev):
            return fd
        # The previous holder unlinked it between our open and our flock: start again.
        os.close(fd)
    else:
        problem = "contended"
    if problem == "held":
        raise ReplayError(
            "this fixture is already being recorded by another provider "
            "(its .lock file is held); release that one first"
        )
    raise ReplayError(f"cannot lock the fixture for recording ({problem})")


# -- the table --------------------------------------------------------------------------------


def _append(table: dict[str, _Value], request_hash: str, response: bytes) -> _Value:
    """The entry's value once ``response`` is recorded for ``request_hash``."""
    current = table.get(request_hash)
    if current is None:
        return response
    if isinstance(current, bytes):
        return [current, response]
    return [*current, response]


def _table_of(fixture: FixtureSet) -> dict[str, _Value]:
    table: dict[str, _Value] = {}
    for request_hash in fixture.request_hashes():
        stored = fixture.stored(request_hash)
        assert stored is not None
        table[request_hash] = stored if isinstance(stored, bytes) else list(stored)
    return table


def _serialise(table: dict[str, _Value]) -> bytes:
    """Fixture bytes, one line per entry, sorted by hash (equal to ``entry_line``'s
    output for the same entries; the values are canonical already)."""
    lines: list[bytes] = []
    for request_hash in sorted(table):
        value = table[request_hash]
        head = b'{"schema_version":1,"request_hash":"' + request_hash.encode("ascii")
        if isinstance(value, bytes):
            lines.append(head + b'","response":' + value + b"}\n")
        else:
            lines.append(head + b'","responses":[' + b",".join(value) + b"]}\n")
    return b"".join(lines)


class RecordingProvider:
    """Answers from the fixture when it can, records live answers when it cannot.

    Same interface as every provider (``complete``, ``acomplete``, ``snapshot``,
    ``release``, context manager, ``closed``). Thread-safe: one lock guards the cursors
    and the files; the live call itself runs outside it.
    """

    def __init__(
        self,
        fixture: str | os.PathLike[str],
        live: LiveProvider,
        *,
        private: bool = False,
        ceilings: Ceilings | None = None,
    ) -> None:
        self._path = os.path.abspath(os.fspath(fixture))
        self._folder = os.path.dirname(self._path)
        self._journal_path = self._path + ".journal"
        self._lock_path = self._path + ".lock"
        self._live = live
        self._private = private
        self._ceilings = Ceilings() if ceilings is None else ceilings
        self._lock = threading.Lock()
        self._closed = False
        self._journal_fd = -1
        self._keep_journal = False
        self._served = 0
        self._exhausted = 0
        self._recorded = 0
        self._cursors: dict[str, int] = {}
        if not os.path.isdir(self._folder):
            live.release()
            raise ReplayError("the fixture's folder does not exist")
        try:
            self._lock_fd = _take_lock(self._lock_path)
        except BaseException:
            live.release()
            raise
        try:
            self._open_fixture()
        except BaseException:
            self._unlock()
            live.release()
            raise

    # -- opening and recovery -----------------------------------------------------------

    def _open_fixture(self) -> None:
        _remove_stale_temps(self._path)
        if os.path.lexists(self._path):
            current = load_fixture(self._path, ceilings=self._ceilings)
        else:
            current = parse_fixture(b"", self._ceilings)
            _atomic_write(self._path, b"")
        table = _table_of(current)
        if os.path.lexists(self._journal_path):
            current, table = self._recover(current, table)
        self._current = current
        self._table = table
        #: What the fixture held before this session: answered, never recorded.
        self._held = frozenset(table)

    def _recover(
        self, current: FixtureSet, table: dict[str, _Value]
    ) -> tuple[FixtureSet, dict[str, _Value]]:
        with open(self._journal_path, "rb") as journal:
            data = journal.read()
        lines = data.split(b"\n")
        lines.pop()  # after the last newline: empty, or a torn line never acknowledged
        problem: str | None = None
        records: list[_JournalLine] = []
        base = None
        for number, line in enumerate(lines, start=1):
            try:
                if number == 1:
                    base = msgspec.json.decode(line, type=_JournalHeader).base
                else:
                    records.append(msgspec.json.decode(line, type=_JournalLine))
            except msgspec.DecodeError:
                problem = f"the recording journal is corrupt at line {number}"
                break
        if problem is None and base is not None:
            start: int | None = 0 if current.fixture_set_hash == base else None
            for index in range(len(records) - 1, -1, -1):
                if start is None and records[index].after == current.fixture_set_hash:
                    start = index + 1
            if start is None:
                problem = (
                    "the fixture was changed outside the recorder since its journal was "
                    "written; remove the .journal file to discard the unfolded responses"
                )
            else:
                for record in records[start:]:
                    table[record.request_hash] = _append(
                        table, record.request_hash, bytes(record.response)
                    )
                data = _serialise(table)
                try:
                    current = parse_fixture(data, self._ceilings)
                except FixtureError as exc:
                    problem = f"the recording journal cannot be folded in ({exc.reason})"
                else:
                    if records[start:]:
                        _atomic_write(self._path, data)
        if problem is not None:
            raise ReplayError(problem)
        os.unlink(self._journal_path)
        _fsync_dir(self._folder)
        return current, table

    # -- answering ------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def _from_fixture(self, request_hash: str) -> Any:
        """The fixture's answer for a held hash, ``_NOT_HELD`` otherwise."""
        with self._lock:
            if self._closed:
                raise ProviderClosed("the provider was released")
            if request_hash not in self._held:
                return _NOT_HELD
            value = self._table[request_hash]
            if isinstance(value, bytes):
                self._served += 1
                return msgspec.json.decode(value)
            position = self._cursors.get(request_hash, 0)
            if position < len(value):
                self._cursors[request_hash] = position + 1
                self._served += 1
                return msgspec.json.decode(value[position])
            self._exhausted += 1
        raise SequenceExhausted(None if self._private else request_hash)

    def _record(self, request_hash: str, response: dict[str, Any]) -> dict[str, Any]:
        """Persist a live answer (journal, then fixture) and return it as replay will."""
        try:
            encoded = canonical_json(response)
        except RequestError:
            encoded = b""
        if not encoded:
            raise ReplayError("the live response cannot be recorded (not canonical JSON)")
        with self._lock:
            if self._closed:
                raise ProviderClosed("the provider was released before the answer was recorded")
            value = _append(self._table, request_hash, encoded)
            table = {**self._table, request_hash: value}
            data = _serialise(table)
            try:
                after = parse_fixture(data, self._ceilings)
            except FixtureError as exc:
                reason = exc.reason
            else:
                self._journal(request_hash, encoded, after.fixture_set_hash)
                self._table = table
                self._current = after
                self._recorded += 1
                try:
                    _atomic_write(self._path, data)
                except OSError:
                    self._keep_journal = True
                    raise
                return msgspec.json.decode(encoded)  # type: ignore[no-any-return]
        raise ReplayError(f"the live response cannot be recorded: it would make {reason}")

    def _journal(self, request_hash: str, encoded: bytes, after: str) -> None:
        if self._journal_fd < 0:
            fd = os.open(self._journal_path, _JOURNAL_FLAGS, 0o600)
            header = msgspec.json.encode({"journal": 1, "base": self._current.fixture_set_hash})
            _write_all(fd, header + b"\n")
            os.fsync(fd)
            _fsync_dir(self._folder)
            self._journal_fd = fd
        line = msgspec.json.encode(
            _JournalLine(request_hash=request_hash, response=msgspec.Raw(encoded), after=after)
        )
        _write_all(self._journal_fd, line + b"\n")
        os.fsync(self._journal_fd)

    def complete(self, request: RequestLike) -> dict[str, Any]:
        """The fixture's answer if the fixture held this request, else a recorded live one."""
        if self._closed:
            raise ProviderClosed("the provider was released")
        request_hash, plain = prepare_request(request)
        answer = self._from_fixture(request_hash)
        if answer is not _NOT_HELD:
            return answer  # type: ignore[no-any-return]
        return self._record(request_hash, self._live.complete_plain(plain))

    async def acomplete(self, request: RequestLike) -> dict[str, Any]:
        """The async form of :meth:`complete`; file work runs in a worker thread."""
        if self._closed:
            raise ProviderClosed("the provider was released")
        request_hash, plain = prepare_request(request)
        answer = await asyncio.to_thread(self._from_fixture, request_hash)
        if answer is not _NOT_HELD:
            return answer  # type: ignore[no-any-return]
        response = await self._live.acomplete_plain(plain)
        return await asyncio.to_thread(self._record, request_hash, response)

    def snapshot(self) -> dict[str, Any]:
        """The current fixture's safe snapshot plus ``kind``, ``recorded``, the fixture
        counters and the live provider's; no payload, no hash, no path, no key."""
        live = self._live.snapshot()
        with self._lock:
            snap = self._current.snapshot()
            snap.update(
                kind="record",
                recorded=self._recorded,
                served=self._served,
                exhausted=self._exhausted,
                adapter=live["adapter"],
                model=live["model"],
                calls=live["calls"],
            )
        return snap

    # -- closing --------------------------------------------------------------------------

    def _unlock(self) -> None:
        if self._lock_fd >= 0:
            try:
                os.unlink(self._lock_path)
            except OSError:
                pass
            os.close(self._lock_fd)
            self._lock_fd = -1

    def release(self) -> None:
        """Finish the session: the fixture is already complete, so the journal goes;
        the lock is dropped and the live provider closed. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if self._journal_fd >= 0:
                    os.close(self._journal_fd)
                    self._journal_fd = -1
                    if not self._keep_journal:
                        os.unlink(self._journal_path)
                        _fsync_dir(self._folder)
            finally:
                self._unlock()
        self._live.release()

    def __enter__(self) -> RecordingProvider:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<RecordingProvider recorded={self._recorded} {state}>"
