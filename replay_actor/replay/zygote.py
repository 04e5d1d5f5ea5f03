"""The zygote: a warm, single-threaded process that forks this process's cursor actors.

Runs in: the zygote (``main``, ``FixtureCache``) and the caller (``Zygote``, its handle).

Starting a fresh interpreter for every acquisition costs about a hundred milliseconds of
imports; an orchestrator acquiring for hundreds of runs should not pay it each time. So
the first acquisition in a process starts one zygote (``python -P -c``: it never imports
the caller's ``__main__``), which imports the actor's code once and then, per request,
forks an actor. Forking it is safe where forking the caller is not: the zygote has one
thread, no caller state and no handles of its own.

::

    acquirer --(token, config + the actor's socket end, SCM_RIGHTS)--> zygote
                                                                  | small fixture: cache
                                                                  | fork (a large one is
                                                                  |  parsed by the actor)
    acquirer <--------------- READY / FE / ER ------------------ actor (serves as usual)

The zygote parses a small fixture before forking and keeps it (keyed by path, ceilings
and the file's stat identity: device, inode, size, mtime and ctime in nanoseconds), so
acquiring it again costs a fork, not a parse; the actor re-checks the identity after the
fork and parses afresh if the file changed. The cache is bounded by bytes and drops what
nobody acquired recently; a large fixture is parsed by the actor after the fork and never
kept here (``FixtureCache``). ``gc.freeze()`` keeps the inherited table out of the
children's collections, so copy-on-write pages stay shared.

The zygote is shared by all of the process's acquisitions: ``Zygote.spawn`` never kills
it for one caller, never resends an actor's socket end once delivered, and tells a late
reply from its own by the request's token (docs/architecture.md, "Timeouts and the
zygote").

The zygote ignores SIGCHLD (the kernel reaps its children: no actor ever lingers as a
zombie). When its control channel reaches EOF, that is when the acquiring process is
gone, it forks no more and exits as soon as its last actor has (each lives on under its
own rules), so an actor is never orphaned.
"""

from __future__ import annotations

import atexit
import gc
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from typing import Final, NamedTuple

import msgspec

from .._errors import ActorLost, FixtureError
from ..fixture import Ceilings, FixtureSet, load_fixture
from .actor import serve_forked, set_process_name, trim_heap
from .protocol import ActorConfig
from .reaper import reaper
from .wire import set_timeouts

__all__ = ["FixtureCache", "Zygote", "main", "zygote"]

_BOOT: Final = "from replay_actor.replay.zygote import main; main()"
_PACKAGE_ROOT: Final = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_MAX_CONFIG: Final = 1 << 20
#: A fixture file larger than this is never parsed by the zygote: the actor parses it
#: after the fork, so the zygote answers every other acquisition at once and its heap
#: (which every fork copies the page tables of) stays small.
CACHE_ENTRY_BYTES: Final = 2 * 1024 * 1024
#: The cached fixtures' file sizes together stay under this (least recently used go).
CACHE_BYTES: Final = 8 * 1024 * 1024
#: A cached fixture nobody acquired for this long is dropped, in seconds.
CACHE_IDLE: Final = 30.0
#: Tests only: the path of a file holding a number of seconds. The zygote reads and
#: deletes it, then sleeps that long between forking an actor and replying, as a
#: descheduled or swapped-out zygote would.
TEST_DELAY_ENV: Final = "REPLAY_ACTOR_TEST_ZYGOTE_DELAY"


def _identity(path: str) -> tuple[int, ...] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class _Cached(NamedTuple):
    identity: tuple[int, ...]
    fixture: FixtureSet
    used: float  # time.monotonic() of the last acquisition


class FixtureCache:
    """The zygote's parsed fixtures, valid only while the file is unchanged.

    Bounded by bytes (file sizes: ``entry_bytes`` each, ``max_bytes`` together) and by
    time (an entry not acquired for ``idle`` seconds is dropped), so a large fixture
    acquired once does not stay in the zygote, where it would make every later fork
    copy its page tables.
    """

    def __init__(
        self,
        max_bytes: int = CACHE_BYTES,
        entry_bytes: int = CACHE_ENTRY_BYTES,
        idle: float = CACHE_IDLE,
    ) -> None:
        self._max_bytes = max_bytes
        self._entry_bytes = entry_bytes
        self._idle = idle
        self._entries: OrderedDict[tuple[str, str], _Cached] = OrderedDict()

    @staticmethod
    def _key(config: ActorConfig) -> tuple[str, str]:
        return (config.fixture, repr(sorted(config.ceilings.items())))

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def bytes(self) -> int:
        """The cached fixtures' file sizes, together."""
        return sum(entry.identity[2] for entry in self._entries.values())

    def warm(self, config: ActorConfig) -> None:
        """Parse the fixture now, in the zygote, unless a valid copy is cached or the
        file is too large to keep (then the actor parses it after the fork)."""
        key = self._key(config)
        identity = _identity(config.fixture)
        cached = self._entries.get(key)
        now = time.monotonic()
        if identity is not None and cached is not None and cached.identity == identity:
            self._entries[key] = cached._replace(used=now)
            self._entries.move_to_end(key)
            return
        if cached is not None:
            self._drop([key])  # stale: the file changed
        if identity is None or identity[2] > self._entry_bytes:
            return
        try:
            fixture = load_fixture(config.fixture, ceilings=Ceilings(**config.ceilings))
        except FixtureError:
            return  # the actor will load it itself and report the rejection
        if _identity(config.fixture) != identity:
            return  # changed while we read it: do not cache a torn view
        fixture.snapshot()  # computed once here, inherited by every child
        self._entries[key] = _Cached(identity, fixture, now)
        total = self.bytes
        evict = []
        for old_key, entry in self._entries.items():
            if total <= self._max_bytes or old_key == key:
                break
            evict.append(old_key)
            total -= entry.identity[2]
        for old_key in evict:
            del self._entries[old_key]
        gc.collect()
        trim_heap()  # what the parse freed must not count in every child's RSS
        gc.freeze()  # keep the table out of the children's collections

    def get(self, config: ActorConfig) -> FixtureSet | None:
        """The cached fixture if the file is still the one that was parsed."""
        cached = self._entries.get(self._key(config))
        if cached is None or _identity(config.fixture) != cached.identity:
            return None
        return cached.fixture

    def next_expiry(self, now: float) -> float | None:
        """Seconds until the least recently used entry is due to go (None: empty)."""
        if not self._entries:
            return None
        oldest = min(entry.used for entry in self._entries.values())
        return max(0.0, oldest + self._idle - now)

    def expire(self, now: float) -> None:
        """Drop every entry nobody acquired for ``idle`` seconds."""
        self._drop([k for k, e in self._entries.items() if now - e.used >= self._idle])

    def _drop(self, keys: list[tuple[str, str]]) -> None:
        if not keys:
            return
        for key in keys:
            del self._entries[key]
        # The tables are acyclic, so dropping them frees them; hand the pages back.
        gc.collect()
        trim_heap()


def _test_delay() -> None:
    path = os.environ.get(TEST_DELAY_ENV)
    if not path:
        return
    try:
        with open(path) as f:
            seconds = float(f.read())
        os.unlink(path)
    except (OSError, ValueError):
        return
    time.sleep(seconds)


def _hung_up(fd: int) -> bool:
    """True if the acquirer already closed its end (it sends nothing before READY, so
    readable means EOF): its acquire timed out, and an actor would serve nobody."""
    readable, _, _ = select.select([fd], [], [], 0)
    return bool(readable)


def main() -> None:  # noqa: PLR0912, PLR0915
    """Entry point of the zygote process: ``python -P -c '...main()' FD``.

    Each request is ``TOKEN SP config`` with the actor's socket end attached; the reply
    is ``TOKEN SP pid`` (``TOKEN SP -`` when no actor was forked), so an acquirer can
    tell a late reply to an earlier, timed-out request from its own.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    set_process_name("replay-zygote")
    control = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, fileno=int(sys.argv[1]))
    cache = FixtureCache()
    while True:
        wait = cache.next_expiry(time.monotonic())
        if wait is not None:
            # Sleep until a request or the next cache expiry; an empty cache sleeps
            # without a timeout.
            readable, _, _ = select.select([control], [], [], wait)
            cache.expire(time.monotonic())
            if not readable:
                continue
        try:
            message, fds, _, _ = socket.recv_fds(control, _MAX_CONFIG, 1)
        except OSError:
            break
        if not message:
            break  # the acquiring process is gone
        token, _, body = message.partition(b" ")
        if len(fds) != 1:
            for fd in fds:
                os.close(fd)
            continue
        try:
            config = msgspec.json.decode(body, type=ActorConfig)
        except msgspec.DecodeError:
            os.close(fds[0])
            continue
        if _hung_up(fds[0]):
            os.close(fds[0])
            reply = token + b" -"
        else:
            cache.warm(config)
            pid = os.fork()
            if pid == 0:
                control.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                serve_forked(fds[0], config, cache.get(config))  # never returns
            os.close(fds[0])
            _test_delay()
            reply = token + b" " + str(pid).encode("ascii")
        try:
            control.send(reply)
        except OSError:
            break
    control.close()
    # Actors may still serve (their owners can outlive the acquirer): stay their parent
    # until the last one exits, so that none is ever orphaned. With SIGCHLD ignored,
    # wait() blocks until every child is gone, then raises ECHILD.
    try:
        while True:
            os.wait()
    except ChildProcessError:
        pass
    os._exit(0)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Zygote:
    """The acquiring process's handle on its zygote; started on first use.

    The zygote is shared by every acquisition of this process, so it is never killed
    on behalf of one: a request that timed out leaves the zygote running, and its late
    reply is recognised by its token and skipped. A request is sent once: after the
    actor's socket end was delivered, a process may hold it, so it is never offered
    to a second zygote.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._control: socket.socket | None = None
        self._popen: subprocess.Popen[bytes] | None = None
        self._pid = -1
        self._token = 0
        # The actors forked for this process, with their owners: the exit hook does not
        # wait for those this very process owns (they end when it does).
        self._actors: dict[int, int] = {}

    def spawn(self, config: ActorConfig, actor_end: socket.socket, timeout: float) -> int:
        """Fork an actor that serves ``actor_end``; return its PID.

        ``timeout`` bounds everything here: the wait for the lock (other threads'
        requests), the send, and the zygote's reply. Raises ``ActorLost`` when it runs
        out, and never kills the zygote for it.
        """
        deadline = time.monotonic() + timeout
        payload = msgspec.json.encode(config)
        if not self._lock.acquire(timeout=timeout):
            raise ActorLost("the zygote did not take the request in time")
        try:
            pid = self._spawn(payload, actor_end, deadline)
            self._remember(pid, config.owner_pid)
            return pid
        finally:
            self._lock.release()

    def _spawn(self, payload: bytes, actor_end: socket.socket, deadline: float) -> int:
        for _attempt in (1, 2):
            if self._control is None or self._pid != os.getpid():
                self._start()
            control = self._control
            assert control is not None
            self._token += 1
            token = str(self._token).encode("ascii")
            _bound(control, deadline)
            try:
                socket.send_fds(control, [token + b" " + payload], [actor_end.fileno()])
            except BlockingIOError:
                raise ActorLost("the zygote did not take the request in time") from None
            except OSError:
                # Not delivered (the zygote is gone): nobody holds the actor's end, so
                # it may go to a new zygote, once.
                self._forget()
                continue
            return self._reply(control, token, deadline)
        raise ActorLost("could not start a cursor actor")

    def _reply(self, control: socket.socket, token: bytes, deadline: float) -> int:
        while True:
            _bound(control, deadline)
            try:
                reply = control.recv(64)
            except BlockingIOError:
                # The zygote is slow, not gone: other acquisitions use it, so it stays.
                raise ActorLost("the zygote did not fork the actor in time") from None
            except OSError:
                reply = b""
            if not reply:
                # Gone after taking the request: an actor may hold the end, so no retry.
                self._forget()
                raise ActorLost("the zygote ended before it forked the actor")
            got, _, pid = reply.partition(b" ")
            if got != token:
                continue  # the late reply to an earlier request that timed out
            if not pid.isdigit():
                raise ActorLost("the zygote did not fork the actor")
            return int(pid)

    def _remember(self, pid: int, owner: int) -> None:
        if len(self._actors) >= 64:
            self._actors = {p: o for p, o in self._actors.items() if _running(p)}
        self._actors[pid] = owner

    def _start(self) -> None:
        # The zygote must import this very replay_actor, whatever the caller's path.
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._popen = subprocess.Popen(
                [sys.executable, "-P", "-c", _BOOT, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
            )
        finally:
            theirs.close()
        reaper.watch(self._popen)
        self._control = ours
        self._pid = os.getpid()
        self._token = 0
        self._actors = {}

    def _forget(self) -> None:
        """Let go of a zygote that is gone: close our channel (the reaper collects it)."""
        control, self._control = self._control, None
        if control is not None:
            control.close()
        self._popen = None

    def after_fork_in_child(self) -> None:
        # The parent's zygote is the parent's: drop our copy of its channel, so it still
        # sees EOF when the parent exits, and start our own on first use.
        self._lock = threading.Lock()
        control, self._control = self._control, None
        if control is not None:
            control.close()
        self._popen = None
        self._actors = {}

    @property
    def pid(self) -> int | None:
        """The zygote's PID, if one runs for this process."""
        return None if self._popen is None else self._popen.pid

    def shutdown(self, wait: float = 1.0) -> None:
        """At interpreter exit: close the channel and reap the zygote ourselves, so it
        does not outlive us as an orphan for init to collect.

        A zygote whose actors still serve (their owners live on) is left to finish
        with them rather than killed: killing it would orphan them. An actor this
        exiting process owns ends only once the process has, so while one lives there
        is nothing to wait for."""
        if not self._lock.acquire(timeout=wait):
            return
        try:
            control, self._control = self._control, None
            popen, self._popen = self._popen, None
            me = os.getpid()
            ours = [p for p, owner in self._actors.items() if owner == me and _running(p)]
        finally:
            self._lock.release()
        if control is not None:
            control.close()  # EOF: the zygote exits once its actors have
        if popen is not None and not ours:
            try:
                popen.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                pass


def _bound(sock: socket.socket, deadline: float) -> None:
    """Bound the next blocking call on ``sock`` by what is left until ``deadline``."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise ActorLost("the zygote did not fork the actor in time")
    # At least a millisecond: a zero timeout would mean "block forever" to the kernel.
    set_timeouts(sock, max(remaining, 0.001))


zygote = Zygote()
os.register_at_fork(after_in_child=zygote.after_fork_in_child)
atexit.register(zygote.shutdown)
