"""The cursor actor: the one process per acquisition that owns the sequence cursors.

Runs in: the actor (forked by the zygote, ``zygote.py``).

::

    acquirer                                   actor (this module)
    --------                                   -----------------------------------------
    socketpair ---- config, via the zygote --->  load + validate the fixture (or reuse
                                                 the zygote's parse of the same file)
               <--- READY (listener address) -   listen on an abstract AF_UNIX socket
    copies ------- connect (same uid only) ---->  one non-blocking peer per connection
    handle ------- COMPLETE + request hash ---->  Cursors.take(hash) (the only mutable state)
                   (COMPLETE_VECTORS: the same, answered VECTORS when float32 holds them)
           <------ RESPONSE + bytes -----------   or MISS / EXHAUSTED
                                               watches: owner pidfd (psutil identity
                                               confirmed), every connection's EOF

The loop is single-threaded and event-driven: ``epoll`` waits on the connections,
the listener and the owner's pidfd together (``select.epoll`` itself, not ``selectors``;
``poll`` where there is no epoll; never ``select``, which refuses a descriptor past
1,023), so an idle actor sleeps in the kernel and the owner's death is an event, not a
poll. Every connection is non-blocking with its own input and output buffers
(``_Peer``), so a peer that sends half a frame or never reads its replies holds up no
other caller; a peer with 1 MiB of replies unread gets
no further answers until it reads (flow control); the caps (``protocol.MAX_REQUEST``,
``protocol.MAX_UNREAD``) and the hash's form are enforced per peer, and a peer that
breaks them is dropped alone. It exits when the acquisition is released,
when the owner dies, or when the last connection closes. It never opens an internet
socket, never forks, and never imports the caller's ``__main__`` (its zygote is started
as ``python -P -c``, not through multiprocessing's spawn preparation). The frames are
``protocol.py``'s; the table of them is in docs/architecture.md.
"""

from __future__ import annotations

import errno
import gc
import os
import re
import select
import signal
import socket
import struct
import sys
import time
from collections import deque
from itertools import islice
from typing import Any, Final, NoReturn

from ..._errors import FixtureError, InspectionPathError
from ...fixture import EXHAUSTED, MISS, Ceilings, Cursors, FixtureSet, Outcome, load_fixture
from ..core import protocol
from ..core.protocol import ActorConfig
from ..io.inspection import InspectionRecord, open_inspection_record
from ..io.libc import LibcFunction
from ..io.procs import identity, open_pidfd
from ..io.waits import readable, ready
from ..io.wire import Channel, set_timeouts

__all__ = ["Actor", "serve", "serve_forked", "set_process_name", "trim_heap"]

#: Without pidfd the owner is polled at this interval (seconds); see docs/architecture.md.
POLL_INTERVAL: Final = 0.25
_PR_SET_NAME: Final = 15
_PRCTL: Final = LibcFunction(
    "prctl", ("c_int", "c_char_p", "c_ulong", "c_ulong", "c_ulong"), "c_int"
)
#: Bounds the bootstrap reply's write (the one blocking write of an actor's life).
_BOOT_TIMEOUT: Final = 2.0


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
            fixture.snapshot()  # its scratch (the set hash's input) is freed before the trim
            gc.collect()
            trim_heap()  # hand the loader's scratch back: it must not count in our RSS
        self.cursors = Cursors(fixture)
        #: ``COMPLETE_VECTORS`` reply payloads of single-response entries, converted once
        #: (``protocol.vectors_reply``), within ``_VECTORS_KEPT`` bytes in all.
        self._vectors: dict[str, bytes] = {}
        self._vectors_size = 0
        #: Single-response entries whose vectors float32 does not hold: answered as stored.
        self._as_stored: set[str] = set()
        self.record: InspectionRecord | None = None
        self.record_served = config.inspection_served
        if config.inspection_path is not None:
            self.record = open_inspection_record(config.inspection_path)

    def complete(self, request_hash: str) -> bytes | Outcome:
        outcome = self.cursors.take(request_hash)
        if self.record is not None:
            if type(outcome) is not bytes:
                self._record("miss" if outcome is MISS else "exhausted", request_hash)
            elif self.record_served:
                self._record("served", request_hash)
        return outcome

    def complete_vectors(self, request_hash: str) -> bytes | Outcome:
        """``complete``, answered as the reply payload to ``COMPLETE_VECTORS``
        (``protocol.vectors_reply``): the same cursors, counters and record."""
        kept = self._vectors.get(request_hash)
        if kept is not None and self.cursors.take_single(request_hash):
            if self.record is not None and self.record_served:
                self._record("served", request_hash)
            return kept
        outcome = self.complete(request_hash)
        if type(outcome) is not bytes:
            return outcome
        if request_hash in self._as_stored:
            return protocol.RESPONSE + outcome  # known not to convert: not tried again
        payload = protocol.vectors_reply(outcome)
        if self.cursors.fixture.single(request_hash):
            self._keep(request_hash, payload)
        return payload

    def _keep(self, request_hash: str, payload: bytes) -> None:
        """Remember a single-response entry's ``COMPLETE_VECTORS`` answer: its converted
        reply (within ``_VECTORS_KEPT`` bytes in all), or that it is answered as stored."""
        if payload[:1] != protocol.VECTORS:
            self._as_stored.add(request_hash)
        elif self._vectors_size + len(payload) <= _VECTORS_KEPT:
            self._vectors[request_hash] = payload
            self._vectors_size += len(payload)

    def _record(self, event: Any, request_hash: str) -> None:
        assert self.record is not None
        try:
            self.record.append(event, request_hash, self.cursors.calls)
        except OSError:
            pass  # a full disk must not turn a miss into a crash of the actor

    def snapshot(self) -> dict[str, Any]:
        # The safe snapshot is the fixture's, computed when first asked for: a holder
        # computes the set hash after forking its first actor (``holder.py``), so that
        # actor computes its own only if someone asks.
        snap = self.cursors.fixture.snapshot()
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
    sock.listen(128)
    sock.setblocking(False)
    return sock, address


def _same_user(sock: socket.socket) -> bool:
    if not hasattr(socket, "SO_PEERCRED"):  # pragma: no cover - non-Linux
        return True
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    uid: int = struct.unpack("3i", creds)[1]
    return uid == os.getuid()


def serve(
    primary: Channel, config: ActorConfig, cached: FixtureSet | FixtureError | None = None
) -> None:
    """Run one acquisition's actor on its bootstrap channel until it ends.

    ``cached`` is how the actor gets its table: a copy validated by the process that
    forked it (the zygote's cache, or a holder, which both checked the file still holds
    exactly its bytes), that process's rejection of the file, or None (load it here)."""
    watch = _OwnerWatch(config.owner_pid, config.owner_create_time, config.owner_watch)
    if watch.dead:
        primary.send(protocol.failed("owner", "the owner process is not alive"))
        return
    if isinstance(cached, FixtureError):
        primary.send(protocol.fixture_rejected(cached.reason, cached.line))
        return
    failure: bytes | None = None
    abandon = _AbandonWatch(primary.fileno()) if cached is None else None
    try:
        actor = Actor(config, cached)
    except FixtureError as exc:
        failure = protocol.fixture_rejected(exc.reason, exc.line)
    except InspectionPathError as exc:
        failure = protocol.failed("inspection", str(exc))
    finally:
        if abandon is not None:
            abandon.stop()
    if failure is not None:
        primary.send(failure)
        return
    listener, address = _listen()
    try:
        try:
            primary.send(protocol.ready(address))
        except OSError:
            return  # the acquirer gave up on us (its acquire timed out): nothing to serve
        _loop(actor, primary.detach(), listener, watch)
    finally:
        actor.close()
        listener.close()
        watch.close()


class _AbandonWatch:
    """While the actor parses its own fixture: exit as soon as the acquirer hangs up.

    An acquire whose ``timeout`` ran out closes its end of the bootstrap channel; an
    actor still parsing for it would otherwise burn a core for nobody. The acquirer
    sends nothing before READY, so the channel turning readable means EOF. Checked on
    a 50 ms interval timer (SIGALRM), since the parse itself cannot look up.
    """

    _EVERY: Final = 0.05

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._previous = signal.signal(signal.SIGALRM, self._check)
        signal.setitimer(signal.ITIMER_REAL, self._EVERY, self._EVERY)

    def _check(self, signum: int, frame: object) -> None:
        if readable(self._fd):
            os._exit(0)  # nobody waits for this actor any more

    def stop(self) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        signal.signal(signal.SIGALRM, self._previous)


class _Peer:
    """One connection's non-blocking state: what it sent that is not yet answered, and
    the replies it has not read yet.

    Input is judged by the length prefix before anything is buffered (a request frame
    over ``protocol.MAX_REQUEST`` drops the peer). Replies wait in ``outbox`` while the
    peer does not read; once ``_PAUSE_AT`` bytes wait, the peer's further requests wait
    unanswered (``paused``: not even read from the socket) until it reads, so a peer
    that pipelines and reads slowly is never dropped and one that never reads holds
    little. More than ``protocol.MAX_UNREAD`` bytes waiting drops the peer.
    """

    __slots__ = ("events", "fd", "inbox", "outbox", "paused", "primary", "unsent")

    def __init__(self, fd: int, *, primary: bool = False) -> None:
        self.fd = fd
        self.primary = primary
        self.inbox = bytearray()
        self.outbox: deque[bytes | memoryview] = deque()
        self.unsent = 0
        self.paused = False
        self.events = _IN

    def flush(self) -> bool:
        """Write what the socket takes now; False if the peer is to be dropped."""
        outbox = self.outbox
        fd = self.fd
        if len(outbox) == 1:  # the common case: one reply, written whole at once
            data = outbox[0]
            try:
                written = os.write(fd, data)
            except BlockingIOError:
                return self.unsent <= _MAX_UNREAD
            except OSError:
                return False
            self.unsent -= written
            if written == len(data):
                outbox.clear()
                return self.unsent <= _MAX_UNREAD
            outbox[0] = memoryview(data)[written:]
        return self._flush_queue()

    def _flush_queue(self) -> bool:
        """``flush`` of several replies, or of what is left of one: written together
        (``writev``) until the socket takes no more."""
        outbox = self.outbox
        fd = self.fd
        while outbox:
            try:
                if len(outbox) == 1:
                    written = os.write(fd, outbox[0])
                else:
                    written = os.writev(fd, list(islice(outbox, _IOV_MAX)))
            except BlockingIOError:
                break
            except OSError:
                return False
            self.unsent -= written
            self._consume(written)
        return self.unsent <= _MAX_UNREAD

    def _consume(self, written: int) -> None:
        """Drop ``written`` bytes from the head of the outbox."""
        outbox = self.outbox
        while written:
            head = outbox[0]
            if written >= len(head):
                written -= len(head)
                outbox.popleft()
            else:
                outbox[0] = memoryview(head)[written:]
                written = 0

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)


#: Replies waiting for a peer, in bytes, past which its next requests wait unanswered
#: until it reads (flow control); far below ``protocol.MAX_UNREAD``.
_PAUSE_AT: Final = 1 << 20
#: How long an ending actor waits, in all, for peers to take their goodbye (seconds).
_LINGER: Final = 1.0
#: At most this many buffers per ``writev`` (Linux's IOV_MAX is 1024).
_IOV_MAX: Final = 512
_READ_CHUNK: Final = 65536
_DROP: Final = object()
_ENDED: Final = object()
_HASH_RE: Final = re.compile(rb"sha256:[0-9a-f]{64}")
_COMPLETE_SIZE: Final = 1 + 71
_MISS_FRAME: Final = protocol.frame(protocol.MISS)
_RESPONSE: Final = protocol.RESPONSE
_MAX_UNREAD: Final = protocol.MAX_UNREAD
_EXHAUSTED_FRAME: Final = protocol.frame(protocol.EXHAUSTED)
#: The most bytes of converted vector replies an actor keeps (``Actor.complete_vectors``).
_VECTORS_KEPT: Final = 64 * 1024 * 1024
_RELEASED_FRAME: Final = protocol.frame(protocol.RELEASED)
_GOODBYE_FRAME: Final = protocol.frame(protocol.GOODBYE)
if hasattr(select, "epoll"):
    # epoll itself, not ``selectors``: its wrapper costs the actor ~2 us a request.
    _Poller: Any = select.epoll
    _IN = select.EPOLLIN
    _OUT = select.EPOLLOUT
else:  # pragma: no cover - exercised only off Linux

    class _Poller:  # type: ignore[no-redef]
        """``select.poll`` with epoll's interface (timeouts in seconds, ``close``)."""

        def __init__(self) -> None:
            self._poll = select.poll()
            self.register = self._poll.register
            self.modify = self._poll.modify
            self.unregister = self._poll.unregister

        def poll(self, timeout: float) -> list[tuple[int, int]]:
            return self._poll.poll(None if timeout < 0 else timeout * 1000)

        def close(self) -> None:
            pass

    _IN = select.POLLIN
    _OUT = select.POLLOUT
#: Every event but "writable" means "read to see": data, hang-up or error.
_NOT_OUT = ~_OUT
#: After accept() ran out of descriptors, the listener is retried this often (seconds).
_RELISTEN: Final = 0.25
_EMFILE: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class _Loop:
    """The actor's event loop: every peer non-blocking, none able to hold up another."""

    def __init__(
        self, actor: Actor, primary_fd: int, listener: socket.socket, watch: _OwnerWatch
    ) -> None:
        self.actor = actor
        self.listener = listener
        self.watch = watch
        self.poller = _Poller()
        self.sources: dict[int, object] = {}  # fd -> its peer, the listener or the watch
        self.peers: dict[int, _Peer] = {}
        self.listening = False
        self.relisten_at = 0.0
        os.set_blocking(primary_fd, False)
        self.primary = self._add(primary_fd, primary=True)
        self._listen(True)
        if watch.fd is not None:
            self._watch(watch.fd, watch)

    def _watch(self, fd: int, source: object) -> None:
        self.poller.register(fd, _IN)
        self.sources[fd] = source

    def _unwatch(self, fd: int) -> None:
        self.poller.unregister(fd)
        del self.sources[fd]

    def _add(self, fd: int, *, primary: bool = False) -> _Peer:
        peer = _Peer(fd, primary=primary)
        self.peers[fd] = peer
        self._watch(fd, peer)
        return peer

    def _listen(self, on: bool) -> None:
        if on and not self.listening:
            self._watch(self.listener.fileno(), self.listener)
        elif not on and self.listening:
            self._unwatch(self.listener.fileno())
        self.listening = on

    def run(self) -> None:
        watch = self.watch
        poll_timeout = None if watch.fd is not None else POLL_INTERVAL
        next_poll = time.monotonic() + POLL_INTERVAL
        poll = self.poller.poll
        sources = self.sources
        listener = self.listener
        while self.peers:
            events = poll(self._wait(poll_timeout))
            self._relisten_when_due()
            if poll_timeout is not None and time.monotonic() >= next_poll:
                # Checked on every wake-up once due, so a busy actor notices too.
                if watch.poll_dead():
                    return
                next_poll = time.monotonic() + POLL_INTERVAL
            for fd, mask in events:
                source = sources.get(fd)
                if source is None:
                    continue  # dropped earlier in this round
                if source is watch:
                    return  # the owner died: nobody is left to own the cursors
                if source is listener:
                    self._accept()
                    continue
                # The only other source is a peer.
                if self._peer_event(source, mask):  # type: ignore[arg-type]
                    return

    def _wait(self, poll_timeout: float | None) -> float:
        """How long the next poll may sleep (-1: until an event)."""
        timeout = poll_timeout
        if not self.listening:
            # Out of descriptors earlier: try the listener again now and then, in case
            # descriptors were freed another way than by a peer leaving.
            wait = max(0.0, self.relisten_at - time.monotonic())
            timeout = wait if timeout is None else min(timeout, wait)
        return -1 if timeout is None else timeout

    def _relisten_when_due(self) -> None:
        if not self.listening and time.monotonic() >= self.relisten_at:
            self._listen(True)

    def _peer_event(self, peer: _Peer, mask: int) -> bool:
        """A peer is ready: answer what it sent, write what it takes; True when the
        actor ends (a peer asked it to)."""
        outcome = None
        # Readable, or hung up / in error (the read then says so), as selectors do.
        if mask & _NOT_OUT and not peer.paused:
            outcome = self._readable(peer)
        if outcome is None:
            outcome = self._pump(peer)
        if outcome is _ENDED:
            self._goodbye()
            return True
        if outcome is _DROP:
            self._drop(peer)
            return False
        # Wait for room only while replies are pending (an idle peer watched for
        # writing would wake us forever), and for requests unless paused.
        wanted = 0 if peer.paused else _IN
        if peer.outbox:
            wanted |= _OUT
        if wanted != peer.events:
            peer.events = wanted
            self.poller.modify(peer.fd, wanted)
        return False

    def _readable(self, peer: _Peer) -> object:
        """Take what the peer sent and answer the whole frames in it."""
        try:
            chunk = os.read(peer.fd, _READ_CHUNK)
        except BlockingIOError:
            return None
        except OSError:
            return _DROP
        if not chunk:
            return _DROP
        inbox = peer.inbox
        if inbox:
            inbox += chunk
            return self._frames(peer, inbox)
        return self._frames(peer, chunk)  # the common case: no copy at all

    def _pump(self, peer: _Peer) -> object:
        """Write what the peer takes; answer its waiting requests once it has read."""
        while True:
            if not peer.flush():
                return _DROP
            if not peer.paused or peer.unsent >= _PAUSE_AT:
                return None
            peer.paused = False
            outcome = self._frames(peer, peer.inbox)
            if outcome is not None:
                return outcome

    def _frames(self, peer: _Peer, data: bytes | bytearray) -> object:
        """Answer every whole frame in ``data`` in order (stopping while the peer has
        too many unread replies); keep the rest in the peer's inbox."""
        spans, offset, too_large = protocol.split_frames(data, 0, protocol.MAX_REQUEST)
        answer = self._answer
        for start, stop in spans:
            if peer.unsent >= _PAUSE_AT:
                offset = start - 4
                break
            outcome = answer(peer, data[start:stop])
            if outcome is not None:
                return outcome
        if len(data) - offset >= 4 and peer.unsent >= _PAUSE_AT:
            peer.paused = True  # the rest is answered (or judged) when it has read
        elif too_large:
            return _DROP  # judged by its prefix: nothing of it is buffered
        inbox = peer.inbox
        if data is inbox:
            del inbox[:offset]  # small: one read, or frames waiting while paused
        elif offset < len(data):
            inbox += memoryview(data)[offset:]
        return None

    def _answer(self, peer: _Peer, message: bytes | bytearray) -> object:
        actor = self.actor
        op = message[:1]
        outbox = peer.outbox
        if op == protocol.COMPLETE or op == protocol.COMPLETE_VECTORS:
            # Only a well-formed hash reaches the cursors and the inspection record.
            if len(message) != _COMPLETE_SIZE or _HASH_RE.fullmatch(message, 1) is None:
                return _DROP
            self._complete(peer, op, message[1:].decode("ascii"))
        elif op == protocol.SNAPSHOT or op == protocol.INSPECT:
            if len(message) != 1:
                return _DROP
            value = actor.snapshot() if op == protocol.SNAPSHOT else actor.inspect()
            frame = protocol.frame(protocol.json_reply(value))
            outbox.append(frame)
            peer.unsent += len(frame)
        elif op == protocol.RELEASE and len(message) == 1:
            outbox.append(_RELEASED_FRAME)
            peer.unsent += len(_RELEASED_FRAME)
            peer.flush()  # best effort: the peer asked to go, and is gone next
            return _ENDED if peer.primary else _DROP
        else:
            return _DROP  # not our protocol: refuse that peer
        if peer.unsent > _MAX_UNREAD:
            return _DROP  # it asks and never reads: it alone pays
        return None

    def _complete(self, peer: _Peer, op: bytes | bytearray, request_hash: str) -> None:
        """Answer one ``COMPLETE`` (or ``COMPLETE_VECTORS``) into ``peer``'s outbox."""
        outbox = peer.outbox
        if op == protocol.COMPLETE:
            outcome = self.actor.complete(request_hash)
            opcode = _RESPONSE
        else:
            outcome = self.actor.complete_vectors(request_hash)
            opcode = b""  # (the payload carries its own)
        if type(outcome) is bytes:
            size = len(outcome) + len(opcode)
            head = size.to_bytes(4, "big") + opcode
            if size <= 65536:
                frame = head + outcome
                outbox.append(frame)
                peer.unsent += len(frame)
            else:  # a large response goes out as it is, not copied
                outbox.append(head)
                outbox.append(outcome)
                peer.unsent += 4 + size
        else:
            frame = _EXHAUSTED_FRAME if outcome is EXHAUSTED else _MISS_FRAME
            outbox.append(frame)
            peer.unsent += len(frame)

    def _accept(self) -> None:
        try:
            sock, _ = self.listener.accept()
        except BlockingIOError:
            return
        except OSError as exc:
            if exc.errno in _EMFILE:
                # Out of descriptors: the listener would stay readable and spin the
                # loop. Stop watching it until a peer leaves and frees one (or for
                # ``_RELISTEN`` seconds); waiting peers stay in the backlog meanwhile.
                self._listen(False)
                self.relisten_at = time.monotonic() + _RELISTEN
            return
        if not _same_user(sock):
            sock.close()
            return
        sock.setblocking(False)
        self._add(sock.detach())

    def _drop(self, peer: _Peer) -> None:
        self._unwatch(peer.fd)
        del self.peers[peer.fd]
        peer.close()
        self._listen(True)  # a descriptor is free again

    def _goodbye(self) -> None:
        """The acquisition ended: tell every other peer, after the replies it is owed.

        A copy that gets ``Z`` knows the acquirer released (``ProviderClosed``); one
        that only sees the connection close cannot tell that from a crash. So the
        actor lingers, at most ``_LINGER`` seconds in all, for peers whose socket is
        full; a peer that does not read by then only sees the close.
        """
        waiting = []
        for peer in self.peers.values():
            if peer is not self.primary:
                peer.outbox.append(_GOODBYE_FRAME)
                peer.unsent += len(_GOODBYE_FRAME)
                if peer.flush() and peer.outbox:
                    waiting.append(peer)
        deadline = time.monotonic() + _LINGER
        while waiting:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            writable = set(ready([p.fd for p in waiting], remaining, write=True))
            waiting = [p for p in waiting if p.fd not in writable or (p.flush() and p.outbox)]

    def close(self) -> None:
        for peer in self.peers.values():
            peer.close()
        self.peers.clear()
        self.poller.close()


def _loop(actor: Actor, primary_fd: int, listener: socket.socket, watch: _OwnerWatch) -> None:
    loop = _Loop(actor, primary_fd, listener, watch)
    try:
        loop.run()
    finally:
        loop.close()


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
    from the zygote is told apart from it; best effort, Linux only. The function is
    bound once, when the zygote names itself, and every actor it forks inherits it bound:
    loading the C library in each child cost a few hundred microseconds of acquire."""
    prctl = _PRCTL.bind()
    if prctl is not None:
        prctl(_PR_SET_NAME, name[:15].encode("ascii"), 0, 0, 0)


def serve_forked(
    fd: int, config: ActorConfig, cached: FixtureSet | FixtureError | None
) -> NoReturn:
    """The actor's life in a child the zygote just forked; never returns."""
    try:
        set_process_name("replay-actor")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, fileno=fd)
        set_timeouts(sock, _BOOT_TIMEOUT)
        serve(Channel.from_socket(sock), config, cached)
    finally:
        # Skip interpreter finalisation: tearing down a 100k-entry table object by
        # object would delay the exit that a dead owner is waiting for, and the
        # zygote's state inherited by this child is not ours to finalise.
        os._exit(0)
