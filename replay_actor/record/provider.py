"""The recording provider: replay what the fixture holds, ask the live model for the rest.

A request whose hash the fixture held when the session opened is answered from the
fixture, with the usual sequence semantics. Every other call goes to the live provider;
its response is appended to that hash's entry (a repeat turns a single ``response`` into
a ``responses`` sequence) and returned exactly as it will be replayed (canonical JSON,
decoded afresh).

Durability, per recorded response, in this order::

    1. build the new fixture in memory and validate it (parse_fixture): a response that
       cannot be recorded fails the call and changes nothing
    2. append it to the journal and fsync (``journal.py``)  <- the response is now safe
    3. replace FIXTURE atomically (``durable.atomic_write``) <- valid at every moment
    4. append the request to FIXTURE.requests.jsonl (``files/sidecar.py``), so a
       later miss can be explained; failing that is a warning, the answer is kept

A second recorder of the same fixture fails at once (``durable.take_lock``), and the
next open of a crashed session's fixture folds its journal in (``journal.py``).

A session belongs to the process that opened it. In a fork child the copy is disowned:
every call raises ``RecordingError``, and its ``release()`` only closes the child's copies
of the descriptors, so the child can neither record answers the parent's next rewrite
would drop, nor delete the parent's journal and lock (docs/manifest.md, "Recording and
fork").

In private mode (``data = "private"``) the request hash never appears in a traceback:
the frames of a call hold it in a ``_RequestHash`` box whose ``repr`` does not show it,
and a failure to record is raised from a frame that holds no copy of the table.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterable
from typing import Any, Final

import msgspec

from .._canonical import canonical_json
from .._errors import (
    FixtureError,
    ProviderClosed,
    RecordingError,
    ReplayError,
    RequestError,
    SequenceExhausted,
)
from .._interface import ReleasedOnExit, complete_each
from .._request import RequestLike, canonical_request
from ..adapters.live import LiveProvider, prepare_request
from ..files.durable import atomic_write, fsync_dir, release_lock, remove_stale_temps, take_lock
from ..files.sidecar import SidecarWriter
from ..fixture import (
    EXHAUSTED,
    MISS,
    Ceilings,
    Cursors,
    FixtureSet,
    load_fixture,
    parse_fixture,
    sequence_line,
    single_line,
)
from .journal import Journal, pending_records

__all__ = ["RecordingProvider"]

#: An entry: a single response's canonical bytes, or a sequence's (a list, in order).
_Value = bytes | list[bytes]
_NOT_HELD: Final = object()


class _RequestHash:
    """One call's request hash, held where a traceback cannot show it.

    Reporters print every frame's locals with ``repr`` (``pytest --showlocals``,
    ``capture_locals``, Sentry); in private mode the hash must not appear there
    (docs/privacy.md), so the frames of a call hold this box and read ``.value`` only
    inside expressions.
    """

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "<request hash>"


def _prepare(request: RequestLike) -> tuple[_RequestHash, dict[str, Any]]:
    value, plain = prepare_request(request)
    return _RequestHash(value), plain


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
    """Fixture bytes, one line per entry, sorted by hash (the values are canonical)."""
    lines: list[bytes] = []
    for request_hash in sorted(table):
        value = table[request_hash]
        if isinstance(value, bytes):
            lines.append(single_line(request_hash, value))
        else:
            lines.append(sequence_line(request_hash, value))
        lines.append(b"\n")
    return b"".join(lines)


class RecordingProvider(ReleasedOnExit):
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
        self._lock_path = self._path + ".lock"
        self._journal = Journal(self._path + ".journal")
        # The request behind each recorded hash, for explaining later misses.
        self._sidecar = SidecarWriter(self._path)
        self._live = live
        self._private = private
        self._ceilings = Ceilings() if ceilings is None else ceilings
        self._lock = threading.Lock()
        self._closed = False
        self._recorded = 0
        #: The process that owns the session (a fork child's copy is disowned).
        self._pid = os.getpid()
        self._lock_fd = -1
        if not os.path.isdir(self._folder):
            live.release()
            given = os.fspath(fixture)
            raise RecordingError(
                f"the fixture's folder {os.path.dirname(given) or '.'} does not exist "
                f"(fixture: {given}); create it first"
            )
        try:
            self._lock_fd = take_lock(self._lock_path)
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
        remove_stale_temps(self._path)
        if os.path.lexists(self._path):
            current = load_fixture(self._path, ceilings=self._ceilings)
        else:
            current = parse_fixture(b"", self._ceilings)
            atomic_write(self._path, b"")
        table = _table_of(current)
        if os.path.lexists(self._journal.path):
            current, table = self._recover(current, table)
        self._current = current
        self._table = table
        # What the fixture held before this session is answered, never recorded: the
        # cursors over it are the same semantics as replay's.
        self._cursors = Cursors(current)

    def _recover(
        self, current: FixtureSet, table: dict[str, _Value]
    ) -> tuple[FixtureSet, dict[str, _Value]]:
        records = pending_records(self._journal.path, current.fixture_set_hash)
        for request_hash, response in records:
            table[request_hash] = _append(table, request_hash, response)
        data = _serialise(table)
        try:
            current = parse_fixture(data, self._ceilings)
        except FixtureError as exc:
            reason = exc.reason
        else:
            if records:
                atomic_write(self._path, data)
            os.unlink(self._journal.path)
            fsync_dir(self._folder)
            return current, table
        raise RecordingError(
            f"the recording journal {self._journal.path} cannot be folded in ({reason})"
        )

    # -- answering ------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_owner(self) -> None:
        """``RecordingError`` in a fork child, ``ProviderClosed`` once released."""
        if os.getpid() != self._pid:
            raise RecordingError(
                f"this recording provider belongs to process {self._pid}, which opened it; "
                "a forked child cannot record into it (the parent owns the fixture, its "
                "journal and its lock): record in the parent, or open a record provider "
                "of the child's own on another fixture"
            )
        if self._closed:
            raise ProviderClosed("this provider was released")

    def _from_fixture(self, digest: _RequestHash) -> Any:
        """The fixture's answer for a held hash, ``_NOT_HELD`` otherwise."""
        with self._lock:
            self._check_owner()
            outcome = self._cursors.take(digest.value)
        if outcome is MISS:
            return _NOT_HELD
        if outcome is EXHAUSTED:
            raise SequenceExhausted(None if self._private else digest.value)
        return msgspec.json.decode(outcome)  # type: ignore[arg-type]

    def _next_fixture(
        self, request_hash: str, encoded: bytes
    ) -> tuple[dict[str, _Value], bytes, FixtureSet] | str:
        """The table, bytes and parsed fixture once ``encoded`` is recorded, or the
        reason the loader refuses them (its frame, holding every hash, is gone when the
        caller raises)."""
        value = _append(self._table, request_hash, encoded)
        table = {**self._table, request_hash: value}
        data = _serialise(table)
        try:
            after = parse_fixture(data, self._ceilings)
        except FixtureError as exc:
            return exc.reason
        return table, data, after

    def _record(self, digest: _RequestHash, response: dict[str, Any]) -> dict[str, Any]:
        """Persist a live answer (journal, then fixture) and return it as replay will."""
        try:
            encoded = canonical_json(response)
        except RequestError:
            encoded = b""
        if not encoded:
            raise RecordingError("the live response cannot be recorded (not canonical JSON)")
        with self._lock:
            if self._closed:
                raise ProviderClosed("the provider was released before the answer was recorded")
            built = self._next_fixture(digest.value, encoded)
            if not isinstance(built, str):
                table, data, after = built
                del built
                base = self._current.fixture_set_hash
                self._journal.append(base, digest.value, encoded, after.fixture_set_hash)
                self._table = table
                self._current = after
                self._recorded += 1
                try:
                    atomic_write(self._path, data)
                except OSError:
                    self._journal.keep = True
                    raise
                return msgspec.json.decode(encoded)  # type: ignore[no-any-return]
        raise RecordingError(f"the live response cannot be recorded: it would make {built}")

    def complete(self, request: RequestLike) -> dict[str, Any]:
        """The fixture's answer if the fixture held this request, else a recorded live one."""
        self._check_owner()
        digest, plain = _prepare(request)
        answer = self._from_fixture(digest)
        if answer is not _NOT_HELD:
            return answer  # type: ignore[no-any-return]
        recorded = self._record(digest, self._live.complete_plain(plain))
        self._sidecar.append_or_warn(digest.value, canonical_request(plain))
        return recorded

    async def acomplete(self, request: RequestLike) -> dict[str, Any]:
        """The async form of :meth:`complete`; file work runs in a worker thread."""
        self._check_owner()
        digest, plain = _prepare(request)
        answer = await asyncio.to_thread(self._from_fixture, digest)
        if answer is not _NOT_HELD:
            return answer  # type: ignore[no-any-return]
        response = await self._live.acomplete_plain(plain)
        recorded = await asyncio.to_thread(self._record, digest, response)
        await asyncio.to_thread(
            self._sidecar.append_or_warn, digest.value, canonical_request(plain)
        )
        return recorded

    def complete_many(self, requests: Iterable[RequestLike]) -> list[dict[str, Any] | ReplayError]:
        """``complete`` for each request in turn: one element per request, the response
        or the ``ReplayError`` that call raised (see ``Provider``)."""
        return complete_each(self.complete, requests)

    def snapshot(self) -> dict[str, Any]:
        """The current fixture's safe snapshot plus ``kind``, ``recorded``, the fixture
        counters and the live provider's; no payload, no hash, no path, no key."""
        live = self._live.snapshot()
        with self._lock:
            snap = self._current.snapshot()
            snap.update(
                kind="record",
                recorded=self._recorded,
                served=self._cursors.served,
                exhausted=self._cursors.exhausted_count,
                adapter=live["adapter"],
                model=live["model"],
                calls=live["calls"],
            )
        return snap

    # -- closing --------------------------------------------------------------------------

    def _unlock(self) -> None:
        if self._lock_fd >= 0:
            release_lock(self._lock_path, self._lock_fd)
            self._lock_fd = -1

    def release(self) -> None:
        """Finish the session: the fixture is already complete, so the journal goes;
        the lock is dropped and the live provider closed. Idempotent.

        In a fork child it only closes the child's copies of the journal and lock
        descriptors: the files, the lock and the connections are the parent's."""
        if os.getpid() != self._pid:
            # No lock taken: a parent thread may have held it at the fork.
            if not self._closed:
                self._closed = True
                self._journal.disown()
                if self._lock_fd >= 0:
                    os.close(self._lock_fd)
                    self._lock_fd = -1
            return
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._journal.finish()
            finally:
                self._unlock()
        self._live.release()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<RecordingProvider recorded={self._recorded} {state}>"
