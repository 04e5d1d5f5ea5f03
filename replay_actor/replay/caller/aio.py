"""``AsyncLink``: one event loop's connection to the actor, with many requests in flight.

Runs in: the caller, on an asyncio event loop (never in a worker thread).

Every task of one loop that calls ``acomplete`` on a handle shares this one
connection. A request is written the moment it is made, without waiting for the
replies to earlier ones; the actor answers each connection's requests strictly in
order, so a FIFO of futures pairs each reply with its request::

    task A --frame A--+                                  +--> future A (reply 1)
    task B --frame B--+--> socket --> actor --> socket --+--> future B (reply 2)
    task C --frame C--+     (non-blocking)        (one reader: loop.add_reader)

- Cancelling a task whose request is in flight only cancels its future: the reply
  still arrives, is read and dropped, and the element it took counts as served. The
  connection stays in step.
- Each request must be answered within the handle's timeout; one timer watches the
  oldest request (re-armed, not recreated, per request). A late reply breaks the
  connection and the handle (``ActorLost``) and fails every request in flight.
- An unsolicited goodbye (``Z``) from the actor fails them with ``ProviderClosed``.
- A full listen backlog is retried from a timer, never by blocking the loop.
- Replies are read in place into one receive buffer the link keeps (up to 16 MiB of
  room), each reply copied out once: a buffer grown and dropped for every large reply
  made the kernel hand it fresh pages each time (an embeddings reply of 500 KB: ~0.9 ms
  of reading before, ~0.1 ms now).
"""

from __future__ import annotations

import asyncio
import collections
import os
import threading
import weakref
from typing import Final

from ..._errors import ReplayError
from ..core import protocol
from ..core.state import DIED, LATE, UNEXPECTED, UNSOLICITED, Failure, HandleState, detached, fresh
from ..core.state import GONE as _HAS_ENDED
from .dial import GONE, RETRY, new_socket, resource_error

__all__ = ["AsyncLink", "LoopLinks"]

_READ: Final = 262144
#: The most receive-buffer room a link keeps once its frames are read (16 MiB).
_KEEP: Final = 16 * 1024 * 1024
_GOODBYE: Final = protocol.GOODBYE
_ANSWERS: Final = protocol.COMPLETE_REPLIES
#: Frames buffered before a write even within one loop iteration: a write costs
#: about as much as the actor's whole work for a frame (it wakes the actor), so a few
#: dozen frames share one, yet the actor starts on them while we hash the rest.
FLUSH_EVERY = 32
_FIRST_DELAY: Final = 0.0005
_LAST_DELAY: Final = 0.05


class AsyncLink:
    """One loop's connection: a write buffer, a FIFO of futures, one reader."""

    __slots__ = (
        "__weakref__",
        "_address",
        "_connect_deadline",
        "_delay",
        "_failure",
        "_fd",
        "_flush_due",
        "_have",
        "_in",
        "_loop",
        "_out",
        "_state",
        "_timeout",
        "_timer",
        "_unsent",
        "_waiters",
        "_writer_on",
        "transient",
    )

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        address: bytes,
        timeout: float,
        state: HandleState,
    ) -> None:
        self._loop: weakref.ref[asyncio.AbstractEventLoop] = weakref.ref(loop)
        self._address = address
        self._timeout = timeout
        self._state = state
        self._fd = -1
        self._out = bytearray()
        self._in = bytearray()
        self._have = 0  # bytes of ``_in`` received and not yet cut into replies
        self._waiters: collections.deque[tuple[asyncio.Future[bytes], float]] = collections.deque()
        self._timer: asyncio.TimerHandle | None = None
        self._writer_on = False
        self._flush_due = False
        self._unsent = 0
        self._failure: Failure | None = None
        #: True when the link failed for a local reason (no fd): the handle drops it
        #: and the next call tries again.
        self.transient = False
        self._delay = _FIRST_DELAY
        self._connect_deadline = loop.time() + timeout
        self._connect(loop)

    # -- the caller's side ------------------------------------------------------------

    @property
    def dead(self) -> bool:
        return self._failure is not None

    def submit(self, frame: bytes, loop: asyncio.AbstractEventLoop) -> asyncio.Future[bytes]:
        """Send ``frame`` (now, or once connected); the future gets its reply. ``loop``
        is the running loop, this link's."""
        future: asyncio.Future[bytes] = loop.create_future()
        if self._failure is not None:
            future.set_exception(self._failure())
            return future
        self._waiters.append((future, loop.time() + self._timeout))
        self._out += frame
        self._unsent += 1
        if self._fd >= 0 and not self._writer_on:
            if self._unsent >= FLUSH_EVERY:
                # Never so many unsent that the actor idles while we hash the rest...
                self._write_now()
            elif not self._flush_due:
                # ...but the frames of one loop iteration go out together: a write
                # wakes the actor, and one wake-up for many frames costs less.
                self._flush_due = True
                loop.call_soon(self._flush)
        if self._timer is None and self._waiters:  # (a failed write emptied them)
            self._timer = loop.call_at(self._waiters[0][1], self._on_timer)
        return future

    def close(self, failure: Failure) -> None:
        """Close from the loop's own thread: fail what is in flight with ``failure``."""
        self._fail(failure)

    def close_from_anywhere(self, failure: Failure) -> None:
        """Close from any thread: on the loop's thread if it runs elsewhere."""
        loop = self._loop()
        if loop is not None and loop.is_running() and not _on(loop):
            try:
                loop.call_soon_threadsafe(self._fail, failure)
                return
            except RuntimeError:
                pass  # the loop closed in between: nobody selects on our fd any more
        self._fail(failure)

    def disown(self) -> None:
        """In a fork child: drop our copy of the parent's socket, touch nothing else."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)
        self._failure = self._failure or _after_fork

    # -- connecting ---------------------------------------------------------------------

    def _connect(self, loop: asyncio.AbstractEventLoop) -> None:
        sock = new_socket()  # ReplayError (no fd) goes to the caller as is
        try:
            sock.setblocking(False)
            sock.connect(self._address)
        except OSError as exc:
            sock.close()
            self._connect_failed(loop, exc)
            return
        self._fd = sock.detach()
        loop.add_reader(self._fd, self._on_readable)
        self._write_now()  # what callers sent while we were connecting

    def _connect_failed(self, loop: asyncio.AbstractEventLoop, exc: OSError) -> None:
        code = exc.errno
        if code in GONE:
            self._fail(self._state.ended_failure(_HAS_ENDED))
        elif code not in RETRY:
            self.transient = True
            shortage = resource_error(exc)
            self._fail(lambda: fresh(shortage))
        elif loop.time() >= self._connect_deadline:
            self._lose("did not accept a connection in time", exc)
        else:
            loop.call_later(self._delay, self._retry)
            self._delay = min(self._delay * 2, _LAST_DELAY)

    def _retry(self) -> None:
        loop = self._loop()
        if loop is None or self._failure is not None:
            return
        try:
            self._connect(loop)
        except ReplayError as exc:
            error = exc
        else:
            return
        self.transient = True
        self._fail(lambda: fresh(error))

    # -- the loop's callbacks -------------------------------------------------------------

    def _flush(self) -> None:
        self._flush_due = False
        self._write_now()

    def _write_now(self) -> None:
        """Write what is buffered; let the loop wait for room if the socket is full."""
        self._unsent = 0
        if self._fd < 0 or not self._out or self._writer_on:
            return
        try:
            written = os.write(self._fd, self._out)
        except BlockingIOError:
            written = 0
        except OSError as exc:
            self._write_failed(exc)
            return
        del self._out[:written]
        loop = self._loop()
        if self._out and loop is not None:
            self._writer_on = True
            loop.add_writer(self._fd, self._on_writable)

    def _on_writable(self) -> None:
        try:
            written = os.write(self._fd, self._out)
        except BlockingIOError:
            return
        except OSError as exc:
            self._write_failed(exc)
            return
        del self._out[:written]
        if not self._out:
            self._writer_on = False
            loop = self._loop()
            if loop is not None:
                loop.remove_writer(self._fd)

    def _write_failed(self, exc: OSError) -> None:
        # The actor may have said goodbye before it closed: read that first, so a
        # release by the acquirer is reported as such, not as a lost actor.
        self._on_readable()
        if self._failure is None:
            self._lose(DIED, exc)

    def _on_readable(self) -> None:
        buf = self._room()
        have = self._have
        view = memoryview(buf)[have:]
        try:
            got = os.readv(self._fd, [view])
        except BlockingIOError:
            return
        except OSError as exc:
            self._lose(DIED, exc)
            return
        finally:
            view.release()
        if not got:
            self._lose(DIED, EOFError("the actor closed the connection"))
            return
        have += got
        spans, rest, _ = protocol.split_frames(buf, end=have)
        with memoryview(buf) as whole:  # (released before the buffer may move)
            broken = self._resolve(whole, spans)
        if broken:
            return
        if rest < have:
            buf[: have - rest] = buf[rest:have]  # the unfinished tail moves to the front
        self._have = have - rest

    def _resolve(self, whole: memoryview, spans: list[tuple[int, int]]) -> bool:
        """Hand each reply in ``whole`` at ``spans`` to its request's future, in order;
        True if the link failed on the way (a goodbye, a frame that answers nothing)."""
        popleft = self._waiters.popleft
        for start, stop in spans:
            payload = bytes(whole[start:stop])
            if payload[:1] not in _ANSWERS:
                if payload == _GOODBYE:
                    self._fail(self._state.ended_failure())
                else:
                    # Not a reply to a request: every later one would be off by one.
                    self._lose(UNEXPECTED if self._waiters else UNSOLICITED, None)
                return True
            try:
                future = popleft()[0]
            except IndexError:
                self._lose(UNSOLICITED, None)
                return True
            if not future.done():  # a cancelled caller's reply is read and dropped
                future.set_result(payload)
        return False

    def _room(self) -> bytearray:
        """The receive buffer, with room for a read and for the rest of the frame whose
        head is in. It only grows, up to ``_KEEP``: a buffer made afresh for each large
        reply costs its pages afresh each time (a fault per 4 KiB page, ~0.8 ms for a
        500 KB reply on a VM), where a kept one is written in place."""
        buf, have = self._in, self._have
        if have == 0 and len(buf) > _KEEP:
            buf = self._in = bytearray()  # one huge reply: its room is not kept
        want = _READ
        if have >= 4:
            # Room for the frame's rest, but never more than _KEEP ahead of the bytes
            # that came: what a frame announces is not yet what it holds.
            want = max(want, min(4 + protocol.payload_size(buf) - have, _KEEP))
        if len(buf) - have < want:
            buf += bytes(have + want - len(buf))
        return buf

    def _on_timer(self) -> None:
        self._timer = None
        loop = self._loop()
        if not self._waiters or loop is None or self._failure is not None:
            return
        deadline = self._waiters[0][1]
        if loop.time() >= deadline:
            self._lose(LATE, None)
        else:
            self._timer = loop.call_at(deadline, self._on_timer)

    # -- failing --------------------------------------------------------------------------

    def _lose(self, reason: str, cause: BaseException | None) -> None:
        self._fail(self._state.lost_failure(reason, cause))

    def _fail(self, failure: Failure) -> None:
        if self._failure is None:
            self._failure = failure
        fd, self._fd = self._fd, -1
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        if fd >= 0:
            loop = self._loop()
            if loop is not None and not loop.is_closed():
                loop.remove_reader(fd)
                if self._writer_on:
                    loop.remove_writer(fd)
            self._writer_on = False
            os.close(fd)
        self._out.clear()  # may hold request hashes: never keep them past the link
        waiters, self._waiters = self._waiters, collections.deque()
        for future, _ in waiters:
            if not future.done():
                future.set_exception(failure())

    def __del__(self) -> None:
        fd, self._fd = getattr(self, "_fd", -1), -1
        if fd >= 0:
            os.close(fd)


class LoopLinks:
    """A handle's ``AsyncLink`` per event loop, made on first use (or after a local
    failure); a link whose loop has closed is freed when another is made."""

    __slots__ = ("_address", "_links", "_mutex", "_state", "_timeout")

    def __init__(self, address: bytes, timeout: float, state: HandleState) -> None:
        self._address = address
        self._timeout = timeout
        self._state = state
        self._links: dict[asyncio.AbstractEventLoop, AsyncLink] = {}
        self._mutex = threading.Lock()

    def get(self, loop: asyncio.AbstractEventLoop) -> AsyncLink | ReplayError:
        """This loop's link, or the error a call would raise now (returned)."""
        state = self._state
        link = self._links.get(loop)
        if link is not None and state.usable() and not (link.transient and link.dead):
            return link
        with self._mutex:
            error = state.error()
            if error is not None:
                return error
            link = self._links.get(loop)
            if link is not None and not (link.transient and link.dead):
                return link
            for other, stale in list(self._links.items()):
                if other.is_closed():  # its loop is gone: free the descriptor now
                    del self._links[other]
                    stale.close(self._state.error_factory())
            try:
                link = AsyncLink(loop, self._address, self._timeout, state)
            except ReplayError as exc:
                failure = exc
            else:
                self._links[loop] = link
                return link
        return detached(failure)

    def __len__(self) -> int:
        return len(self._links)

    def close_all(self, failure: Failure) -> None:
        """Close every link (from any thread), failing what is in flight with ``failure``."""
        with self._mutex:
            links = list(self._links.values())
            self._links.clear()
        for link in links:
            link.close_from_anywhere(failure)

    def disown(self) -> None:
        """In a fork child: the links' sockets are the parent's."""
        for link in self._links.values():
            link.disown()
        self._links = {}
        self._mutex = threading.Lock()


def _on(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _after_fork() -> ReplayError:
    return ReplayError("this connection belongs to the parent process")
