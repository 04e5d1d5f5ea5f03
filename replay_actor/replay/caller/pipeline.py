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

__all__ = ["pipeline"]

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


def pipeline(  # noqa: PLR0912, PLR0915
    fd: int,
    requests: Sequence[RequestLike],
    results: list[Result | None],
    *,
    private: bool,
    timeout: float,
    state: HandleState,
) -> bool:
    """Answer ``requests`` into ``results`` over the connected stream ``fd``.

    Returns True if the connection is still in step (reusable), False if it failed
    (``state`` then says how, and every unanswered element holds the error).
    """
    count = len(requests)
    out = bytearray()
    buf = bytearray()
    pending: collections.deque[int] = collections.deque()
    shown: list[str | None] = [None] * count
    failure: Failure | None = None
    digest: str | None = None
    index = 0
    poller = select.poll()
    wait_ms = max(1, min(int(timeout * 1000) + 1, 2**31 - 1))
    os.set_blocking(fd, False)
    try:
        while index < count or pending:
            room = index < count and len(pending) < _IN_FLIGHT and len(out) < _OUT_LIMIT
            if room:
                stop = min(count, index + _CHUNK)
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
                digest = None
            broken: OSError | None = None
            if out:
                try:
                    del out[: os.write(fd, out)]
                except BlockingIOError:
                    pass
                except OSError as exc:
                    # Read before judging: the actor may have said goodbye first.
                    broken = exc
            data: bytes | None
            try:
                data = os.read(fd, _READ)
            except BlockingIOError:
                data = b"" if broken is not None else None
            except OSError as exc:
                failure = state.lost_failure(DIED, exc)
                break
            if data is not None:
                if not data:
                    cause = broken or EOFError("the actor closed the connection")
                    failure = state.lost_failure(DIED, cause)
                    break
                failure = _take(data, buf, pending, results, shown, state)
                if failure is not None:
                    break
                if broken is not None:
                    failure = state.lost_failure(DIED, broken)
                    break
                continue
            if room:
                continue  # more to hash and send before waiting
            poller.register(fd, select.POLLIN | (select.POLLOUT if out else 0))
            if not poller.poll(wait_ms):
                failure = state.lost_failure(LATE)
                break
    finally:
        digest = None
        out.clear()  # holds request hashes: never keep them past the call
    if failure is None:
        os.set_blocking(fd, True)
        return True
    for position in pending:
        results[position] = failure()
    for position in range(index, count):
        results[position] = failure()
    return False


def _take(  # noqa: PLR0917 - the pipeline's state, passed positionally on the hot path
    data: bytes,
    buf: bytearray,
    pending: collections.deque[int],
    results: list[Result | None],
    shown: list[str | None],
    state: HandleState,
) -> Failure | None:
    """Decode every whole reply in ``buf`` + ``data``; the failure, if the actor said
    goodbye or sent what nobody asked for."""
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
