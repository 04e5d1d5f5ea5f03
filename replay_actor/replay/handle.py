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
from collections.abc import Callable, Iterable
from typing import Any, Final

from .._errors import ProviderClosed, ReplayError, ReplayMiss
from .._request import RequestLike, request_hash
from . import protocol
from .aio import LoopLinks
from .procs import ProcessHandle
from .registry import handles
from .state import HandleState, fresh, released
from .sync import SyncLink
from .wire import bounded_timeout

__all__ = ["MissExplainer", "ReplayProvider"]

#: ``explain(request, request_hash) -> ReplayMiss``: the miss for ``request``, explained
#: (``nearest``, or in private mode a line in the inspection record only). Called in a
#: frame that is gone before the caller raises; it must pickle (copies carry it).
MissExplainer = Callable[[RequestLike, str], ReplayMiss]
Result = dict[str, Any] | ReplayError
_COMPLETE_REPLIES: Final = protocol.COMPLETE_REPLIES
_JSON_REPLIES: Final = frozenset({protocol.JSON})
_decode_reply: Final = protocol.decode_reply


class ReplayProvider:
    """A handle on one acquisition's cursor actor. Use ``acquire()`` to get one."""

    def __init__(
        self,
        *,
        conn: Any,
        address: bytes,
        actor_pid: int,
        owner_pid: int,
        private: bool,
        timeout: float,
        acquirer: ProcessHandle | None,
        explain: MissExplainer | None = None,
    ) -> None:
        self._address = address
        self._explain = explain
        self._actor_pid = actor_pid
        self._owner_pid = owner_pid
        self._private = private
        self._timeout = timeout
        self._process = acquirer
        self._state = HandleState(f"pid {actor_pid}")
        self._sync = SyncLink(address, timeout, self._state, conn)
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

    @property
    def closed(self) -> bool:
        """True once ``release()`` was called on this handle (or the acquisition ended)."""
        return self._state.closed or self._state.ended

    @property
    def private(self) -> bool:
        """True when hashes are kept out of public diagnostics."""
        return self._private

    # -- calls ------------------------------------------------------------------------

    def complete(self, request: RequestLike) -> dict[str, Any]:
        """Answer ``request`` from the fixture: a fresh response dict.

        Raises ``ReplayMiss``, ``SequenceExhausted``, ``RequestError``,
        ``ProviderClosed`` or ``ActorLost``; never falls back to anything.
        """
        state = self._state
        if state.closed or state.ended:
            state.check()  # a closed handle says so before judging the request
        reply, shown = self._ask(request)
        if isinstance(reply, bytes):
            result = _decode_reply(reply, shown, state)
            if isinstance(result, dict):
                return result
            reply = self._explained(request, result)
        raise reply

    def _ask(self, request: RequestLike) -> tuple[bytes | ReplayError, str | None]:
        # The one frame that holds the hash; it returns (never raises) what went wrong.
        digest = request_hash(request)
        message = protocol.frame(protocol.complete_request(digest))
        return self._sync.exchange(message, _COMPLETE_REPLIES), None if self._private else digest

    async def acomplete(self, request: RequestLike) -> dict[str, Any]:
        """``complete`` for asyncio, on the event loop itself (no worker thread).

        The tasks of one loop share one connection with many requests in flight. A
        task cancelled while its request is in flight leaves the connection usable;
        the element its request took counts as served.
        """
        state = self._state
        if state.closed or state.ended:
            state.check()
        future, shown = self._submit(request)
        result = _decode_reply(await future, shown, state)
        if isinstance(result, dict):
            return result
        raise self._explained(request, result)

    def _submit(self, request: RequestLike) -> tuple[asyncio.Future[bytes], str | None]:
        loop = asyncio.get_running_loop()
        digest = request_hash(request)
        message = protocol.frame(protocol.complete_request(digest))
        shown = None if self._private else digest
        del digest
        link = self._links.get(loop)
        if isinstance(link, ReplayError):
            message = b""
            raise link
        return link.submit(message), shown

    def complete_many(self, requests: Iterable[RequestLike]) -> list[Result]:
        """Answer a batch from this thread, pipelined: the requests are sent without
        waiting for earlier replies, and the replies read in order.

        Returns one element per request, in order: the response dict, or the
        ``ReplayError`` that ``complete`` would have raised for it (``ReplayMiss``,
        ``SequenceExhausted``, ``RequestError`` for an invalid request, which is never
        sent, ``ProviderClosed``, ``ActorLost``). Never raises a ``ReplayError``.
        """
        batch = list(requests)
        state = self._state
        if not batch:
            return []
        if state.closed or state.ended:
            error = state.error()
            assert error is not None
            return [fresh(error) for _ in batch]
        results = self._sync.batch(batch, private=self._private)
        if self._explain is not None:
            for i, result in enumerate(results):
                if type(result) is ReplayMiss:
                    results[i] = self._explained(batch[i], result)
        return results

    def _explained(self, request: RequestLike, error: ReplayError) -> ReplayError:
        """``error``, or for a miss the explained ``ReplayMiss`` when this handle has an
        explainer (only a miss pays for the lookup, on the caller's side).

        In private mode the hash is computed again here, in a frame that is gone before
        the caller raises: the explanation goes to the inspection record only.
        """
        explain = self._explain
        if explain is None or type(error) is not ReplayMiss:
            return error
        shown = error.request_hash
        return explain(request, shown if shown is not None else request_hash(request))

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
        self._links.close_all(released)
        self._sync.release(say_release=not (state.broken or state.ended))
        if process is not None:
            try:
                wait = bounded_timeout(timeout)
            except ReplayError:
                wait = self._timeout
            process.finish(wait)
        handles.discard(self)

    def __enter__(self) -> ReplayProvider:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

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
            raise ProviderClosed("a released provider cannot be passed on")
        args = (self._address, self._actor_pid, self._owner_pid, self._private, self._timeout)
        return (_rebuild, (*args, self._explain))

    def disown_after_fork(self) -> None:
        # In a fork child the channels and the actor process belong to the parent.
        self._sync.disown()
        self._links.disown()
        self._mutex = threading.Lock()
        process, self._process = self._process, None
        if process is not None:
            process.close()


def _rebuild(  # noqa: PLR0917 - pickle passes the arguments positionally
    address: bytes,
    actor_pid: int,
    owner_pid: int,
    private: bool,
    timeout: float,
    explain: MissExplainer | None = None,
) -> ReplayProvider:
    copy = ReplayProvider(
        conn=None,
        address=address,
        actor_pid=actor_pid,
        owner_pid=owner_pid,
        private=private,
        timeout=timeout,
        acquirer=None,
        explain=explain,
    )
    copy._sync.connect_first()
    return copy
