"""The zygote: a warm, single-threaded process that forks this process's cursor actors.

Runs in: the zygote (``main``, ``FixtureCache``, ``_Holders``) and the caller (``Zygote``,
its handle).

Starting a fresh interpreter for every acquisition costs about a hundred milliseconds of
imports; an orchestrator acquiring for hundreds of runs should not pay it each time. So
the first acquisition in a process starts one zygote (``python -P -c``: it never imports
the caller's ``__main__``), which imports the actor's code once and then, per request,
forks an actor. Forking it is safe where forking the caller is not: the zygote has one
thread, no caller state and no handles of its own.

::

    acquirer --(token, config + the actor's socket end, SCM_RIGHTS)--> zygote
                                                                  | small fixture: cache,
                                                                  |  fork
                                                                  | large: forward to its
                                                                  |  holder (holder.py),
                                                                  |  relay its reply
    acquirer <--------------- READY / FE / ER ------------------ actor (serves as usual)

The zygote parses a small fixture (``CACHE_ENTRY_BYTES`` at most) before forking and
keeps it, keyed by path and ceilings, so acquiring it again costs a fork, not a parse;
the cached copy is used only while the file holds exactly the bytes it was parsed from
(``FixtureSet.same_file``, compared on every acquisition). The cache is bounded by bytes
and drops what nobody acquired recently (``FixtureCache``). A large fixture never enters
the zygote: a holder of its own keeps it and forks its actors (``holder.py``,
docs/architecture.md, "Large fixtures"), so the zygote's forks stay cheap.
``gc.freeze()`` keeps the inherited table out of the children's collections, so
copy-on-write pages stay shared.

The zygote is shared by all of the process's acquisitions: ``Zygote.spawn`` never kills
it for one caller, never resends an actor's socket end once delivered, and tells a late
reply from its own by the request's token (docs/architecture.md, "Timeouts and the
zygote").

The zygote ignores SIGCHLD (the kernel reaps its children: no actor ever lingers as a
zombie) and is the subreaper of its holders' actors. When its control channel reaches
EOF, that is when the acquiring process is gone, it forks no more, tells its holders to
go, and exits as soon as its last child has (each actor lives on under its own rules),
so an actor is never orphaned.
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
from typing import Any, Final, NamedTuple

import msgspec

from .._errors import ActorLost, FixtureError
from ..fixture import Ceilings, FixtureSet, load_shareable
from .actor import serve_forked, set_process_name, trim_heap
from .holder import EXIT, IDLE, HolderRef, start_holder
from .protocol import ActorConfig
from .reaper import reaper
from .wire import set_timeouts

__all__ = ["FixtureCache", "Zygote", "main", "zygote"]

_BOOT: Final = "from replay_actor.replay.zygote import main; main()"
_PACKAGE_ROOT: Final = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_MAX_CONFIG: Final = 1 << 20
#: A fixture file larger than this is never parsed by the zygote: a holder keeps it
#: (``holder.py``), so the zygote answers every other acquisition at once and its heap
#: (which every fork copies the page tables of) stays small.
CACHE_ENTRY_BYTES: Final = 2 * 1024 * 1024
#: The cached fixtures' file sizes together stay under this (least recently used go).
CACHE_BYTES: Final = 8 * 1024 * 1024
#: A cached fixture nobody acquired for this long is dropped, in seconds.
CACHE_IDLE: Final = 30.0
#: A held large fixture nobody acquired for this long goes with its holder, in seconds
#: (``HOLD_SECONDS_ENV`` overrides it, 0 included: then it goes at its last release).
HOLD_SECONDS: Final = 30.0
HOLD_SECONDS_ENV: Final = "REPLAY_ACTOR_HOLD_SECONDS"
_PR_SET_CHILD_SUBREAPER: Final = 36
#: Tests only: the path of a file holding a number of seconds. The zygote reads and
#: deletes it, then sleeps that long between forking an actor and replying, as a
#: descheduled or swapped-out zygote would.
TEST_DELAY_ENV: Final = "REPLAY_ACTOR_TEST_ZYGOTE_DELAY"


def _size(path: str) -> int | None:
    try:
        return os.stat(path).st_size
    except OSError:
        return None


class _Cached(NamedTuple):
    size: int  # the file's size when it was parsed (the cache's bound counts these)
    fixture: FixtureSet
    used: float  # time.monotonic() of the last acquisition


class FixtureCache:
    """The zygote's parsed small fixtures, used only while the file holds exactly the
    bytes that were parsed (``FixtureSet.same_file``: compared byte for byte on every
    acquisition, whatever the file's timestamps say).

    Bounded by bytes (file sizes: ``entry_bytes`` each, ``max_bytes`` together) and by
    time (an entry not acquired for ``idle`` seconds is dropped). A larger fixture goes
    to a holder of its own (``holder.py``), never into the zygote, where it would make
    every later fork copy its page tables.
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
    def key(config: ActorConfig) -> tuple[str, str]:
        """What a cached copy (or a holder) is for: the path and the ceilings."""
        return (config.fixture, repr(sorted(config.ceilings.items())))

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def bytes(self) -> int:
        """The cached fixtures' file sizes, together."""
        return sum(entry.size for entry in self._entries.values())

    def large(self, config: ActorConfig) -> bool:
        """True if the file is too large for this cache (its holder keeps it)."""
        size = _size(config.fixture)
        return size is not None and size > self._entry_bytes

    def take(self, config: ActorConfig) -> FixtureSet | None:
        """The fixture to fork an actor with: the cached copy if the file still holds
        exactly its bytes, else a fresh parse kept for next time; None when the file is
        too large to keep or is rejected (the actor then loads it and reports why)."""
        key = self.key(config)
        cached = self._entries.get(key)
        now = time.monotonic()
        if cached is not None:
            if cached.fixture.same_file(config.fixture):
                self._entries[key] = cached._replace(used=now)
                self._entries.move_to_end(key)
                return cached.fixture
            self._drop([key])  # stale: the file changed
        size = _size(config.fixture)
        if size is None or size > self._entry_bytes:
            return None
        try:
            fixture = load_shareable(config.fixture, ceilings=Ceilings(**config.ceilings))
        except FixtureError:
            return None  # the actor will load it itself and report the rejection
        fixture.snapshot()  # computed once here, inherited by every child
        self._entries[key] = _Cached(size, fixture, now)
        total = self.bytes
        evict = []
        for old_key, entry in self._entries.items():
            if total <= self._max_bytes or old_key == key:
                break
            evict.append(old_key)
            total -= entry.size
        for old_key in evict:
            del self._entries[old_key]
        gc.collect()
        trim_heap()  # what the parse freed must not count in every child's RSS
        gc.freeze()  # keep the table out of the children's collections
        return fixture

    def warm(self, config: ActorConfig) -> None:
        """Parse and keep the fixture now, unless a valid copy is cached or it is too
        large to keep."""
        self.take(config)

    def get(self, config: ActorConfig) -> FixtureSet | None:
        """The cached fixture if the file still holds exactly the bytes parsed."""
        cached = self._entries.get(self.key(config))
        if cached is None or not cached.fixture.same_file(config.fixture):
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


def _hold_seconds() -> float:
    try:
        value = float(os.environ.get(HOLD_SECONDS_ENV, ""))
    except ValueError:
        return HOLD_SECONDS
    return value if value >= 0 and value != float("inf") else HOLD_SECONDS


class _Holders:
    """The zygote's holders (``holder.py``): one per large fixture path and ceilings."""

    def __init__(self, control: socket.socket, idle: float) -> None:
        self.control = control
        self.idle = idle
        self.by_key: dict[tuple[str, str], HolderRef] = {}
        self.live: dict[int, HolderRef] = {}  # fileno -> every holder not yet gone

    def channels(self) -> list[HolderRef]:
        return list(self.live.values())

    def forward(self, message: bytes, fd: int, config: ActorConfig) -> bool:
        """Hand the request to its fixture's holder (started if need be); False if no
        holder took it (the zygote then forks an actor that loads the file itself)."""
        key = FixtureCache.key(config)
        for _attempt in (1, 2):
            ref = self.by_key.get(key)
            if ref is None:
                others = [self.control, *(r.channel for r in self.live.values())]
                ref = start_holder(key, config, self.idle, others)
                self.by_key[key] = ref
                self.live[ref.fd] = ref
            try:
                socket.send_fds(ref.channel, [message], [fd])
                ref.pending.add(message.partition(b" ")[0])
            except BlockingIOError:
                return False  # a holder that far behind: do not queue more on it
            except OSError:
                self._retire(ref)  # gone: a fresh one takes the request
                continue
            return True
        return False

    def readable(self, ref: HolderRef) -> None:
        """A message from a holder: a reply to relay, an offer to go, or its end."""
        try:
            message = ref.channel.recv(_MAX_CONFIG)
        except BlockingIOError:
            return
        except OSError:
            message = b""
        if not message:  # the holder is gone
            self._retire(ref)
            self.live.pop(ref.fd, None)
            ref.channel.close()
            for token in ref.pending:  # it will never answer these
                self._relay(token + b" -")
            return
        if message == IDLE:
            # Nothing more goes to it; what was forwarded before this is served first.
            if self.by_key.get(ref.key) is ref:
                del self.by_key[ref.key]
            try:
                ref.channel.send(EXIT)
            except OSError:
                pass
            return
        ref.pending.discard(message.partition(b" ")[0])
        self._relay(message)  # TOKEN SP pid, for the acquirer

    def _relay(self, message: bytes) -> None:
        try:
            self.control.send(message)
        except OSError:
            pass

    def _retire(self, ref: HolderRef) -> None:
        if self.by_key.get(ref.key) is ref:
            del self.by_key[ref.key]

    def close(self) -> None:
        """The acquirer is gone: every holder forks no more and exits after its actors."""
        for ref in self.live.values():
            ref.channel.close()
        self.live.clear()
        self.by_key.clear()


def main() -> None:  # noqa: PLR0912, PLR0915
    """Entry point of the zygote process: ``python -P -c '...main()' FD``.

    Each request is ``TOKEN SP config`` with the actor's socket end attached; the reply
    is ``TOKEN SP pid`` (``TOKEN SP -`` when no actor was forked), so an acquirer can
    tell a late reply to an earlier, timed-out request from its own. A request for a
    large fixture is forwarded to its holder, whose reply the zygote relays.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    set_process_name("replay-zygote")
    _become_subreaper()
    control = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, fileno=int(sys.argv[1]))
    cache = FixtureCache()
    holders = _Holders(control, _hold_seconds())
    while True:
        wait = cache.next_expiry(time.monotonic())
        watched: list[Any] = [control, *holders.channels()]
        # Sleep until a request, a holder's message or the next cache expiry.
        readable, _, _ = select.select(watched, [], [], wait)
        cache.expire(time.monotonic())
        for source in readable:
            if source is not control:
                holders.readable(source)
        if control not in readable:
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
        elif cache.large(config) and holders.forward(message, fds[0], config):
            os.close(fds[0])  # the holder has its own copy of the end now
            continue  # its holder replies, through us
        else:
            fixture = cache.take(config)
            pid = os.fork()
            if pid == 0:
                control.close()
                holders.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                serve_forked(fds[0], config, fixture)  # never returns
            os.close(fds[0])
            _test_delay()
            reply = token + b" " + str(pid).encode("ascii")
        try:
            control.send(reply)
        except OSError:
            break
    control.close()
    holders.close()
    # Actors may still serve (their owners can outlive the acquirer): stay their parent
    # until the last one exits, so that none is ever orphaned. With SIGCHLD ignored,
    # wait() blocks until every child is gone, then raises ECHILD.
    try:
        while True:
            os.wait()
    except ChildProcessError:
        pass
    os._exit(0)


def _become_subreaper() -> None:
    """Adopt the actors of a holder that dies before them (``PR_SET_CHILD_SUBREAPER``),
    so they are reaped here rather than by init; best effort, Linux only."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


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
        self._init_replies()

    def _init_replies(self) -> None:
        # Requests waiting for their replies (tokens), the replies read for them, the
        # channels found closed, and whether a waiter is reading the channel now.
        self._replies_cond = threading.Condition(threading.Lock())
        self._waiting: set[bytes] = set()
        self._replies: dict[bytes, bytes] = {}
        self._ended: set[socket.socket] = set()
        self._reading = False

    def spawn(self, config: ActorConfig, actor_end: socket.socket, timeout: float) -> int:
        """Fork an actor that serves ``actor_end``; return its PID.

        ``timeout`` bounds everything here: the wait for the lock (other threads'
        sends), the send, and the zygote's reply. Raises ``ActorLost`` when it runs
        out, and never kills the zygote for it. The lock covers the send only: several
        requests may wait for their replies at once (a large fixture's first load takes
        a while in its holder), each reply matched to its request by the token.
        """
        deadline = time.monotonic() + timeout
        payload = msgspec.json.encode(config)
        if not self._lock.acquire(timeout=timeout):
            raise ActorLost("the zygote did not take the request in time")
        try:
            control, token = self._send(payload, actor_end, deadline)
            with self._replies_cond:
                self._waiting.add(token)
        finally:
            self._lock.release()
        try:
            pid = self._reply(control, token, deadline)
        finally:
            with self._replies_cond:
                self._waiting.discard(token)
                self._replies.pop(token, None)
        with self._lock:
            self._remember(pid, config.owner_pid)
        return pid

    def _send(
        self, payload: bytes, actor_end: socket.socket, deadline: float
    ) -> tuple[socket.socket, bytes]:
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
            return control, token
        raise ActorLost("could not start a cursor actor")

    def _reply(self, control: socket.socket, token: bytes, deadline: float) -> int:
        """Wait for this request's reply. One waiter at a time reads the channel and
        files what it reads by token for the others; a reply nobody waits for any more
        (its request timed out) is dropped."""
        cond = self._replies_cond
        while True:
            with cond:
                while True:
                    if token in self._replies:
                        reply = self._replies.pop(token)
                        break
                    if control in self._ended:
                        raise ActorLost("the zygote ended before it forked the actor")
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise ActorLost("the zygote did not fork the actor in time")
                    if not self._reading:
                        self._reading = True
                        reply = b""
                        break
                    cond.wait(remaining)
            if not reply:
                self._read_one(control, deadline)
                continue
            _, _, pid = reply.partition(b" ")
            if not pid.isdigit():
                raise ActorLost("the zygote did not fork the actor")
            return int(pid)

    def _read_one(self, control: socket.socket, deadline: float) -> None:
        """As the reader: wait (until ``deadline`` at most) for one reply and file it."""
        message: bytes | None = None
        try:
            # select, then a non-blocking read: the socket's own timeouts are set by
            # whichever thread sent last, so they cannot bound this wait.
            readable, _, _ = select.select([control], [], [], max(0.0, deadline - time.monotonic()))
            if readable:
                try:
                    message = control.recv(64, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    message = None
                except OSError:
                    message = b""
        except (OSError, ValueError):
            message = b""  # closed under us: gone
        with self._replies_cond:
            self._reading = False
            if message == b"":
                # Gone after taking requests: an actor may hold an end, so no retry.
                self._ended.add(control)
            elif message is not None:
                got, _, _ = message.partition(b" ")
                if got in self._waiting:
                    self._replies[got] = message
            self._replies_cond.notify_all()
        if message == b"":
            with self._lock:
                if self._control is control:
                    self._forget()

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
        # Tokens keep counting across zygotes: a waiter on a zygote that died must never
        # take the reply meant for a request to its successor.
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
        self._init_replies()
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
