"""Group commit: one thread per recorder writes the answers its callers hand over, many
per write and per ``fdatasync``, and wakes each caller once its answer is durable.

Runs in: the caller (the recorder's committer thread, started on its first answer).

A caller (a thread in ``complete``, a task in ``acomplete``) submits an ``Answer`` and
waits for it. The thread takes every answer waiting at once: under the journal's lock it
reads what other recorders appended (``JournalFile.lock``) into the ledger, checks each
answer against the ceilings with everything before it counted (``Ledger.admit``),
numbers the admitted ones and writes them with one ``pwrite``; then, the lock dropped,
one ``fdatasync`` makes the whole batch durable, and every caller is woken: with its
answer recorded, or with the ``RecordingError`` saying why it could not be. While one
batch is being synced the next one gathers, so the more callers wait, the more answers
share a sync. Then the batch's requests go to the request sidecar (one append; it is
made durable at release: losing it loses explanations, never answers).

A write or sync that fails (a full disk) breaks the committer: that batch and every
later answer fail with a ``RecordingError`` naming the cause, and the answers made
durable before stay recorded.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections import deque
from collections.abc import Callable

from .._errors import RecordingError
from ..files.sidecar import SidecarWriter
from .journal import Anchor, JournalFile, Record, create_journal, record_line
from .ledger import Ledger

__all__ = ["Answer", "Committer", "RequestHash"]


class RequestHash:
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


class Answer:
    """An answer to record (its hash, canonical response, and the request's canonical
    bytes for the sidecar) and the wait of the caller who gave it."""

    __slots__ = ("_event", "_future", "_loop", "digest", "error", "request", "response")

    def __init__(
        self,
        digest: RequestHash,
        response: bytes,
        request: bytes,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.digest = digest
        self.response = response
        self.request = request
        self.error: RecordingError | None = None
        self._loop = loop
        self._event: threading.Event | None = None
        self._future: asyncio.Future[None] | None = None
        if loop is None:
            self._event = threading.Event()
        else:
            self._future = loop.create_future()

    def __repr__(self) -> str:
        return "<answer to record>"

    def settle(self, error: RecordingError | None) -> None:
        """From the committer: the answer is durable (``error`` None) or refused."""
        self.error = error
        if self._event is not None:
            self._event.set()
            return
        try:
            assert self._loop is not None
            self._loop.call_soon_threadsafe(self._resolve)
        except RuntimeError:
            pass  # the caller's event loop is closed: nobody waits any more

    def _resolve(self) -> None:
        if self._future is not None and not self._future.done():
            self._future.set_result(None)

    def wait(self) -> None:
        """Block until settled; raise its ``RecordingError``."""
        assert self._event is not None
        self._event.wait()
        if self.error is not None:
            raise self.error

    async def await_settled(self) -> None:
        assert self._future is not None
        await self._future
        if self.error is not None:
            raise self.error


class Committer:
    """The recorder's writer thread (module doc). ``submit`` an answer, then ``wait`` or
    ``await_settled`` on it; ``close`` settles what was submitted and stops the thread."""

    def __init__(
        self,
        journal: JournalFile,
        ledger: Ledger,
        *,
        guard: threading.Lock,
        first_anchor: Callable[[], Anchor],
        sidecar: SidecarWriter,
        after_batch: Callable[[int], None],
    ) -> None:
        self._journal = journal
        self._ledger = ledger
        self._guard = guard  # the recorder's lock around the ledger
        self._first_anchor = first_anchor
        self._sidecar = sidecar
        self._after_batch = after_batch
        self._queue: deque[Answer] = deque()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._busy = False
        self._closing = False
        self._broken: str | None = None  # why the journal cannot be written any more
        # The journal handle is used by the writer thread and by ``catch_up``.
        self._io = threading.Lock()
        #: How many syncs made batches durable (a test reads it: answers share them).
        self.syncs = 0

    def submit(self, answer: Answer) -> None:
        with self._cond:
            if self._closing:
                raise RecordingError("the recording was closed before the answer was recorded")
            self._queue.append(answer)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="replay-actor-journal", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()

    def flush(self) -> None:
        """Wait until every answer submitted so far is settled."""
        with self._cond:
            while self._queue or self._busy:
                self._cond.wait()

    def close(self) -> None:
        """Settle what was submitted, then stop the thread. Idempotent."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                if not self._queue:
                    return
                batch = list(self._queue)
                self._queue.clear()
                self._busy = True
            try:
                self._commit(batch)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _commit(self, batch: list[Answer]) -> None:
        accepted: list[Answer] = []
        problem: str | None = self._broken
        if problem is None:
            try:
                with self._io:
                    accepted = self._write(batch)
                    if accepted:
                        self._journal.sync()
                        self.syncs += 1
            except RecordingError as exc:
                problem = str(exc)
                accepted = []
            except OSError as exc:
                problem = self._broken = (
                    "the recording journal could not be written "
                    f"({os.strerror(exc.errno) if exc.errno else type(exc).__name__}); "
                    "the answers recorded before are kept"
                )
                accepted = []
        # Each caller gets an error of its own, made here, outside any ``except``: one
        # raised in this thread would carry this thread's frames (which hold every
        # answer's hash) into the caller's traceback (docs/privacy.md).
        for answer in batch:
            answer.settle(RecordingError(problem) if problem is not None else answer.error)
        if accepted:
            self._sidecar.append_many_or_warn(
                [(answer.digest.value, answer.request) for answer in accepted]
            )
            self._after_batch(self._journal.size)

    def _write(self, batch: list[Answer]) -> list[Answer]:
        """Under the journal's lock: fold the others' records, admit, number and write
        this batch's answers; the admitted ones (each refused one has its error)."""
        journal = self._journal
        if not journal.attached and not journal.attach():
            if not self._any_admissible(batch):
                return []  # a refused answer changes nothing: not even a journal appears
            create_journal(journal.path, self._first_anchor())
            if not journal.attach():
                raise RecordingError(f"the recording journal {journal.path} cannot be created")
        others = journal.lock()
        try:
            accepted: list[Answer] = []
            lines: list[bytes] = []
            with self._guard:
                ledger = self._ledger
                for record in others:
                    ledger.fold(record.request_hash, record.response)
                number = journal.seen
                for answer in batch:
                    answer.error = None
                    reason = ledger.admit(answer.digest.value, answer.response)
                    if reason is not None:
                        answer.error = _refused(reason)
                        continue
                    number += 1
                    ledger.fold(answer.digest.value, answer.response)
                    lines.append(record_line(Record(number, answer.digest.value, answer.response)))
                    accepted.append(answer)
            if lines:
                journal.append(b"".join(lines))
                journal.seen = number
            return accepted
        finally:
            journal.unlock()

    def _any_admissible(self, batch: list[Answer]) -> bool:
        """Before there is a journal: False if every answer is refused on its own (each
        then has its error); the batch is judged for good under the journal's lock."""
        with self._guard:
            for answer in batch:
                reason = self._ledger.admit(answer.digest.value, answer.response)
                if reason is None:
                    return True
                answer.error = _refused(reason)
        return False

    def catch_up(self) -> None:
        """Fold what the other recorders appended into the ledger now (for a snapshot
        that should count it), under the journal's lock."""
        journal = self._journal
        with self._io:
            if not journal.attached and not journal.attach():
                return
            others = journal.lock()
            try:
                with self._guard:
                    for record in others:
                        self._ledger.fold(record.request_hash, record.response)
            finally:
                journal.unlock()


def _refused(reason: str) -> RecordingError:
    return RecordingError(f"the live response cannot be recorded: it would make {reason}")
