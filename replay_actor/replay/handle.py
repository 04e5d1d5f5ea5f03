"""``acquire`` and ``ReplayProvider``: the caller's side of one acquisition.

Runs in: the caller (and in every process a copy of the handle reaches).

A handle talks to its acquisition's actor over AF_UNIX stream connections, in the
frames of ``wire.py`` (replies come back strictly in request order per connection):

- ``complete``: the first thread that calls uses the handle's first channel, every
  other thread opens one of its own; a lock per channel keeps each request/reply
  exchange whole, so threads never queue behind each other's round trips.
- ``acomplete``: on the event loop itself, no worker thread. Every task of one loop
  shares one connection with many requests in flight (``aio.AsyncLink``).
- ``complete_many``: a batch pipelined on this thread's channel (``pipeline.py``).

The actor serialises every connection, so each sequence element is handed out exactly
once. Every wait is bounded by the handle's timeout and ends with EOF the moment the
actor dies, so no call blocks forever; an exchange whose framing is in doubt (cut
half-way, late, or answered with a frame that is not a reply to it) breaks the handle
for good (``ActorLost``). The handle-wide fate (released, ended, broken) lives in
``state.HandleState``, shared by all of them.

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
import atexit
import os
import socket
import threading
import time
import warnings
import weakref
from collections.abc import Iterable
from typing import Any, Final, cast

import msgspec

from .._errors import (
    ActorLost,
    FixtureError,
    InspectionPathError,
    InvalidArgument,
    OwnerNotAlive,
    ProviderClosed,
    ReplayError,
    ReplayMiss,
    RequestError,
    SequenceExhausted,
)
from .._request import RequestLike, request_hash
from ..fixture import DEFAULT_CEILINGS, Ceilings
from . import dial, protocol
from .aio import AsyncLink
from .pipeline import pipeline
from .procs import ProcessHandle, identity
from .protocol import ActorConfig
from .state import HandleState, detached
from .wire import Channel, bounded_timeout, frame, set_timeouts
from .zygote import zygote

__all__ = ["ReplayProvider", "acquire", "check_timeout"]

_decode = msgspec.json.decode
_RESPONSE: Final = protocol.RESPONSE
_MISS: Final = protocol.MISS
_EXHAUSTED: Final = protocol.EXHAUSTED
#: The frames that may answer each request; anything else breaks the handle.
_COMPLETE_REPLIES: Final = frozenset({_RESPONSE, _MISS, _EXHAUSTED})
_JSON_REPLIES: Final = frozenset({protocol.JSON})
#: A failed bootstrap's kind -> the error the caller can catch.
_FAILURES: Final[dict[str, type[ReplayError]]] = {
    "owner": OwnerNotAlive,
    "inspection": InspectionPathError,
}
_OWNER_WATCH_ENV: Final = "REPLAY_ACTOR_OWNER_WATCH"
_RELEASED: Final = "this provider was released"

Result = dict[str, Any] | ReplayError

# Every live handle of this process, so a fork child can disown the parent's channels
# and the exit hook can end this process's own acquisitions.
_handles: weakref.WeakSet[ReplayProvider] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for handle in list(_handles):
        handle._disown_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _release_own_at_exit() -> None:
    """At interpreter exit, end the acquisitions this process owns and acquired.

    Their actors would exit with us anyway (we are their owner), but only after we are
    gone: the zygote's exit hook, which waits for its actors, would otherwise wait its
    whole bound for actors that are waiting for us. Registered after the zygote's hook
    (this module imports ``zygote`` first), so it runs before it. Acquisitions owned by
    another process live on (their owner may still use them), and the zygote is then
    left to finish with them rather than waited for.
    """
    me = os.getpid()
    foreign = False
    for handle in list(_handles):
        if handle._process is None:
            continue  # a copy: its actor is another process's zygote's child
        if handle.owner_pid == me:
            handle.release_within(1.0)
        elif handle._actor_alive():
            foreign = True
    if foreign:
        # Our zygote outlives us for actors whose owners live on (it exits after
        # them); waiting for it here would only delay our exit by the hook's bound.
        zygote.shutdown(wait=0.0)


atexit.register(_release_own_at_exit)


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


class ReplayProvider:
    """A handle on one acquisition's cursor actor. Use ``acquire()`` to get one."""

    def __init__(
        self,
        *,
        conn: Channel | None,
        address: bytes,
        actor_pid: int,
        owner_pid: int,
        private: bool,
        timeout: float,
        acquirer: ProcessHandle | None,
        explain: tuple[str, str | None] = ("", None),
    ) -> None:
        self._address = address
        # (fixture path, inspection path): where a miss looks for its explanation and,
        # in private mode, where that explanation goes (authoring/explain.py).
        self._explain = explain
        self._actor_pid = actor_pid
        self._owner_pid = owner_pid
        self._private = private
        self._timeout = timeout
        self._process = acquirer
        self._state = HandleState(actor_pid)
        # The first channel (the acquirer's bootstrap channel, or a copy's first
        # connection) serves the first thread that calls, and carries ``release``.
        self._primary = _Slot(conn)
        self._primary_taken = False
        # Other threads get channels of their own, so they never queue behind each
        # other's exchanges; a thread's channel closes when the thread ends.
        self._local = threading.local()
        self._others: weakref.WeakSet[_Slot] = weakref.WeakSet()
        # One connection per event loop for ``acomplete``.
        self._links: dict[asyncio.AbstractEventLoop, AsyncLink] = {}
        self._mutex = threading.Lock()
        _handles.add(self)

    # -- properties -------------------------------------------------------------------

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
        if type(reply) is bytes:
            kind = reply[:1]
            if kind == _RESPONSE:
                response: dict[str, Any] = _decode(memoryview(reply)[1:])
                return response
            if kind == _MISS:
                raise self._missed(request, shown)
            raise SequenceExhausted(shown)
        assert isinstance(reply, ReplayError)
        raise reply

    def _ask(self, request: RequestLike) -> tuple[bytes | ReplayError, str | None]:
        # The one frame that holds the hash; it returns (never raises) what went wrong.
        digest = request_hash(request)
        reply = self._exchange(protocol.complete_request(digest), _COMPLETE_REPLIES)
        return reply, None if self._private else digest

    async def acomplete(self, request: RequestLike) -> dict[str, Any]:
        """``complete`` for asyncio, on the event loop itself (no worker thread).

        The tasks of one loop share one connection with many requests in flight. A
        task cancelled while its request is in flight leaves the connection usable;
        the element its request took counts as served.
        """
        state = self._state
        if state.closed or state.ended:
            state.check()
        future, shown, link = self._submit(request)
        reply = await future
        kind = reply[:1]
        if kind == _RESPONSE:
            response: dict[str, Any] = _decode(memoryview(reply)[1:])
            return response
        if kind == _MISS:
            raise self._missed(request, shown)
        if kind == _EXHAUSTED:
            raise SequenceExhausted(shown)
        link.lose("sent an unexpected reply")
        raise ActorLost(f"the cursor actor (pid {self._actor_pid}) sent an unexpected reply")

    def _missed(self, request: RequestLike, shown: str | None) -> ReplayMiss:
        """The ``ReplayMiss`` for ``request``, explained by the fixture's request sidecar
        when it has one (only a miss pays for the lookup, on the caller's side).

        In private mode the hash is computed again here, in a frame that is gone before
        the caller raises: the explanation goes to the inspection record only.
        """
        fixture, inspection_path = self._explain
        if not fixture or (self._private and inspection_path is None):
            return ReplayMiss(shown)  # nothing to explain, or nowhere private to say it
        from ..authoring.explain import miss_error

        digest = shown if shown is not None else request_hash(request)
        return miss_error(request, digest, self._private, fixture, inspection_path)

    def _submit(self, request: RequestLike) -> tuple[asyncio.Future[bytes], str | None, AsyncLink]:
        loop = asyncio.get_running_loop()
        digest = request_hash(request)
        message = frame(protocol.complete_request(digest))
        shown = None if self._private else digest
        del digest
        link = self._link(loop)
        if isinstance(link, ReplayError):
            message = b""
            raise link
        return link.submit(message), shown, link

    def _link(self, loop: asyncio.AbstractEventLoop) -> AsyncLink | ReplayError:
        """This loop's connection, made on first use (or after a local failure)."""
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
                    stale.close(_released)
            try:
                link = AsyncLink(loop, self._address, self._timeout, state)
            except ReplayError as exc:
                failure = exc
            else:
                self._links[loop] = link
                return link
        return detached(failure)

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
            return [_fresh(state.error()) for _ in batch]
        results: list[Result | None] = [None] * len(batch)
        slot = self._slot()
        if isinstance(slot, ReplayError):
            return _failed(batch, slot)
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
                return _failed(batch, error or state.lose("was lost earlier"))
            in_step = pipeline(
                conn.fileno(),
                batch,
                results,
                private=self._private,
                timeout=self._timeout,
                state=state,
            )
            if not in_step:
                slot.close()
        if self._explain[0]:
            for i, result in enumerate(results):
                if type(result) is ReplayMiss:
                    results[i] = self._missed(batch[i], result.request_hash)
        return cast("list[Result]", results)  # the pipeline filled every element

    def snapshot(self) -> dict[str, Any]:
        """The fixture's safe snapshot plus ``served``, ``misses`` and ``exhausted``."""
        reply = self._exchange(protocol.SNAPSHOT, _JSON_REPLIES)
        if not isinstance(reply, bytes):
            raise reply
        result: dict[str, Any] = protocol.decode_json(reply)
        result["kind"] = "replay"
        return result

    def inspect(self) -> dict[str, Any]:
        """Owner-only diagnostics: the hashes of misses and exhausted sequences."""
        reply = self._exchange(protocol.INSPECT, _JSON_REPLIES)
        if not isinstance(reply, bytes):
            raise reply
        result: dict[str, Any] = protocol.decode_json(reply)
        return result

    def _slot(self) -> _Slot | ReplayError:
        """This thread's channel slot, claiming the first one or making a new one."""
        slot: _Slot | None = getattr(self._local, "slot", None)
        if slot is not None:
            return slot
        with self._mutex:
            error = self._state.error()
            if error is not None:
                return error
            if not self._primary_taken:
                self._primary_taken = True
                slot = self._primary
            else:
                slot = _Slot(None)
                self._others.add(slot)
        self._local.slot = slot
        return slot

    def _exchange(self, message: bytes, expected: frozenset[bytes]) -> bytes | ReplayError:
        """One request and its reply on this thread's channel; the error is returned."""
        slot = self._slot()
        if isinstance(slot, ReplayError):
            return slot
        state = self._state
        with slot.lock:
            error = state.error()
            if error is not None:
                return error
            conn = slot.channel
            if conn is None:
                opened = self._open_channel()
                if isinstance(opened, ReplayError):
                    return opened
                conn = slot.channel = opened
            failure: BaseException | None = None
            reply = b""
            try:
                conn.send(message)
                reply = conn.recv()
            except (EOFError, OSError) as exc:
                failure = exc
            if failure is None:
                if reply[:1] in expected:
                    return reply
                slot.close()
                if reply == protocol.GOODBYE:
                    return state.end()
                # Not a reply to this request: every later one would be off by one.
                return state.lose("sent an unexpected reply")
            if _released_notice(conn):
                slot.close()
                return state.end()
            # Half an exchange may be in flight: the framing is unknown, never reuse it.
            slot.close()
            reason = "did not answer in time" if isinstance(failure, BlockingIOError) else "died"
            return state.lose(reason, failure)

    def _unsolicited(self, slot: _Slot, conn: Channel) -> ReplayError:
        try:
            notice = conn.recv()
        except (EOFError, OSError):
            notice = b""
        slot.close()
        if notice == protocol.GOODBYE:
            return self._state.end()
        return self._state.lose("sent a reply nobody asked for")

    def _reap(self) -> None:
        """The actor has exited (seen by a ``Supervisor``): free every descriptor now.

        Not a release: the caller did not end it, so later calls raise ``ActorLost``,
        as they would have on their own.
        """
        state = self._state
        with self._mutex:
            if not (state.closed or state.ended):
                state.lose("exited")
            slots = [self._primary, *self._others]
            links = list(self._links.values())
            self._links.clear()
            process, self._process = self._process, None
        for link in links:
            link.close_from_anywhere(state.error_factory())
        for slot in slots:
            with slot.lock:
                slot.close()
        if process is not None:
            process.close()

    def _pidfd(self) -> int | None:
        """The pidfd on this acquisition's actor (acquirer's handle only), or None."""
        process = self._process
        return None if process is None else process.fd

    def _actor_alive(self) -> bool:
        """Whether this acquisition's actor still runs (acquirer's handle only)."""
        return self._process is None or self._process.alive()

    def _open_channel(self) -> Channel | ReplayError:
        try:
            return Channel.from_socket(dial.connect(self._address, self._timeout))
        except ProviderClosed:
            # Nobody listens any more: the acquisition is over (released, or its owner
            # died). A copy cannot tell which, and there is nothing left to call.
            return self._state.end("the acquisition has ended")
        except ActorLost as exc:
            self._state.broken = True
            failure: ReplayError = exc
        except ReplayError as exc:
            failure = exc  # a local shortage (no fd): the handle stays usable
        return detached(failure)

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
            others = list(self._others)
            links = list(self._links.values())
            self._links.clear()
            process, self._process = self._process, None
        for link in links:
            link.close_from_anywhere(_released)
        # Each slot's lock waits for an exchange in flight (bounded by the timeout).
        with self._primary.lock:
            conn = self._primary.channel
            if conn is not None and not state.broken and not state.ended:
                try:
                    conn.send(protocol.RELEASE)
                    conn.recv()
                except (EOFError, OSError):
                    pass
            self._primary.close()
        for slot in others:
            with slot.lock:
                slot.close()
        if process is not None:
            try:
                wait = bounded_timeout(timeout)
            except ReplayError:
                wait = self._timeout
            process.finish(wait)
        _handles.discard(self)

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
        for link in list(getattr(self, "_links", {}).values()):
            link.close_from_anywhere(_released)
        primary = self._primary
        if primary.channel is not None and not state.closed:
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
        return (
            _rebuild,
            (
                self._address,
                self._actor_pid,
                self._owner_pid,
                self._private,
                self._timeout,
                self._explain,
            ),
        )

    def _disown_after_fork(self) -> None:
        # In a fork child the channels and the actor process belong to the parent; the
        # locks may have been held by threads that do not exist here. Closing only drops
        # this process's reference: the parent's channels stay open.
        for slot in [self._primary, *self._others]:
            slot.lock = threading.Lock()
            slot.close()
        for link in self._links.values():
            link.disown()
        self._links = {}
        self._others = weakref.WeakSet()
        self._local = threading.local()
        self._mutex = threading.Lock()
        self._primary_taken = False
        process, self._process = self._process, None
        if process is not None:
            process.close()


def _released() -> ReplayError:
    return ProviderClosed(_RELEASED)


def _fresh(error: ReplayError | None) -> ReplayError:
    """A new instance of ``error`` for each element of a batch (never one shared)."""
    assert error is not None
    copy = type(error)(*error.args)
    copy.__cause__ = error.__cause__
    return copy


def _failed(batch: list[RequestLike], error: ReplayError) -> list[Result]:
    """Every element's error when the batch cannot be sent: as ``complete`` would say,
    ``RequestError`` first for an invalid request."""
    results: list[Result] = []
    for request in batch:
        try:
            request_hash(request)
        except RequestError as exc:
            results.append(detached(exc))
            continue
        results.append(_fresh(error))
    return results


def _released_notice(conn: Channel) -> bool:
    """After a failed exchange: did the actor say goodbye (``Z``) before exiting?"""
    try:
        return conn.poll(0) and conn.recv() == protocol.GOODBYE
    except (EOFError, OSError):
        return False


def _rebuild(  # noqa: PLR0917 - pickle passes the arguments positionally
    address: bytes,
    actor_pid: int,
    owner_pid: int,
    private: bool,
    timeout: float,
    explain: tuple[str, str | None] = ("", None),
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
    # Connect at once: from then on the actor's death is this copy's EOF (ActorLost),
    # and the acquirer's release reaches it as a goodbye (ProviderClosed). Only a copy
    # unpickled after the acquisition ended finds nobody listening. Anything else (a
    # busy listener, no fd to spare) is not an end: the first call connects again.
    try:
        copy._primary.channel = Channel.from_socket(dial.connect(address, timeout))
    except ProviderClosed:
        copy._state.end("the acquisition has ended")
    except ReplayError:
        pass
    return copy


def check_timeout(timeout: float) -> float:
    """``timeout`` as a float if it is a positive finite number of seconds.

    Raises ``InvalidArgument`` otherwise (``inf`` and ``nan`` included: no call may
    block forever). A value under a microsecond is rounded up to one, never down to
    "no timeout"; one over ``wire.MAX_TIMEOUT`` (about 11.6 days) is capped there.
    """
    return bounded_timeout(timeout)


def acquire(
    fixture: str | os.PathLike[str],
    *,
    owner_pid: int | None = None,
    private: bool = False,
    ceilings: Ceilings | None = None,
    inspection_path: str | os.PathLike[str] | None = None,
    timeout: float = 30.0,
    inspection_served: bool = False,
) -> ReplayProvider:
    """Spawn this acquisition's cursor actor, wait until it has loaded ``fixture``.

    ``inspection_served``: also log each hit to the inspection record (for
    ``replay-actor coverage``); it needs ``inspection_path``.

    Raises ``FixtureError`` (reason and line only) if the fixture is rejected,
    ``ReplayError`` if the owner is not alive or this process lacks a resource (no file
    descriptor to spare), ``ActorLost`` if the actor does not come up within
    ``timeout``. Leaves no process and no descriptor behind on failure.
    """
    timeout = check_timeout(timeout)
    if inspection_served and inspection_path is None:
        raise InvalidArgument("inspection_served=True needs an inspection_path to log to")
    try:
        return _acquire(
            fixture,
            owner_pid=owner_pid,
            private=private,
            ceilings=ceilings,
            inspection_path=inspection_path,
            timeout=timeout,
            inspection_served=inspection_served,
        )
    except OSError as exc:
        failure = dial.resource_error(exc)
    raise failure


def _acquire(
    fixture: str | os.PathLike[str],
    *,
    owner_pid: int | None,
    private: bool,
    ceilings: Ceilings | None,
    inspection_path: str | os.PathLike[str] | None,
    timeout: float,
    inspection_served: bool,
) -> ReplayProvider:
    owner = os.getpid() if owner_pid is None else owner_pid
    create_time = identity(owner)
    if create_time is None:
        raise OwnerNotAlive(f"the owner process {owner} is not alive")
    config = ActorConfig(
        fixture=os.path.abspath(os.fspath(fixture)),
        owner_pid=owner,
        owner_create_time=create_time,
        private=bool(private),
        ceilings=(DEFAULT_CEILINGS if ceilings is None else ceilings).as_dict(),
        inspection_path=None if inspection_path is None else os.path.abspath(inspection_path),
        owner_watch=os.environ.get(_OWNER_WATCH_ENV, "pidfd"),
        inspection_served=bool(inspection_served),
    )
    deadline = time.monotonic() + timeout  # ``timeout`` bounds the whole acquire
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            actor_pid = zygote.spawn(config, theirs, timeout)
        finally:
            theirs.close()  # the actor's end lives only in the actor: its death is EOF
    except BaseException:
        ours.close()
        raise
    process = ProcessHandle(actor_pid)
    conn: Channel | None = None
    outcome: bytes | None = None
    try:
        set_timeouts(ours, max(deadline - time.monotonic(), 0.001))
        conn = Channel.from_socket(ours)
        outcome = conn.recv()
    except (EOFError, OSError):
        outcome = None
    if outcome is not None and conn is not None and outcome.startswith(protocol.READY):
        return ReplayProvider(
            conn=conn,
            address=outcome[len(protocol.READY) :],
            actor_pid=actor_pid,
            owner_pid=owner,
            private=bool(private),
            timeout=timeout,
            acquirer=process,
            explain=(config.fixture, config.inspection_path),
        )
    if conn is not None:
        conn.close()
    else:
        ours.close()
    if outcome is None:
        process.kill()  # silent or dead: the actor started for us, stopped by its pidfd
        process.close()
        raise ActorLost("the cursor actor did not come up in time")
    process.finish(timeout)
    if outcome.startswith(protocol.FIXTURE_REJECTED):
        raise FixtureError(*protocol.decode_rejection(outcome))
    kind, message = protocol.decode_failure(outcome)
    raise _FAILURES.get(kind, ReplayError)(message)
