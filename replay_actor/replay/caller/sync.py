"""``SyncLink``: a handle's blocking connections to its actor, one per thread.

Runs in: the caller.

Beside ``aio.AsyncLink`` (one connection per event loop), this is the other driver of
the local backend: it only moves bytes. What the bytes mean (frames, replies, errors)
is ``protocol.py``'s and ``state.py``'s.

- The first thread that calls uses the handle's first channel (the acquirer's bootstrap
  channel, or a copy's first connection), which also carries ``RELEASE``. Every other
  thread opens one of its own, so threads never queue behind each other's round trips;
  a thread's channel closes when the thread ends.
- A lock per channel keeps each request/reply exchange whole.
- Once a second thread has a channel, the handle is ``crowded``: a call then keeps the
  GIL through its short steps (its hash, ``_request.request_hash_in_turn``, and its
  write, ``held.send_now``) and lets go of it only to wait for the reply. Every
  release hands the GIL to another thread and costs the releasing one a sleep until it
  gets it back (docs/concurrency.md, "Threads on one handle").
- ``sole()`` says whether only the calling thread has ever called through the link:
  the handle keeps the actor on that thread's core only while it is (``io/cores.py``).
- An exchange whose framing is in doubt (cut half-way, late, or answered with a frame
  that is not a reply to it) closes that channel and breaks the handle (``ActorLost``);
  a goodbye ends it (``ProviderClosed``). Every wait is bounded by the socket timeouts.
- ``batch`` pipelines ``complete_many`` on this thread's channel (``pipeline.py``).

Errors are returned, never raised, so that no frame holding a request hash is on a
traceback (see ``handle.py``).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import Any, Final

from ..._errors import ActorLost, ProviderClosed, ReplayError, RequestError
from ..._request import RequestLike, request_hash
from ..core import protocol
from ..core.state import (
    DIED,
    GONE,
    LATE,
    LOST_EARLIER,
    UNEXPECTED,
    UNSOLICITED,
    HandleState,
    detached,
    fresh,
)
from ..io.wire import Channel
from . import dial
from .pipeline import Batch, pipeline

__all__ = [
    "SyncLink",
    "failed",
]

Result = dict[str, Any] | ReplayError
_GOODBYE: Final = protocol.GOODBYE


class _Slot:
    """One channel to the actor and the lock that keeps its exchanges whole."""

    __slots__ = ("__weakref__", "channel", "lock")

    def __init__(self, channel: Channel | None) -> None:
        self.channel = channel
        self.lock = threading.Lock()

    def close(self) -> None:
        channel, self.channel = self.channel, None
        if channel is not None:
            channel.close()


class SyncLink:
    """The blocking channels of one handle: a slot per thread, the first one shared."""

    __slots__ = (
        "_address",
        "_local",
        "_mutex",
        "_others",
        "_primary",
        "_shared",
        "_state",
        "_taken",
        "_timeout",
    )

    def __init__(
        self, address: bytes, timeout: float, state: HandleState, first: Channel | None
    ) -> None:
        self._address = address
        self._timeout = timeout
        self._state = state
        self._primary = _Slot(first)
        self._taken = False
        self._shared = False  # a thread other than the first one ever had a channel
        self._local = threading.local()
        self._others: weakref.WeakSet[_Slot] = weakref.WeakSet()
        self._mutex = threading.Lock()

    def sole(self) -> bool:
        """Whether no thread but this one has ever called through this link."""
        if self._shared:
            return False
        return not self._taken or getattr(self._local, "slot", None) is self._primary

    @property
    def crowded(self) -> bool:
        """Whether a thread other than the first one has a channel of its own."""
        return bool(self._others)

    @property
    def first_open(self) -> bool:
        """Whether the first channel is still open (an unreleased handle's warning)."""
        return self._primary.channel is not None

    def connect_first(self) -> None:
        """A copy's first connection, made at once: from then on the actor's death is its
        EOF (``ActorLost``) and the acquirer's release reaches it as a goodbye. Only a
        copy made after the acquisition ended finds nobody listening. Anything else (a
        busy listener, no fd to spare) is not an end: the first call connects again."""
        try:
            self._primary.channel = Channel.from_socket(dial.connect(self._address, self._timeout))
        except ProviderClosed:
            self._state.end(GONE)
        except ReplayError:
            pass

    # -- exchanges ----------------------------------------------------------------------

    def exchange(self, message: bytes, expected: frozenset[bytes]) -> bytes | ReplayError:
        """Send one framed request on this thread's channel and return its reply (one
        of ``expected``), or the error; never raises a ``ReplayError``."""
        slot: _Slot | None = getattr(self._local, "slot", None)
        if slot is None:
            claimed = self._claim()
            if isinstance(claimed, ReplayError):
                return claimed
            slot = claimed
        state = self._state
        with slot.lock:
            conn = slot.channel
            if conn is None or not state.usable():
                opened = self._reopen(slot)
                if isinstance(opened, ReplayError):
                    return opened
                conn = opened
            failure: BaseException | None = None
            reply = b""
            try:
                conn.send_frame(message, hold=bool(self._others))
                reply = conn.recv()
            except (EOFError, OSError) as exc:
                failure = exc
            if failure is None and reply[:1] in expected:
                return reply
            return self._failed(slot, conn, reply, failure)

    def _failed(
        self, slot: _Slot, conn: Channel, reply: bytes, failure: BaseException | None
    ) -> ReplayError:
        """Under ``slot``'s lock: what an exchange that got no expected reply means, its
        channel closed (never reused: its framing is in doubt, or the actor is gone)."""
        state = self._state
        if failure is None:
            slot.close()
            if reply == _GOODBYE:
                return state.end()
            # Not a reply to this request: every later one would be off by one.
            return state.lose(UNEXPECTED)
        if _released_notice(conn):
            slot.close()
            return state.end()
        # Half an exchange may be in flight: the framing is unknown, never reuse it.
        slot.close()
        reason = LATE if isinstance(failure, BlockingIOError) else DIED
        return state.lose(reason, failure)

    def batch(self, batch: Sequence[RequestLike], *, private: bool) -> list[Result]:
        """``complete_many``'s answers, pipelined on this thread's channel."""
        state = self._state
        results: list[Result | None] = [None] * len(batch)
        slot = self._slot()
        if isinstance(slot, ReplayError):
            return failed(batch, slot)
        with slot.lock:
            error = state.error()
            conn = slot.channel
            if error is None and conn is None:
                opened = self._open_channel()
                if isinstance(opened, ReplayError):
                    error = opened
                else:
                    conn = slot.channel = opened
            if error is None and conn is not None and conn.pending():
                # Only an unsolicited goodbye can wait here between exchanges.
                error = self._unsolicited(slot, conn)
            if error is not None or conn is None:
                return failed(batch, error or state.lose(LOST_EARLIER))
            answering = Batch(batch, results, private, state)
            in_step = pipeline(conn.fileno(), answering, self._timeout)
            if not in_step:
                slot.close()
        return results  # type: ignore[return-value]  # the pipeline filled every element

    # -- channels -----------------------------------------------------------------------

    def _slot(self) -> _Slot | ReplayError:
        """This thread's channel slot, claiming the first one or making a new one."""
        slot: _Slot | None = getattr(self._local, "slot", None)
        return slot if slot is not None else self._claim()

    def _claim(self) -> _Slot | ReplayError:
        with self._mutex:
            error = self._state.error()
            if error is not None:
                return error
            if not self._taken:
                self._taken = True
                slot = self._primary
            else:
                slot = _Slot(None)
                self._others.add(slot)
                self._shared = True
        self._local.slot = slot
        return slot

    def _reopen(self, slot: _Slot) -> Channel | ReplayError:
        """Under ``slot``'s lock: the handle's error, or a channel for a slot without one."""
        error = self._state.error()
        if error is not None:
            return error
        opened = self._open_channel()
        if not isinstance(opened, ReplayError):
            slot.channel = opened
        return opened

    def _open_channel(self) -> Channel | ReplayError:
        try:
            return Channel.from_socket(dial.connect(self._address, self._timeout))
        except ProviderClosed:
            # Nobody listens any more: the acquisition is over (released, or its owner
            # died). A copy cannot tell which, and there is nothing left to call.
            return self._state.end(GONE)
        except ActorLost as exc:
            self._state.broken = True
            failure: ReplayError = exc
        except ReplayError as exc:
            failure = exc  # a local shortage (no fd): the handle stays usable
        return detached(failure)

    def _unsolicited(self, slot: _Slot, conn: Channel) -> ReplayError:
        try:
            notice = conn.recv()
        except (EOFError, OSError):
            notice = b""
        slot.close()
        if notice == _GOODBYE:
            return self._state.end()
        return self._state.lose(UNSOLICITED)

    # -- lifecycle ----------------------------------------------------------------------

    def release(self, *, say_release: bool) -> None:
        """Close every channel; first, on the first one, ask the actor to end the
        acquisition (``say_release``: the acquirer's handle, not ended or broken).

        Each slot's lock waits for an exchange in flight (bounded by the timeout).
        """
        with self._mutex:
            others = list(self._others)
        with self._primary.lock:
            conn = self._primary.channel
            if conn is not None and say_release:
                try:
                    conn.send(protocol.RELEASE)
                    conn.recv()
                except (EOFError, OSError):
                    pass
            self._primary.close()
        for slot in others:
            with slot.lock:
                slot.close()

    def disown(self) -> None:
        """In a fork child: the channels belong to the parent, and the locks may have
        been held by threads that do not exist here. Closing only drops this process's
        reference: the parent's channels stay open."""
        for slot in [self._primary, *self._others]:
            slot.lock = threading.Lock()
            slot.close()
        self._others = weakref.WeakSet()
        self._local = threading.local()
        self._mutex = threading.Lock()
        self._taken = False
        self._shared = False


def failed(batch: Sequence[RequestLike], error: ReplayError) -> list[Result]:
    """Every element's error when a batch cannot be sent: as ``complete`` would say,
    ``RequestError`` first for an invalid request; one fresh error per element."""
    results: list[Result] = []
    for request in batch:
        try:
            request_hash(request)
        except RequestError as exc:
            results.append(detached(exc))
            continue
        results.append(fresh(error))
    return results


def _released_notice(conn: Channel) -> bool:
    """After a failed exchange: did the actor say goodbye (``Z``) before exiting?"""
    try:
        return conn.poll(0) and conn.recv() == _GOODBYE
    except (EOFError, OSError):
        return False
