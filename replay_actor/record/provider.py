"""The recording provider: replay what the fixture holds, ask the live model for the rest.

A request whose hash the fixture (with its journal) held when the session opened is
answered from it, with the usual sequence semantics. Every other call goes to the live
provider; its response is appended to that hash's entry (a repeat turns a single
``response`` into a ``responses`` sequence) and returned exactly as it will be replayed
(canonical JSON, decoded afresh).

Per recorded answer (docs/manifest.md, "Guarantees and crash recovery")::

    1. check it against the ceilings, with every answer before it counted
       (``ledger.py``: constant time, never the whole table again)
    2. append it to FIXTURE.journal and fdatasync, many answers per sync
       (``committer.py``, ``journal.py``)          <- the answer is durable; return it
    3. its request to FIXTURE.requests.jsonl, a batch per write (the sidecar)

and, now and then, the journal is folded into the fixture, which is replaced atomically
(``compaction.py``): at release (by the last recorder out), at ``compact()`` (``run``
calls it on SIGTERM and SIGINT), when the journal has grown past the fixture's size, and
when an open finds a crashed session's journal. The fixture on disk is a valid fixture
at every moment; it lacks the journal's latest answers until the next compaction.

Several recorders (threads, processes) may record one fixture at once: each holds the
fixture's ``.lock`` shared for its session (``files/durable.py``, ``SessionLock``); they
share the journal, numbering answers in the order they arrive, and each reads the
others' answers before checking its own against the ceilings. A recorder answers from
what the fixture held when it opened, never from what another recorder records since.

A session belongs to the process that opened it. In a fork child the copy is disowned:
every call raises ``RecordingError``, and its ``release()`` only closes the child's copies
of the descriptors (docs/manifest.md, "Recording and fork").

In private mode (``data = "private"``) the request hash never appears in a traceback:
the frames of a call hold it in a ``RequestHash`` box whose ``repr`` does not show it.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
import warnings
import weakref
from collections.abc import Iterable
from typing import Any, Final

import msgspec

from .._canonical import canonical_json
from .._errors import (
    ProviderClosed,
    RecordingError,
    ReplayError,
    RequestError,
    SequenceExhausted,
)
from .._interface import ReleasedOnExit, complete_each
from .._request import RequestLike
from ..adapters.live import LiveProvider, prepare_request
from ..files.durable import (
    SessionLock,
    create_empty,
    fsync_dir,
    real_file,
    remove_stale_temps,
)
from ..files.sidecar import SidecarWriter
from ..fixture import EXHAUSTED, MISS, Ceilings, Cursors, parse_fixture, read_fixture_bytes
from .committer import Answer, Committer, RequestHash
from .compaction import FileFacts, compact, facts_of, fold_legacy, identity
from .journal import Anchor, JournalContent, JournalFile, changed_outside, is_legacy, pending
from .ledger import Ledger

__all__ = ["COMPACT_BYTES_VARIABLE", "RecordingProvider"]

_NOT_HELD: Final = object()
#: The environment variable that sets the journal's size, in bytes, past which it is
#: compacted while recording (at least; a fixture larger than it is the bound instead).
COMPACT_BYTES_VARIABLE: Final = "REPLAY_ACTOR_COMPACT_BYTES"
_COMPACT_BYTES: Final = 8 << 20


#: The sessions this process opened and has not released: released at interpreter exit,
#: so that an integration whose framework never closes its model (Inspect's command
#: line, a script that forgot ``release()``) still folds its answers into the fixture.
_OPEN: Final[weakref.WeakSet[RecordingProvider]] = weakref.WeakSet()


@atexit.register
def _release_at_exit() -> None:
    for provider in list(_OPEN):
        if provider._pid == os.getpid():  # a fork child's copies are the parent's
            try:
                provider.release()
            except Exception as exc:  # every session gets its turn
                warnings.warn(
                    f"a recording session was not released at exit: {exc}",
                    RuntimeWarning,
                    stacklevel=1,
                )


def _compact_bytes() -> int:
    value = os.environ.get(COMPACT_BYTES_VARIABLE, "")
    return int(value) if value.isdigit() and int(value) > 0 else _COMPACT_BYTES


def _prepare(request: RequestLike) -> tuple[RequestHash, dict[str, Any], bytes]:
    """The request's hash, its plain form for the live adapter, and its canonical bytes
    for the request sidecar (the bytes hashed: one walk of the request for all three)."""
    value, plain, canonical = prepare_request(request)
    return RequestHash(value), plain, canonical


def _encoded(response: dict[str, Any]) -> bytes:
    try:
        encoded = canonical_json(response)
    except RequestError:
        encoded = b""
    if not encoded:
        raise RecordingError("the live response cannot be recorded (not canonical JSON)")
    return encoded


class RecordingProvider(ReleasedOnExit):
    """Answers from the fixture when it can, records live answers when it cannot.

    Same interface as every provider (``complete``, ``acomplete``, ``snapshot``,
    ``release``, context manager, ``closed``), plus ``compact()``. Thread-safe: one lock
    guards the cursors, another the ledger; the live call and the journal's I/O run
    outside both.
    """

    def __init__(
        self,
        fixture: str | os.PathLike[str],
        live: LiveProvider,
        *,
        private: bool = False,
        ceilings: Ceilings | None = None,
    ) -> None:
        # Through a symbolic link: the target's lock, journal and replacement (add's).
        self._path = real_file(fixture)
        self._folder = os.path.dirname(self._path)
        self._journal_path = self._path + ".journal"
        # The request behind each recorded hash, for explaining later misses: beside the
        # name the fixture was given, where explain and the miss reporter look for it.
        self._sidecar = SidecarWriter(os.path.abspath(os.fspath(fixture)))
        self._live = live
        self._private = private
        self._ceilings = Ceilings() if ceilings is None else ceilings
        self._lock = threading.Lock()  # the cursors, ``_closed``, ``_recorded``
        self._compacting = threading.Lock()  # one compaction at a time in this process
        self._compactor: threading.Thread | None = None
        self._closed = False
        self._recorded = 0
        #: The process that owns the session (a fork child's copy is disowned).
        self._pid = os.getpid()
        self._session = SessionLock(self._path + ".lock")
        if not os.path.isdir(self._folder):
            live.release()
            given = os.fspath(fixture)
            raise RecordingError(
                f"the fixture's folder {os.path.dirname(given) or '.'} does not exist "
                f"(fixture: {given}); create it first"
            )
        try:
            self._session.acquire(self._recover)
        except BaseException:
            live.release()
            raise
        try:
            self._open()
        except BaseException:
            self._session.release(lambda: None)
            live.release()
            raise
        _OPEN.add(self)

    # -- opening and recovery -----------------------------------------------------------

    def _recover(self) -> None:
        """Alone with the fixture: remove what a crash left (temporary files), create
        a missing fixture, and fold a crashed session's journal into the fixture."""
        remove_stale_temps(self._path)
        create_empty(self._path)
        journal = self._journal_path
        if not os.path.lexists(journal):
            return
        with open(journal, "rb") as file:
            legacy = is_legacy(file.readline())
        if legacy:
            fold_legacy(self._path, journal, self._ceilings)
        else:
            compact(self._path, journal, self._ceilings, None)
        os.unlink(journal)
        fsync_dir(self._folder)

    def _open(self) -> None:
        """Load the fixture and the journal's records it lacks (under the shared lock,
        while other recorders may compact: retried until the pair read is consistent)."""
        create_empty(self._path)
        while True:
            loaded = self._load()
            if loaded is not None:
                break
        facts, ledger, journal = loaded
        self._facts: FileFacts | None = facts
        self._ledger = ledger
        self._journal = journal
        # What the fixture and journal held when the session opened is answered, never
        # recorded: the cursors over it are the same semantics as replay's.
        self._cursors = Cursors(ledger.state())
        first = Anchor(facts.digest, 0)
        self._committer = Committer(
            journal,
            ledger,
            first_anchor=lambda: first,
            sidecar=self._sidecar,
            after_batch=self._maybe_compact,
        )

    def _load(self) -> tuple[FileFacts, Ledger, JournalFile] | None:
        before = os.stat(self._path)
        data = read_fixture_bytes(self._path, self._ceilings.max_file_bytes)
        st = os.stat(self._path)
        if identity(st) != identity(before):
            return None  # replaced while we read it: read it again
        base = parse_fixture(data, self._ceilings)
        facts = facts_of(data, st, base.__contains__, len(base))
        size = len(data) + (0 if facts.ends_with_newline else 1)
        del data
        journal = JournalFile(self._journal_path)
        todo: list[Any] = []
        if journal.attach():
            with open(self._journal_path, "rb") as file:
                if is_legacy(file.readline()):
                    journal.detach()
                    raise RecordingError(
                        f"the recording journal {self._journal_path} was written by an "
                        "earlier version while other recorders are recording; open the "
                        "record manifest when no other recorder is, to fold it in"
                    )
            records = journal.lock()
            try:
                if identity(os.stat(self._path)) != facts.identity:
                    journal.detach()
                    return None  # a compaction replaced the fixture meanwhile
                found = pending(JournalContent(journal.anchors, records), facts.digest)
            finally:
                if journal.attached:
                    journal.unlock()
            if found is None:
                journal.detach()
                raise changed_outside(self._journal_path)
            todo = found
        ledger = Ledger(base, size, self._ceilings)
        for record in todo:
            ledger.fold(record.request_hash, record.response)
        return facts, ledger, journal

    # -- answering ------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_owner(self) -> None:
        """``RecordingError`` in a fork child, ``ProviderClosed`` once released."""
        if os.getpid() != self._pid:
            raise RecordingError(
                f"this recording provider belongs to process {self._pid}, which opened it; "
                "a forked child cannot record into it (the parent owns its session: the "
                "journal's writer and its lock): record in the parent, or open a record "
                "provider of the child's own"
            )
        if self._closed:
            raise ProviderClosed("this provider was released")

    def _from_fixture(self, digest: RequestHash) -> Any:
        """The fixture's answer for a held hash, ``_NOT_HELD`` otherwise."""
        with self._lock:
            self._check_owner()
            outcome = self._cursors.take(digest.value)
        if outcome is MISS:
            return _NOT_HELD
        if outcome is EXHAUSTED:
            raise SequenceExhausted(None if self._private else digest.value)
        return msgspec.json.decode(outcome)  # type: ignore[arg-type]

    def _submit(self, answer: Answer) -> None:
        with self._lock:
            if self._closed:
                raise ProviderClosed("the provider was released before the answer was recorded")
            self._committer.submit(answer)

    def _recorded_one(self, encoded: bytes) -> dict[str, Any]:
        with self._lock:
            self._recorded += 1
        return msgspec.json.decode(encoded)  # type: ignore[no-any-return]

    def complete(self, request: RequestLike) -> dict[str, Any]:
        """The fixture's answer if the fixture held this request, else a recorded live one."""
        self._check_owner()
        digest, plain, canonical = _prepare(request)
        answer = self._from_fixture(digest)
        if answer is not _NOT_HELD:
            return answer  # type: ignore[no-any-return]
        encoded = _encoded(self._live.complete_plain(plain))
        pending_answer = Answer(digest, encoded, canonical)
        self._submit(pending_answer)
        pending_answer.wait()
        return self._recorded_one(encoded)

    async def acomplete(self, request: RequestLike) -> dict[str, Any]:
        """The async form of :meth:`complete`: the journal's writer wakes this task, no
        worker thread is taken per call."""
        self._check_owner()
        digest, plain, canonical = _prepare(request)
        answer = self._from_fixture(digest)
        if answer is not _NOT_HELD:
            return answer  # type: ignore[no-any-return]
        encoded = _encoded(await self._live.acomplete_plain(plain))
        pending_answer = Answer(digest, encoded, canonical, asyncio.get_running_loop())
        self._submit(pending_answer)
        await pending_answer.await_settled()
        return self._recorded_one(encoded)

    def complete_many(self, requests: Iterable[RequestLike]) -> list[dict[str, Any] | ReplayError]:
        """``complete`` for each request in turn: one element per request, the response
        or the ``ReplayError`` that call raised (see ``Provider``)."""
        return complete_each(self.complete, requests)

    def snapshot(self) -> dict[str, Any]:
        """The fixture's safe snapshot as the fixture and its journal hold it (what the
        next compaction will write) plus ``kind``, ``recorded``, the fixture counters
        and the live provider's; no payload, no hash, no path, no key."""
        live = self._live.snapshot()
        if os.getpid() == self._pid and not self._closed:
            self._committer.catch_up()
        with self._ledger.lock:
            state = self._ledger.state()
        snap = state.snapshot()  # the set hash, outside the lock: the writer goes on
        with self._lock:
            snap.update(
                kind="record",
                recorded=self._recorded,
                served=self._cursors.served,
                exhausted=self._cursors.exhausted_count,
                adapter=live["adapter"],
                model=live["model"],
                calls=live["calls"],
                retries=live.get("retries", 0),
            )
        return snap

    # -- compaction ---------------------------------------------------------------------

    def compact(self) -> None:
        """Fold the journal into the fixture now (``run`` does on SIGTERM and SIGINT):
        waits for the answers being written, then compacts. A journal that cannot be
        folded is kept, with a warning. Does nothing once released."""
        if os.getpid() != self._pid or self._closed:
            return
        self._committer.flush()
        self._compact_once()

    def _compact_once(self) -> None:
        with self._compacting:
            try:
                self._facts = compact(self._path, self._journal_path, self._ceilings, self._facts)
            except (RecordingError, OSError) as exc:
                warnings.warn(
                    f"the recording journal was not folded into the fixture ({exc}); it is "
                    "kept, and every answer in it is safe",
                    RuntimeWarning,
                    stacklevel=2,
                )

    def _maybe_compact(self, journal_size: int) -> None:
        """After a batch (in the writer thread): start a compaction in the background
        once the journal is larger than the fixture (and the lower bound)."""
        if journal_size < _compact_bytes():
            return
        try:
            if journal_size < os.stat(self._path).st_size:
                return
        except OSError:
            return
        with self._lock:
            if self._closed or (self._compactor is not None and self._compactor.is_alive()):
                return
            self._compactor = threading.Thread(
                target=self._compact_once, name="replay-actor-compaction", daemon=True
            )
            self._compactor.start()

    # -- closing --------------------------------------------------------------------------

    def _fold_and_remove(self) -> None:
        """The last recorder out: fold the journal into the fixture and remove it."""
        if not os.path.lexists(self._journal_path):
            return
        try:
            compact(self._path, self._journal_path, self._ceilings, self._facts)
        except (RecordingError, OSError) as exc:
            warnings.warn(
                f"the recording journal was not folded into the fixture at release ({exc}); "
                "it is kept, and the next open of the record manifest folds it",
                RuntimeWarning,
                stacklevel=4,
            )
            return
        os.unlink(self._journal_path)
        fsync_dir(self._folder)

    def release(self) -> None:
        """Finish the session: every answer submitted is written, the request sidecar
        made durable, the journal folded into the fixture by the last recorder out (and
        removed), the lock dropped and the live provider closed. Idempotent.

        In a fork child it only closes the child's copies of the journal and lock
        descriptors: the files, the lock and the connections are the parent's."""
        if os.getpid() != self._pid:
            # No lock taken: a parent thread may have held it at the fork.
            if not self._closed:
                self._closed = True
                self._journal.detach()
                self._session.disown()
            return
        with self._lock:
            if self._closed:
                return
            self._closed = True
            compactor = self._compactor
        try:
            self._committer.close()
            if compactor is not None:
                compactor.join()
            try:
                self._sidecar.sync()
            except (ReplayError, OSError) as exc:
                warnings.warn(f"the request sidecar was not synced: {exc}", RuntimeWarning, 2)
            self._journal.detach()
            self._session.release(self._fold_and_remove)
        finally:
            self._live.release()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<RecordingProvider recorded={self._recorded} {state}>"
