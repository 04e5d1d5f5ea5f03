"""``acquire`` and ``ReplayProvider``: the caller's side of one acquisition.

Runs in: the caller (and in every process a copy of the handle reaches).

A handle talks to its acquisition's actor over ``wire.Channel``s (AF_UNIX sockets):
the first thread that calls uses the handle's first channel, every other thread opens
one of its own, and a lock per channel keeps each request/reply exchange whole. Threads
and asyncio tasks can share a handle without queueing behind each other's round trips;
the actor serialises them, so each sequence element is handed out exactly once.
Every read is bounded by the handle's timeout (``SO_RCVTIMEO``) and ends with EOF the
moment the actor dies, so no call blocks forever; an exchange interrupted half-way
leaves the framing unknown, and the handle is then broken for good (``ActorLost``).

Copies. Pickling a handle (a ``multiprocessing.Process`` argument, a ``Connection`` or a
``Queue``) sends only the actor's address; the copy opens its own channel, so copies
never interfere. A bare ``os.fork()`` child drops the inherited channel (it is the
parent's) and opens its own on first use. Only the handle ``acquire`` returned can end
the acquisition; ``release()`` on a copy closes that copy's channel alone.
"""

from __future__ import annotations

import asyncio
import math
import os
import socket
import threading
import time
import warnings
import weakref
from typing import Any, Final

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
    SequenceExhausted,
)
from .._request import RequestLike, request_hash
from ..fixture import DEFAULT_CEILINGS, Ceilings
from . import protocol
from .procs import ProcessHandle, identity
from .protocol import ActorConfig
from .wire import Channel, set_timeouts
from .zygote import zygote

__all__ = ["ReplayProvider", "acquire", "check_timeout"]

_decode = msgspec.json.decode
_RESPONSE: Final = protocol.RESPONSE
_MISS: Final = protocol.MISS
_EXHAUSTED: Final = protocol.EXHAUSTED
#: A failed bootstrap's kind -> the error the caller can catch.
_FAILURES: Final[dict[str, type[ReplayError]]] = {
    "owner": OwnerNotAlive,
    "inspection": InspectionPathError,
}
_OWNER_WATCH_ENV: Final = "REPLAY_ACTOR_OWNER_WATCH"

# Every live handle of this process, so a fork child can disown the parent's channels.
_handles: weakref.WeakSet[ReplayProvider] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for handle in list(_handles):
        handle._disown_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _connect(address: bytes, timeout: float) -> Channel:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(address)
        sock.settimeout(None)
        set_timeouts(sock, timeout)
    except BaseException:
        sock.close()
        raise
    return Channel.from_socket(sock)


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
    ) -> None:
        self._address = address
        self._actor_pid = actor_pid
        self._owner_pid = owner_pid
        self._private = private
        self._timeout = timeout
        self._process = acquirer
        # The first channel (the acquirer's bootstrap channel, or a copy's first
        # connection) serves the first thread that calls, and carries ``release``.
        self._primary = _Slot(conn)
        self._primary_taken = False
        # Other threads get channels of their own, so they never queue behind each
        # other's exchanges; a thread's channel closes when the thread ends.
        self._local = threading.local()
        self._others: weakref.WeakSet[_Slot] = weakref.WeakSet()
        self._state = threading.Lock()
        self._closed = False
        self._ended = False  # the acquisition ended (released by its acquirer)
        self._broken = False
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
        return self._closed or self._ended

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
        if self._closed or self._ended:
            self._check_usable()  # a closed handle says so before judging the request
        digest = request_hash(request)
        reply = self._exchange(protocol.complete_request(digest))
        kind = reply[:1]
        if kind == _RESPONSE:
            response: dict[str, Any] = _decode(memoryview(reply)[1:])
            return response
        shown = None if self._private else digest
        if kind == _MISS:
            raise ReplayMiss(shown)
        if kind == _EXHAUSTED:
            raise SequenceExhausted(shown)
        raise ActorLost("the cursor actor sent an unexpected reply")

    async def acomplete(self, request: RequestLike) -> dict[str, Any]:
        """``complete`` for asyncio: the exchange runs in a worker thread, so the event
        loop is never blocked."""
        return await asyncio.to_thread(self.complete, request)

    def snapshot(self) -> dict[str, Any]:
        """The fixture's safe snapshot plus ``served``, ``misses`` and ``exhausted``."""
        result: dict[str, Any] = protocol.decode_json(self._exchange(protocol.SNAPSHOT))
        result["kind"] = "replay"
        return result

    def inspect(self) -> dict[str, Any]:
        """Owner-only diagnostics: the hashes of misses and exhausted sequences."""
        result: dict[str, Any] = protocol.decode_json(self._exchange(protocol.INSPECT))
        return result

    def _slot(self) -> _Slot:
        """This thread's channel slot, claiming the first one or connecting anew."""
        slot: _Slot | None = getattr(self._local, "slot", None)
        if slot is not None:
            return slot
        with self._state:
            self._check_usable()
            if not self._primary_taken:
                self._primary_taken = True
                slot = self._primary
            else:
                slot = _Slot(None)
                self._others.add(slot)
        self._local.slot = slot
        return slot

    def _exchange(self, message: bytes) -> bytes:
        slot = self._slot()
        with slot.lock:
            self._check_usable()
            conn = slot.channel
            if conn is None:
                conn = slot.channel = self._open_channel()
            failure: BaseException | None = None
            try:
                conn.send(message)
                reply = conn.recv()
            except (EOFError, OSError) as exc:
                failure = exc
            if failure is None and reply != protocol.GOODBYE:
                return reply
            if failure is None or _released_notice(conn):
                self._ended = True
                slot.close()
                raise ProviderClosed("the acquisition was released by its acquirer")
            # Half an exchange may be in flight: the framing is unknown, never reuse it.
            self._broken = True
            slot.close()
            reason = "did not answer in time" if isinstance(failure, BlockingIOError) else "died"
        raise ActorLost(f"the cursor actor (pid {self._actor_pid}) {reason}") from failure

    def _actor_alive(self) -> bool:
        """Whether this acquisition's actor still runs (acquirer's handle only)."""
        return self._process is None or self._process.alive()

    def _check_usable(self) -> None:
        if self._closed:
            raise ProviderClosed("this provider was released")
        if self._ended:
            raise ProviderClosed("the acquisition was released by its acquirer")
        if self._broken:
            raise ActorLost(f"the cursor actor (pid {self._actor_pid}) was lost earlier")

    def _open_channel(self) -> Channel:
        try:
            return _connect(self._address, self._timeout)
        except OSError:
            # Nobody listens any more: the acquisition is over (released, or its owner
            # died). A copy cannot tell which, and there is nothing left to call.
            self._ended = True
        raise ProviderClosed("the acquisition has ended")

    # -- lifecycle --------------------------------------------------------------------

    def release(self) -> None:
        """Close this handle; on the handle ``acquire`` returned, end the acquisition.

        Idempotent, never raises, and waits (bounded) for the actor to exit.
        """
        self.release_within(self._timeout)

    def release_within(self, timeout: float) -> None:
        """``release``, waiting at most ``timeout`` seconds for the actor to exit."""
        with self._state:
            if self._closed:
                return
            self._closed = True
            others = list(self._others)
            process, self._process = self._process, None
        # Each slot's lock waits for an exchange in flight (bounded by the timeout).
        with self._primary.lock:
            conn = self._primary.channel
            if conn is not None and not self._broken and not self._ended:
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
            process.finish(timeout)
        _handles.discard(self)

    def __enter__(self) -> ReplayProvider:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def __del__(self) -> None:
        # Only warn: the channels close their own descriptors when freed with us.
        primary = getattr(self, "_primary", None)
        if primary is not None and primary.channel is not None and not self._closed:
            warnings.warn(
                f"unreleased ReplayProvider for actor {self._actor_pid}",
                ResourceWarning,
                source=self,
                stacklevel=1,
            )

    def __repr__(self) -> str:
        state = "closed" if self.closed else "broken" if self._broken else "open"
        role = "acquirer" if self._process is not None else "copy"
        return f"<ReplayProvider {state} {role} actor={self._actor_pid} owner={self._owner_pid}>"

    # -- copies -----------------------------------------------------------------------

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        if self.closed:
            raise ProviderClosed("a released provider cannot be passed on")
        return (
            _rebuild,
            (self._address, self._actor_pid, self._owner_pid, self._private, self._timeout),
        )

    def _disown_after_fork(self) -> None:
        # In a fork child the channels and the actor process belong to the parent; the
        # locks may have been held by threads that do not exist here. Closing only drops
        # this process's reference: the parent's channels stay open.
        for slot in [self._primary, *self._others]:
            slot.lock = threading.Lock()
            slot.close()
        self._others = weakref.WeakSet()
        self._local = threading.local()
        self._state = threading.Lock()
        self._primary_taken = False
        process, self._process = self._process, None
        if process is not None:
            process.close()


def _released_notice(conn: Channel) -> bool:
    """After a failed exchange: did the actor say goodbye (``Z``) before exiting?"""
    try:
        return conn.poll(0) and conn.recv() == protocol.GOODBYE
    except (EOFError, OSError):
        return False


def _rebuild(
    address: bytes, actor_pid: int, owner_pid: int, private: bool, timeout: float
) -> ReplayProvider:
    copy = ReplayProvider(
        conn=None,
        address=address,
        actor_pid=actor_pid,
        owner_pid=owner_pid,
        private=private,
        timeout=timeout,
        acquirer=None,
    )
    # Connect at once: from then on the actor's death is this copy's EOF (ActorLost),
    # and the acquirer's release reaches it as a goodbye (ProviderClosed). Only a copy
    # unpickled after the acquisition ended finds nobody listening.
    try:
        copy._primary.channel = _connect(address, timeout)
    except OSError:
        copy._ended = True
    return copy


def check_timeout(timeout: float) -> float:
    """``timeout`` as a float if it is a positive finite number of seconds."""
    try:
        value = float(timeout)
    except (TypeError, ValueError):
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise InvalidArgument(
            f"timeout must be a positive finite number of seconds, not {timeout!r}"
        )
    return value


def acquire(
    fixture: str | os.PathLike[str],
    *,
    owner_pid: int | None = None,
    private: bool = False,
    ceilings: Ceilings | None = None,
    inspection_path: str | os.PathLike[str] | None = None,
    timeout: float = 30.0,
) -> ReplayProvider:
    """Spawn this acquisition's cursor actor, wait until it has loaded ``fixture``.

    Raises ``FixtureError`` (reason and line only) if the fixture is rejected,
    ``ReplayError`` if the owner is not alive, ``ActorLost`` if the actor does not come
    up within ``timeout``. Leaves no process behind on failure.
    """
    timeout = check_timeout(timeout)
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
    )
    deadline = time.monotonic() + timeout  # ``timeout`` bounds the whole acquire
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        actor_pid = zygote.spawn(config, theirs, timeout)
    except BaseException:
        ours.close()  # an actor forked late sees EOF and exits: nothing is left behind
        raise
    finally:
        theirs.close()  # the actor's end lives only in the actor, so its death is EOF
    process = ProcessHandle(actor_pid)
    set_timeouts(ours, max(deadline - time.monotonic(), 0.001))
    conn = Channel.from_socket(ours)
    outcome: bytes | None = None
    try:
        outcome = conn.recv()
    except (EOFError, OSError):
        outcome = None
    if outcome is not None and outcome.startswith(protocol.READY):
        return ReplayProvider(
            conn=conn,
            address=outcome[len(protocol.READY) :],
            actor_pid=actor_pid,
            owner_pid=owner,
            private=bool(private),
            timeout=timeout,
            acquirer=process,
        )
    conn.close()
    if outcome is None:
        process.kill()  # silent or dead: the actor started for us, stopped by its pidfd
        process.close()
        raise ActorLost("the cursor actor did not come up in time")
    process.finish(timeout)
    if outcome.startswith(protocol.FIXTURE_REJECTED):
        raise FixtureError(*protocol.decode_rejection(outcome))
    kind, message = protocol.decode_failure(outcome)
    raise _FAILURES.get(kind, ReplayError)(message)
