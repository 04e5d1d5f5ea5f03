"""The holder: one process per large fixture, keeping one validated copy that the actors
of every acquisition of it share.

Runs in: the holder, a child the zygote forks for a fixture file larger than
``zygote.CACHE_ENTRY_BYTES`` (``hold``, running ``forkloop.serve`` as the zygote does),
and the zygote (``start_holder``, ``HolderRef``: its side).

::

    acquirer --(token, config + socket end)--> zygote --(same, forwarded)--> holder
                                                                              | same_file?
                                                                              |  else load
                                                                              | fork
    acquirer <-------- TOKEN PID ------------- zygote <---- TOKEN PID ------- holder
    acquirer <---------------------- READY / FE ----------------------------- actor

The holder loads and validates the fixture once, then forks an actor per acquisition:
each actor inherits the table copy-on-write, so N acquisitions hold one copy (the
table refers into one buffer, ``FixtureSet``, so serving a response writes to no page of
it). Before every fork the holder checks that the file still holds exactly the bytes it
validated (``FixtureSet.same_file``: a byte-for-byte comparison, whatever the file's
timestamps say); if not, it loads the file again, and a rejection is reported by the
actor with its reason and line, as for any load. An actor already serving keeps the
copy it was forked with: its acquisition's fixture does not change under it.

Memory after release: the holder counts its live actors (a pidfd each). Once it has
none and no request came for ``idle`` seconds, it offers to go (``IDLE``); the zygote,
which may have forwarded a request meanwhile, stops routing to it and answers ``EXIT``,
and the holder exits: the whole copy is returned to the kernel with the process. A
holder whose zygote is gone (EOF) forks nothing more and exits once its last actor has,
so that no actor is orphaned. Keeping the large table out of the zygote itself keeps
every other fork cheap (P5: a fork copies the forking process's page tables).
"""

from __future__ import annotations

import gc
import os
import signal
import socket
import time
from typing import Any, NoReturn

import msgspec

from ..._errors import FixtureError
from ...fixture import Ceilings, FixtureSet, load_shareable
from ..core import control
from ..core.control import Request
from ..core.protocol import ActorConfig
from . import forkloop
from .actor import set_process_name, trim_heap

__all__ = ["HoldSource", "HolderRef", "hold", "start_holder"]

#: What an actor is forked with: the shared table, or the rejection to report.
HoldSource = FixtureSet | FixtureError


class _Held:
    """The holder's one fixture: loaded on first use, reloaded when the file changed."""

    def __init__(self, path: str, ceilings: Ceilings) -> None:
        self.path = path
        self.ceilings = ceilings
        self.fixture: FixtureSet | None = None
        #: The pipe of the helper computing the held copy's snapshot, if one runs.
        self.summary: int | None = None
        self.summarised = False
        self.loads = 0

    def forget_summary(self) -> None:
        """The held copy is replaced: a helper's answer would be for the old one."""
        if self.summary is not None:
            os.close(self.summary)
            self.summary = None
        self.summarised = False

    def current(self) -> HoldSource:
        """The validated copy if the file still holds exactly its bytes, else a fresh
        load (or the rejection of it)."""
        if self.fixture is not None and self.fixture.same_file(self.path):
            return self.fixture
        # Changed, or never loaded: drop the old copy before reading the new one, so
        # the two are never held together (actors forked earlier keep theirs).
        self.fixture = None
        self.forget_summary()
        gc.collect()
        trim_heap()
        self.loads += 1
        try:
            fixture = load_shareable(self.path, ceilings=self.ceilings)
        except FixtureError as exc:
            return FixtureError(exc.reason, exc.line)  # no traceback, no frames kept
        fixture.share()  # into shared memory: every later fork stays cheap
        gc.collect()
        trim_heap()  # what the load freed must not stay in every actor's pages
        gc.freeze()  # keep the table out of the actors' collections
        self.fixture = fixture
        return fixture

    def summarise_apart(self, close_in_child: list[socket.socket | int]) -> None:
        """Once the first actor is forked: fork a helper that computes the held copy's
        safe snapshot (its set hash walks the whole table) and hands it back
        (``adopt``). The first acquisition does not wait for that walk, and it happens
        in the helper: a walk here would write reference counts to the pages the holder
        shares with its first actor, copying them. Later actors inherit the result."""
        fixture = self.fixture
        if fixture is None or self.summary is not None or self.summarised:
            return
        read_end, write_end = os.pipe2(os.O_CLOEXEC)
        pid = os.fork()
        if pid == 0:
            try:
                os.close(read_end)
                for held_open in close_in_child:
                    os.close(held_open if isinstance(held_open, int) else held_open.fileno())
                os.write(write_end, msgspec.json.encode(fixture.summary()))
            finally:
                os._exit(0)
        os.close(write_end)
        self.summary = read_end

    def adopt(self) -> None:
        """Take the helper's summary (its pipe is readable); nothing if it died."""
        assert self.summary is not None and self.fixture is not None
        try:
            message = os.read(self.summary, control.MAX_MESSAGE)
            summary = msgspec.json.decode(message, type=tuple[str, int, int])
        except (OSError, msgspec.DecodeError):
            pass  # (each actor then computes its own, when asked)
        else:
            self.fixture.adopt_summary(summary)
        os.close(self.summary)
        self.summary = None
        self.summarised = True


class _Holder:
    """The holder's part of the fork-and-reap loop (``forkloop.Forker``): its one
    fixture, its live actors (a pidfd each), and when it last had something to do."""

    def __init__(self, channel: socket.socket, held: _Held, idle: float) -> None:
        self.channel = channel
        self.held = held
        self.idle = idle
        self.actors: dict[int, int] = {}  # pidfd -> pid
        self.quiet_since = time.monotonic()
        self.offered = False

    def watched(self) -> list[Any]:
        if self.held.summary is not None:
            return [*self.actors, self.held.summary]
        return list(self.actors)

    def timeout(self) -> float | None:
        if self.actors or self.offered:
            return None  # an actor's end, or the zygote's EXIT, wakes us
        return max(0.0, self.quiet_since + self.idle - time.monotonic())

    def other(self, readable: list[Any]) -> None:
        for fd in readable:
            if fd == self.held.summary:
                self.held.adopt()
            elif fd in self.actors:  # an actor ended
                del self.actors[fd]
                os.close(fd)
                if not self.actors:
                    self.quiet_since = time.monotonic()
        if self.channel in readable:
            self.quiet_since = time.monotonic()  # a request: not idle
        elif (
            not self.actors
            and not self.offered
            and time.monotonic() >= self.quiet_since + self.idle
        ):
            self.channel.send(control.IDLE)
            self.offered = True

    def route(self, message: bytes, request: Request, fd: int) -> bool:
        return False  # a holder forks every request it gets

    def fixture(self, config: ActorConfig) -> HoldSource:
        return self.held.current()

    def in_child(self) -> None:
        self.channel.close()
        for fd in self.actors:
            os.close(fd)

    def forked(self, pid: int) -> None:
        try:
            self.actors[os.pidfd_open(pid)] = pid
        except ProcessLookupError:
            pass  # gone already (and reaped: SIGCHLD is ignored)
        self.quiet_since = time.monotonic()

    def replied(self) -> None:
        if self.actors:  # the acquirer has its reply: the set hash is walked apart
            self.held.summarise_apart([self.channel, *self.actors])

    def close(self) -> None:
        self.channel.close()
        for fd in self.actors:
            os.close(fd)


def hold(channel: socket.socket, path: str, ceilings: Ceilings, idle: float) -> NoReturn:
    """The holder's life (in the child the zygote forked); never returns.

    Requests arrive as the zygote received them (``core/control.py``: ``TOKEN SP config``
    with the actor's socket end); each reply, ``TOKEN SP pid`` or ``TOKEN SP -``, goes
    back to the zygote, which relays it to the acquirer.
    """
    try:
        set_process_name("replay-holder")
        holder = _Holder(channel, _Held(path, ceilings), idle)
    except BaseException:
        os._exit(0)
    forkloop.serve(holder)


class HolderRef:
    """The zygote's side of one holder: its channel, and what it holds."""

    __slots__ = ("channel", "fd", "key", "pending", "pid")

    def __init__(self, key: tuple[str, str], pid: int, channel: socket.socket) -> None:
        self.key = key
        self.pid = pid
        self.channel = channel
        self.fd = channel.fileno()  # its key among the live holders, even once closed
        # Tokens forwarded and not yet answered: if the holder dies, the zygote answers
        # them ("no actor") so their acquirers need not wait for their timeout.
        self.pending: set[bytes] = set()

    def fileno(self) -> int:
        """For ``poll`` (the fork-and-reap loop waits on it)."""
        return self.fd


def start_holder(
    key: tuple[str, str],
    config: ActorConfig,
    idle: float,
    close_in_child: list[socket.socket],
) -> HolderRef:
    """Fork a holder for ``config``'s fixture and ceilings (in the zygote)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        try:
            ours.close()
            for sock in close_in_child:
                sock.close()
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            hold(theirs, config.fixture, Ceilings(**config.ceilings), idle)
        finally:
            os._exit(0)
    theirs.close()
    ours.setblocking(False)  # a holder that does not read never blocks the zygote
    return HolderRef(key, pid, ours)
