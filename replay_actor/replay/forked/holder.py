"""The holder: one process per large fixture, keeping one validated copy that the actors
of every acquisition of it share.

Runs in: the holder, a child the zygote forks for a fixture file larger than
``zygote.CACHE_ENTRY_BYTES`` (``hold``), and the zygote (``Holders``, its side).

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
import select
import signal
import socket
import time
from typing import Final, NoReturn

import msgspec

from ..._errors import FixtureError
from ...fixture import Ceilings, FixtureSet, load_shareable
from ..core.protocol import ActorConfig
from .actor import serve_forked, set_process_name, trim_heap

__all__ = ["EXIT", "IDLE", "HoldSource", "HolderRef", "hold", "start_holder"]

#: holder -> zygote: no actor left and nothing asked for ``idle`` seconds; may I go?
IDLE: Final = b"idle"
#: zygote -> holder: nothing more will be routed to you; go once your actors have.
EXIT: Final = b"exit"
_MAX_MESSAGE: Final = 1 << 20

#: What an actor is forked with: the shared table, or the rejection to report.
HoldSource = FixtureSet | FixtureError


class _Held:
    """The holder's one fixture: loaded on first use, reloaded when the file changed."""

    def __init__(self, path: str, ceilings: Ceilings) -> None:
        self.path = path
        self.ceilings = ceilings
        self.fixture: FixtureSet | None = None
        self.loads = 0

    def current(self) -> HoldSource:
        """The validated copy if the file still holds exactly its bytes, else a fresh
        load (or the rejection of it)."""
        if self.fixture is not None and self.fixture.same_file(self.path):
            return self.fixture
        # Changed, or never loaded: drop the old copy before reading the new one, so
        # the two are never held together (actors forked earlier keep theirs).
        self.fixture = None
        gc.collect()
        trim_heap()
        self.loads += 1
        try:
            fixture = load_shareable(self.path, ceilings=self.ceilings)
        except FixtureError as exc:
            return FixtureError(exc.reason, exc.line)  # no traceback, no frames kept
        fixture.snapshot()  # computed once here, inherited by every actor
        fixture.share()  # into shared memory: every later fork stays cheap
        gc.collect()
        trim_heap()  # what the load freed must not stay in every actor's pages
        gc.freeze()  # keep the table out of the actors' collections
        self.fixture = fixture
        return fixture


def _hung_up(fd: int) -> bool:
    """True if the acquirer closed its end already (it sends nothing before READY)."""
    readable, _, _ = select.select([fd], [], [], 0)
    return bool(readable)


def hold(  # noqa: PLR0912, PLR0915
    channel: socket.socket, path: str, ceilings: Ceilings, idle: float
) -> NoReturn:
    """The holder's life (in the child the zygote forked); never returns.

    Requests arrive as the zygote received them (``TOKEN SP config`` with the actor's
    socket end); each reply, ``TOKEN SP pid`` or ``TOKEN SP -``, goes back to the zygote,
    which relays it to the acquirer.
    """
    try:
        set_process_name("replay-holder")
        held = _Held(path, ceilings)
        actors: dict[int, int] = {}  # pidfd -> pid
        quiet_since = time.monotonic()
        offered = False
        while True:
            timeout: float | None = None
            if not actors and not offered:
                timeout = max(0.0, quiet_since + idle - time.monotonic())
            watched: list[socket.socket | int] = [channel, *actors]
            readable, _, _ = select.select(watched, [], [], timeout)
            for fd in readable:
                if fd in actors:  # an actor ended
                    del actors[fd]
                    os.close(fd)
                    if not actors:
                        quiet_since = time.monotonic()
            if channel not in readable:
                if not actors and not offered and time.monotonic() >= quiet_since + idle:
                    channel.send(IDLE)
                    offered = True
                continue
            try:
                message, fds, _, _ = socket.recv_fds(channel, _MAX_MESSAGE, 1)
            except OSError:
                break
            if not message or message == EXIT:
                break
            if len(fds) != 1:
                for fd in fds:
                    os.close(fd)
                continue
            token, _, body = message.partition(b" ")
            reply = token + b" -"
            try:
                config = msgspec.json.decode(body, type=ActorConfig)
            except msgspec.DecodeError:
                config = None
            if config is not None and not _hung_up(fds[0]):
                source = held.current()
                if _hung_up(fds[0]):
                    pass  # gave up while we loaded: nobody to serve
                else:
                    pid = os.fork()
                    if pid == 0:
                        channel.close()
                        for fd in actors:
                            os.close(fd)
                        serve_forked(fds[0], config, source)  # never returns
                    try:
                        actors[os.pidfd_open(pid)] = pid
                    except ProcessLookupError:
                        pass  # gone already (and reaped: SIGCHLD is ignored)
                    reply = token + b" " + str(pid).encode("ascii")
            os.close(fds[0])
            quiet_since = time.monotonic()
            try:
                channel.send(reply)
            except OSError:
                break
        channel.close()
        for fd in actors:
            os.close(fd)
        # Stay the actors' parent until the last one exits (none is orphaned); with
        # SIGCHLD ignored, wait() blocks until every child is gone, then raises ECHILD.
        try:
            while True:
                os.wait()
        except ChildProcessError:
            pass
    finally:
        os._exit(0)


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
        """For ``select``."""
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
