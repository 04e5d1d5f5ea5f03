"""``ReplayProvider``: the caller's handle on one acquisition's cursor actor (a facade).

Runs in: the caller (and in every process a copy of the handle reaches).

The handle holds the acquisition's fate (``state.HandleState``) and hands each call to
a driver that only moves bytes; what the bytes mean is ``protocol.py``'s:

- ``complete``: this thread's blocking channel (``sync.SyncLink``).
- ``acomplete``: on the event loop itself, no worker thread; every task of one loop
  shares one connection with many requests in flight (``aio.AsyncLink``).
- ``complete_many``: a batch pipelined on this thread's channel (``pipeline.py``).

The actor serialises every connection, so each sequence element is handed out exactly
once. Every wait is bounded by the handle's timeout and ends with EOF the moment the
actor dies, so no call blocks forever. ``acquire`` (``acquisition.py``) makes handles.

Misses. A handle made with a ``MissExplainer`` (the public ``replay_actor.acquire``
passes the authoring layer's) turns each ``ReplayMiss`` into the explained one; the
replay layer itself never reads the fixture's request sidecar.

Private mode: a request hash never sits in a local variable of a frame that an error
is raised through (``complete``, ``acomplete``, the batch), so a reporter that prints
frame locals (``pytest --showlocals``, ``traceback.TracebackException(capture_locals=
True)``, Sentry) cannot show it. The helpers therefore *return* their errors, built
fresh and detached from the frames that made them, and the public methods raise them.

Cores. While one thread calls ``complete`` on the handle ``acquire`` returned, the
actor is kept on that thread's core (``io/cores.py``: two wake-ups across cores were
most of a call on a VM); a second thread, ``acomplete`` or ``complete_many`` give the
actor its own affinity back for good. A copy never moves the actor.

Copies. Pickling a handle (a ``multiprocessing.Process`` argument, a ``Connection`` or a
``Queue``) sends only the actor's address; the copy opens its own connections, so copies
never interfere. A bare ``os.fork()`` child drops the inherited connections (they are
the parent's) and opens its own on first use. Only the handle ``acquire`` returned can
end the acquisition; ``release()`` on a copy closes that copy's connections alone.
"""

from __future__ import annotations

import asyncio
import threading
import warnings
from collections.abc import Sequence
from typing import Any, Final, NamedTuple

from ..._errors import ProviderClosed, ReplayError
from ..._request import RequestLike, request_hash, request_hash_in_turn
from ..._response import RAW_VECTORS
from ..core import protocol
from ..core.state import NOT_PASSED_ON, HandleState, released
from ..io.cores import CoreFollower
from ..io.procs import ProcessHandle
from ..io.wire import bounded_timeout
from .aio import LoopLinks
from .base import MissExplainer, ReplayHandle, Result
from .registry import handles
from .sync import SyncLink

__all__ = ["Acquired", "MissExplainer", "ReplayProvider"]

_COMPLETE_REPLIES: Final = protocol.COMPLETE_REPLIES
_JSON_REPLIES: Final = frozenset({protocol.JSON})


class Acquired(NamedTuple):
    """What an acquisition gives its handles: where the actor listens, whose it is, and
    the terms of every call. All a copy carries to another process (``__reduce__``)."""

    address: bytes
    actor_pid: int
    owner_pid: int
    private: bool
    timeout: float


class ReplayProvider(ReplayHandle):
    """A handle on one acquisition's cursor actor. Use ``acquire()`` to get one."""

    def __init__(
        self,
        acquired: Acquired,
        *,
        conn: Any,
        acquirer: ProcessHandle | None,
        explain: MissExplainer | None = None,
    ) -> None:
        address, actor_pid, timeout = acquired.address, acquired.actor_pid, acquired.timeout
        self._address = address
        self._explain = explain
        self._actor_pid = actor_pid
        self._owner_pid = acquired.owner_pid
        self._private = acquired.private
        self._timeout = timeout
        self._process = acquirer
        self._state = HandleState(f"pid {actor_pid}")
        self._sync = SyncLink(address, timeout, self._state, conn)
        # Only the acquirer's handle moves its actor (a copy may live in any process).
        self._cores = CoreFollower(actor_pid, acquirer.alive) if acquirer is not None else None
        self._links = LoopLinks(address, timeout, self._state)
        self._mutex = threading.Lock()
        handles.add(self)

    @property
    def actor_pid(self) -> int:
        """PID of this acquisition's cursor actor."""
        return self._actor_pid

    @property
    def owner_pid(self) -> int:
        """PID of the process whose death ends the acquisition."""
        return self._owner_pid

    # -- how one request travels (the calls themselves are ``base.ReplayHandle``'s) ----

    def _ask(self, request: RequestLike) -> tuple[bytes | ReplayError, str | None]:
        # The one frame that holds the hash; it returns (never raises) what went wrong.
        sync, cores = self._sync, self._cores
        if cores is not None and cores.following:
            if sync.sole():
                cores.follow()
            else:
                cores.let_go()  # another thread calls too: for good
        digest = request_hash_in_turn(request) if sync.crowded else request_hash(request)
        message = _frame(digest)
        return self._sync.exchange(message, _COMPLETE_REPLIES), None if self._private else digest

    async def acomplete(self, request: RequestLike) -> dict[str, Any]:
        """``complete`` for asyncio, on the event loop itself (no worker thread)."""
        # ``ReplayHandle.acomplete`` with the reply's future awaited here, not through
        # ``_receive``: a coroutine less per call, on the path every task takes.
        state = self._state
        if state.closed or state.ended:
            state.check()
        pending, shown = self._send(request)
        if isinstance(pending, ReplayError):
            raise pending
        return self._answer(request, await pending, shown)

    def _send(self, request: RequestLike) -> tuple[asyncio.Future[bytes] | ReplayError, str | None]:
        # The tasks of one loop share one connection with many requests in flight. A
        # task cancelled while its request is in flight leaves the connection usable;
        # the element its request took counts as served.
        loop = asyncio.get_running_loop()
        cores = self._cores
        if cores is not None and cores.following:
            cores.let_go()  # the loop runs on while the actor answers
        digest = request_hash(request)
        message = _frame(digest)
        shown = None if self._private else digest
        del digest
        link = self._links.get(loop)
        if isinstance(link, ReplayError):
            return link, shown
        return link.submit(message, loop), shown

    async def _receive(self, pending: asyncio.Future[bytes]) -> bytes:
        return await pending

    def _batch(self, batch: Sequence[RequestLike]) -> list[Result]:
        # Pipelined: sent without waiting for earlier replies, the replies read in order.
        if self._cores is not None:
            self._cores.let_go()  # the caller hashes on while the actor answers
        return self._sync.batch(batch, private=self._private)

    def snapshot(self) -> dict[str, Any]:
        """The fixture's safe snapshot plus ``served``, ``misses`` and ``exhausted``."""
        result: dict[str, Any] = self._json(protocol.SNAPSHOT)
        result["kind"] = "replay"
        return result

    def inspect(self) -> dict[str, Any]:
        """Owner-only diagnostics: the hashes of misses and exhausted sequences."""
        result: dict[str, Any] = self._json(protocol.INSPECT)
        return result

    def _json(self, opcode: bytes) -> Any:
        reply = self._sync.exchange(protocol.frame(opcode), _JSON_REPLIES)
        if not isinstance(reply, bytes):
            raise reply
        return protocol.decode_json(reply)

    # -- supervision: the interface ``Supervisor`` uses (``supervisor.Supervised``) ------

    def actor_exit_fd(self) -> int | None:
        """A pidfd that turns readable when the actor exits (acquirer's handle only)."""
        process = self._process
        return None if process is None else process.fd

    def acquired_here(self) -> bool:
        """Whether this is the handle ``acquire`` returned in this process (not a copy)."""
        return self._process is not None

    def actor_alive(self) -> bool:
        """Whether this acquisition's actor still runs (a copy cannot tell: True)."""
        return self._process is None or self._process.alive()

    def actor_exited(self) -> None:
        """The actor has exited (a supervisor saw it): free every descriptor now.

        Not a release: the caller did not end it, so later calls raise ``ActorLost``,
        as they would have on their own.
        """
        state = self._state
        with self._mutex:
            if not (state.closed or state.ended):
                state.lose("exited")
            process, self._process = self._process, None
            self._cores = None
        self._links.close_all(state.error_factory())
        self._sync.release(say_release=False)
        if process is not None:
            process.close()

    # -- lifecycle --------------------------------------------------------------------

    def release(self) -> None:
        """Close this handle; on the handle ``acquire`` returned, end the acquisition.

        Idempotent, never raises, and waits (bounded) for the actor to exit.
        """
        self.release_within(self._timeout)

    def release_within(self, timeout: float) -> None:
        """``release``, waiting at most ``timeout`` seconds for the actor to exit."""
        state = self._state
        with self._mutex:
            if state.closed:
                return
            state.closed = True
            process, self._process = self._process, None
            self._cores = None
        self._links.close_all(released)
        self._sync.release(say_release=not (state.broken or state.ended))
        if process is not None:
            try:
                wait = bounded_timeout(timeout)
            except ReplayError:
                wait = self._timeout
            process.finish(wait)
        handles.discard(self)

    def __del__(self) -> None:
        # Only warn: the channels close their own descriptors when freed with us. The
        # event loops' connections are referenced by their loops, so close them here.
        state = getattr(self, "_state", None)
        if state is None:
            return
        self._links.close_all(released)
        if self._sync.first_open and not state.closed:
            warnings.warn(
                f"unreleased ReplayProvider for actor {self._actor_pid}",
                ResourceWarning,
                source=self,
                stacklevel=1,
            )

    def __repr__(self) -> str:
        state = self._state
        status = "closed" if self.closed else "broken" if state.broken else "open"
        role = "acquirer" if self._process is not None else "copy"
        return f"<ReplayProvider {status} {role} actor={self._actor_pid} owner={self._owner_pid}>"

    # -- copies -----------------------------------------------------------------------

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        if self.closed:
            raise ProviderClosed(NOT_PASSED_ON)
        acquired = Acquired(
            self._address, self._actor_pid, self._owner_pid, self._private, self._timeout
        )
        return (_rebuild, (acquired, self._explain))

    def disown_after_fork(self) -> None:
        # In a fork child the channels and the actor process belong to the parent.
        self._sync.disown()
        self._links.disown()
        self._mutex = threading.Lock()
        self._cores = None  # the parent's to move, not this child's
        process, self._process = self._process, None
        if process is not None:
            process.close()


def _frame(digest: str) -> bytes:
    """The request frame for one call: ``COMPLETE``, or ``COMPLETE_VECTORS`` for a caller
    that takes vectors raw (``RAW_VECTORS``)."""
    if RAW_VECTORS.get():
        return protocol.vectors_frame(digest)
    return protocol.complete_frame(digest)


def _rebuild(acquired: Acquired, explain: MissExplainer | None = None) -> ReplayProvider:
    copy = ReplayProvider(acquired, conn=None, acquirer=None, explain=explain)
    copy._sync.connect_first()
    return copy
