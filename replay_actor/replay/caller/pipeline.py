"""``pipeline``: many ``complete`` calls from one thread, without a round trip each.

Runs in: the caller (``ReplayProvider.complete_many``).

The requests are hashed a few at a time and their frames written without waiting for
replies, while the replies that have arrived are read and decoded; the actor answers a
connection strictly in order, so the n-th reply belongs to the n-th request sent. Both
directions are non-blocking and interleaved (a ``poll`` waits only when there is
nothing else to do), so neither side can fill its socket buffer while the other waits
to write: a deadlock-free pipeline whatever the batch size. The number of requests in
flight is bounded, so the actor's unread replies to us stay bounded too.

Each element of the result is the response, or the ``ReplayError`` that ``complete``
would have raised for that request. An invalid request (``RequestError``) is never
sent. If the connection fails part-way, the framing is in doubt: the handle is broken
(or ended, if the actor said goodbye) and every unanswered element gets that error.
"""

from __future__ import annotations

import collections
import os
import select
from collections.abc import Sequence
from typing import Any, Final

from ..._errors import ReplayError, RequestError
from ..._request import RequestLike, request_hash
from ..core import protocol
from ..core.state import DIED, LATE, UNEXPECTED, Failure, HandleState, detached

__all__ = ["Batch", "pipeline"]

_READ: Final = 262144
#: Requests hashed between two looks at the socket: enough to amortise a write and a
#: read over many requests (each syscall costs as much as a few decodes), few enough
#: that the actor starts early and stays busy while we hash the rest.
_CHUNK: Final = 32
#: Requests in flight at most (bounds the actor's unread replies to this connection).
_IN_FLIGHT: Final = 256
_OUT_LIMIT: Final = 1 << 16
_complete_frame: Final = protocol.complete_frame
_Z: Final = protocol.GOODBYE[0]
_ANSWERS: Final = frozenset(b"".join(protocol.COMPLETE_REPLIES))

Result = dict[str, Any] | ReplayError


def pipeline(fd: int, batch: Batch, timeout: float) -> bool:
    """Answer ``batch``'s requests into its results over the connected stream ``fd``,
    each wait bounded by ``timeout``.

    Returns True if the connection is still in step (reusable), False if it failed
    (the batch's ``state`` then says how, and every unanswered element holds the error).
    """
    wait_ms = max(1, min(int(timeout * 1000) + 1, 2**31 - 1))
    os.set_blocking(fd, False)
    try:
        failure = _run(fd, batch, wait_ms)
    finally:
        batch.out.clear()  # holds request hashes: never keep them past the call
    if failure is None:
        os.set_blocking(fd, True)
        return True
    batch.fail(failure)
    return False


def _run(fd: int, batch: Batch, wait_ms: int) -> Failure | None:
    """The pipeline's loop: hash, write, read and decode, interleaved; the failure that
    ended it, or None when every request was answered."""
    state = batch.state
    out = batch.out
    pending = batch.pending
    poller = select.poll()
    while batch.index < batch.count or pending:
        room = batch.index < batch.count and len(pending) < _IN_FLIGHT and len(out) < _OUT_LIMIT
        if room:
            batch.hash_some()
        # Read before judging a failed write: the actor may have said goodbye first.
        broken = _write(fd, out) if out else None
        data: bytes | None
        try:
            data = os.read(fd, _READ)
        except BlockingIOError:
            data = b"" if broken is not None else None
        except OSError as exc:
            return state.lost_failure(DIED, exc)
        if data is not None:
            failure = _took(batch, data, broken)
            if failure is not None:
                return failure
            continue
        if room:
            continue  # more to hash and send before waiting
        poller.register(fd, select.POLLIN | (select.POLLOUT if out else 0))
        if not poller.poll(wait_ms):
            return state.lost_failure(LATE)
    return None


def _took(batch: Batch, data: bytes, broken: OSError | None) -> Failure | None:
    """Take what a read returned: the failure if the connection ended (EOF), the actor
    said goodbye or sent what nobody asked for, or the write before it had failed."""
    state = batch.state
    if not data:
        return state.lost_failure(DIED, broken or EOFError("the actor closed the connection"))
    failure = batch.take(data)
    if failure is None and broken is not None:
        failure = state.lost_failure(DIED, broken)
    return failure


def _write(fd: int, out: bytearray) -> OSError | None:
    """Write what the socket takes now; the error if the connection is broken."""
    try:
        del out[: os.write(fd, out)]
    except BlockingIOError:
        pass
    except OSError as exc:
        return exc
    return None


class Batch:
    """One ``complete_many`` call's state: its requests, where their answers go, the
    handle's private mode and fate; the requests hashed so far, the frames not yet
    written, the replies not yet whole, and which request each reply answers."""

    __slots__ = (
        "buf",
        "count",
        "index",
        "out",
        "pending",
        "private",
        "requests",
        "results",
        "shown",
        "state",
    )

    def __init__(
        self,
        requests: Sequence[RequestLike],
        results: list[Result | None],
        private: bool,
        state: HandleState,
    ) -> None:
        self.requests = requests
        self.results = results
        self.private = private
        self.state = state
        self.count = len(requests)
        self.index = 0  # the next request to hash
        self.out = bytearray()  # frames not yet written
        self.buf = bytearray()  # reply bytes not yet a whole frame
        self.pending: collections.deque[int] = collections.deque()  # sent, unanswered
        self.shown: list[str | None] = [None] * self.count  # the hash a miss may show

    def hash_some(self) -> None:
        """Hash up to ``_CHUNK`` more requests and queue their frames."""
        requests, results, shown = self.requests, self.results, self.shown
        out, pending, private = self.out, self.pending, self.private
        index = self.index
        stop = min(self.count, index + _CHUNK)
        digest: str | None = None
        try:
            while index < stop:
                try:
                    digest = request_hash(requests[index])
                except RequestError as exc:
                    results[index] = detached(exc)
                else:
                    out += _complete_frame(digest)
                    pending.append(index)
                    if not private:
                        shown[index] = digest
                index += 1
        finally:
            digest = None  # no request hash left in a frame's locals
            self.index = index

    def take(self, data: bytes) -> Failure | None:
        """Decode every whole reply in ``buf`` + ``data``; the failure, if the actor said
        goodbye or sent what nobody asked for."""
        buf, pending, results, shown, state = (
            self.buf,
            self.pending,
            self.results,
            self.shown,
            self.state,
        )
        buf += data
        spans, rest, _ = protocol.split_frames(buf)
        view = memoryview(buf)
        try:
            for start, stop in spans:
                kind = buf[start] if stop > start else -1
                if kind == _Z:
                    return state.ended_failure()
                if not pending or kind not in _ANSWERS:
                    return state.lost_failure(UNEXPECTED)
                position = pending.popleft()
                results[position] = protocol.decode_reply(view[start:stop], shown[position], state)
        finally:
            view.release()
        del buf[:rest]
        return None

    def fail(self, failure: Failure) -> None:
        """Every request not answered (sent or not) gets ``failure``'s error."""
        for position in self.pending:
            self.results[position] = failure()
        for position in range(self.index, self.count):
            self.results[position] = failure()
