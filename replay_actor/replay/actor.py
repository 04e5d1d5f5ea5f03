"""The cursor actor: the one process per acquisition that owns the sequence cursors.

Runs in: the actor (forked by the zygote, ``zygote.py``).

::

    acquirer                                   actor (this module)
    --------                                   -----------------------------------------
    socketpair ---- config, via the zygote --->  load + validate the fixture (or reuse
                                                 the zygote's parse of the same file)
               <--- READY (listener address) -   listen on an abstract AF_UNIX socket
    copies ------- connect (same uid only) ---->  one Channel per handle copy
    handle ------- COMPLETE + request hash ---->  Cursors.take(hash) (the only mutable state)
           <------ RESPONSE + bytes -----------   or MISS / EXHAUSTED
                                               watches: owner pidfd (psutil identity
                                               confirmed), every connection's EOF

The loop is single-threaded and event-driven: ``selectors`` waits on the connections,
the listener and the owner's pidfd together, so an idle actor sleeps in the kernel and
the owner's death is an event, not a poll. It exits when the acquisition is released,
when the owner dies, or when the last connection closes. It never opens an internet
socket, never forks, and never imports the caller's ``__main__`` (its zygote is started
as ``python -P -c``, not through multiprocessing's spawn preparation). The frames are
``protocol.py``'s; the table of them is in docs/architecture.md.
"""

from __future__ import annotations

import os
import selectors
import socket
import struct
import sys
import time
from typing import Any, Final, NoReturn

from .._errors import FixtureError, InspectionPathError
from ..fixture import MISS, Ceilings, Cursors, FixtureSet, Outcome, load_fixture
from . import protocol
from .inspection import InspectionRecord, open_inspection_record
from .procs import identity, open_pidfd
from .protocol import ActorConfig
from .wire import Channel, set_timeouts

__all__ = ["Actor", "serve", "serve_forked", "set_process_name", "trim_heap"]

#: Without pidfd the owner is polled at this interval (seconds); see docs/architecture.md.
POLL_INTERVAL: Final = 0.25
_PR_SET_NAME: Final = 15
#: How long the actor waits for the rest of a frame a peer started, in seconds.
_PEER_TIMEOUT: Final = 2.0


class _OwnerWatch:
    """Readable when the owner exits: a pidfd where the kernel has one, else polling."""

    def __init__(self, pid: int, create_time: float, mode: str) -> None:
        self.pid = pid
        self.create_time = create_time
        self.fd: int | None = None
        if mode == "pidfd":
            try:
                self.fd = open_pidfd(pid)  # None where refused: poll instead
            except ProcessLookupError:
                self.dead = True
                return
        # Open the pidfd first, then confirm identity: a PID recycled before the open
        # would otherwise be watched in the owner's place.
        self.dead = identity(pid) != create_time

    def poll_dead(self) -> bool:
        self.dead = self.dead or identity(self.pid) != self.create_time
        return self.dead

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class Actor:
    """One acquisition's state: its cursors over the fixture and its inspection record.

    ``complete`` returns a domain outcome (response bytes, ``MISS`` or ``EXHAUSTED``);
    turning it into a frame is ``protocol``'s job.
    """

    def __init__(self, config: ActorConfig, cached: FixtureSet | None = None) -> None:
        self.private = config.private
        fixture = cached
        if fixture is None:
            fixture = load_fixture(config.fixture, ceilings=Ceilings(**config.ceilings))
            trim_heap()
        self.snapshot_base = fixture.snapshot()
        self.cursors = Cursors(fixture)
        self.record: InspectionRecord | None = None
        if config.inspection_path is not None:
            self.record = open_inspection_record(config.inspection_path)

    def complete(self, request_hash: str) -> bytes | Outcome:
        outcome = self.cursors.take(request_hash)
        if type(outcome) is not bytes and self.record is not None:
            self._record("miss" if outcome is MISS else "exhausted", request_hash)
        return outcome

    def _record(self, event: Any, request_hash: str) -> None:
        assert self.record is not None
        try:
            self.record.append(event, request_hash, self.cursors.calls)
        except OSError:
            pass  # a full disk must not turn a miss into a crash of the actor

    def snapshot(self) -> dict[str, Any]:
        snap = dict(self.snapshot_base)
        snap.update(self.cursors.counters())
        return snap

    def inspect(self) -> dict[str, Any]:
        return self.cursors.inspect()

    def close(self) -> None:
        if self.record is not None:
            self.record.close()


def _listen() -> tuple[socket.socket, bytes]:
    """An AF_UNIX listener; abstract namespace on Linux (nothing left on disk)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if sys.platform.startswith("linux"):
        address = b"\0replay-actor-" + os.urandom(16).hex().encode("ascii")
        sock.bind(address)
    else:  # pragma: no cover - exercised only off Linux
        import tempfile

        path = os.path.join(tempfile.mkdtemp(prefix="replay-actor-"), "actor.sock")
        sock.bind(path)
        address = path.encode()
    sock.listen(64)
    sock.setblocking(False)
    return sock, address


def _same_user(sock: socket.socket) -> bool:
    if not hasattr(socket, "SO_PEERCRED"):  # pragma: no cover - non-Linux
        return True
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    uid: int = struct.unpack("3i", creds)[1]
    return uid == os.getuid()


def serve(primary: Channel, config: ActorConfig, cached: FixtureSet | None = None) -> None:
    """Run one acquisition's actor on its bootstrap channel until it ends."""
    watch = _OwnerWatch(config.owner_pid, config.owner_create_time, config.owner_watch)
    if watch.dead:
        primary.send(protocol.failed("owner", "the owner process is not alive"))
        return
    failure: bytes | None = None
    try:
        actor = Actor(config, cached)
    except FixtureError as exc:
        failure = protocol.fixture_rejected(exc.reason, exc.line)
    except InspectionPathError as exc:
        failure = protocol.failed("inspection", str(exc))
    if failure is not None:
        primary.send(failure)
        return
    listener, address = _listen()
    primary.send(protocol.ready(address))
    try:
        _loop(actor, primary, listener, watch)
    finally:
        actor.close()
        listener.close()
        watch.close()


def _loop(actor: Actor, primary: Channel, listener: socket.socket, watch: _OwnerWatch) -> None:
    sel = selectors.DefaultSelector()
    sel.register(primary.fileno(), selectors.EVENT_READ, primary)
    sel.register(listener.fileno(), selectors.EVENT_READ, listener)
    if watch.fd is not None:
        sel.register(watch.fd, selectors.EVENT_READ, watch)
        poll_timeout: float | None = None
    else:
        poll_timeout = POLL_INTERVAL
    conns: set[Channel] = {primary}
    next_poll = time.monotonic() + POLL_INTERVAL
    while conns:
        events = sel.select(poll_timeout)
        if poll_timeout is not None and time.monotonic() >= next_poll:
            # Checked on every wake-up once due, so a busy actor notices too.
            if watch.poll_dead():
                return
            next_poll = time.monotonic() + POLL_INTERVAL
        for key, _ in events:
            source = key.data
            if source is watch:
                return  # the owner died: nobody is left to own the cursors
            if source is listener:
                _accept(listener, sel, conns)
                continue
            conn: Channel = source
            # A peer never has two requests in flight, but one that does must not
            # leave the second stranded in our buffer, invisible to select().
            while True:
                outcome = _serve_one(actor, conn, primary)
                if outcome is _ENDED:
                    _notify_closed(conns, primary)
                    return
                if outcome is _DROP:
                    _drop(conn, sel, conns)
                    break
                if not conn.pending():
                    break


_DROP: Final = object()
_ENDED: Final = object()


def _serve_one(actor: Actor, conn: Channel, primary: Channel) -> object:
    """Answer one message on ``conn``; say whether to keep it, drop it, or end."""
    try:
        message = conn.recv()
        op = message[:1]
        if op == protocol.COMPLETE:
            outcome = actor.complete(message[1:].decode("ascii"))
            conn.send(protocol.outcome_reply(outcome))
        elif op == protocol.SNAPSHOT:
            conn.send(protocol.json_reply(actor.snapshot()))
        elif op == protocol.INSPECT:
            conn.send(protocol.json_reply(actor.inspect()))
        elif op == protocol.RELEASE:
            conn.send(protocol.RELEASED)
            return _ENDED if conn is primary else _DROP
        else:
            return _DROP  # not our protocol: refuse that peer
    except (EOFError, OSError, UnicodeDecodeError):
        return _DROP
    return None


def _accept(listener: socket.socket, sel: selectors.BaseSelector, conns: set[Channel]) -> None:
    try:
        sock, _ = listener.accept()
    except OSError:
        return
    if not _same_user(sock):
        sock.close()
        return
    sock.setblocking(True)
    # A peer that sends half a frame must not stall the others: reads time out, and
    # that peer is dropped.
    set_timeouts(sock, _PEER_TIMEOUT)
    conn = Channel.from_socket(sock)
    conns.add(conn)
    sel.register(conn.fileno(), selectors.EVENT_READ, conn)


def _drop(conn: Channel, sel: selectors.BaseSelector, conns: set[Channel]) -> None:
    sel.unregister(conn.fileno())
    conns.discard(conn)
    conn.close()


def _notify_closed(conns: set[Channel], primary: Channel) -> None:
    for conn in conns:
        if conn is not primary:
            try:
                conn.send(protocol.GOODBYE)
            except OSError:
                pass


def trim_heap() -> None:
    """Hand the loader's freed scratch memory back to the kernel (glibc keeps it
    otherwise, and a forked actor would count it in its RSS); best effort."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def set_process_name(name: str) -> None:
    """Name this process in ``ps``/psutil (``prctl(PR_SET_NAME)``), so an actor forked
    from the zygote is told apart from it; best effort, Linux only."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(_PR_SET_NAME, name[:15].encode("ascii"), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def serve_forked(fd: int, config: ActorConfig, cached: FixtureSet | None) -> NoReturn:
    """The actor's life in a child the zygote just forked; never returns."""
    try:
        set_process_name("replay-actor")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, fileno=fd)
        set_timeouts(sock, _PEER_TIMEOUT)
        serve(Channel.from_socket(sock), config, cached)
    finally:
        # Skip interpreter finalisation: tearing down a 100k-entry table object by
        # object would delay the exit that a dead owner is waiting for, and the
        # zygote's state inherited by this child is not ours to finalise.
        os._exit(0)
