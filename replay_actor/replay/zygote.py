"""The zygote: a warm, single-threaded process that forks this process's cursor actors.

Runs in: the zygote (``main``, ``FixtureCache``) and the caller (``Zygote``, its handle).

Starting a fresh interpreter for every acquisition costs about a hundred milliseconds of
imports; an orchestrator acquiring for hundreds of runs should not pay it each time. So
the first acquisition in a process starts one zygote (``python -P -c``: it never imports
the caller's ``__main__``), which imports the actor's code once and then, per request,
forks an actor. Forking it is safe where forking the caller is not: the zygote has one
thread, no caller state and no handles of its own.

::

    acquirer --(config + the actor's socket end, SCM_RIGHTS)--> zygote
                                                                  | load/refresh cache
                                                                  | fork
    acquirer <--------------- READY / FE / ER ------------------ actor (serves as usual)

The zygote keeps the last few fixtures it parsed (keyed by path, ceilings and the file's
stat identity: device, inode, size, mtime and ctime in nanoseconds), so acquiring the
same fixture again costs a fork, not a parse; the actor re-checks the identity after the
fork and parses afresh if the file changed. ``gc.freeze()`` keeps the inherited table out
of the children's collections, so copy-on-write pages stay shared.

The zygote ignores SIGCHLD (the kernel reaps its children: no actor ever lingers as a
zombie). When its control channel reaches EOF, that is when the acquiring process is
gone, it forks no more and exits as soon as its last actor has (each lives on under its
own rules), so an actor is never orphaned.
"""

from __future__ import annotations

import atexit
import gc
import os
import signal
import socket
import subprocess
import sys
import threading
from collections import OrderedDict
from typing import Final

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
_CACHED_FIXTURES: Final = 4
_MAX_CONFIG: Final = 1 << 20


def _identity(path: str) -> tuple[int, ...] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class FixtureCache:
    """The zygote's parsed fixtures, valid only while the file is unchanged."""

    def __init__(self, size: int = _CACHED_FIXTURES) -> None:
        self._size = size
        self._entries: OrderedDict[tuple[str, str], tuple[tuple[int, ...], FixtureSet]] = (
            OrderedDict()
        )

    @staticmethod
    def _key(config: ActorConfig) -> tuple[str, str]:
        return (config.fixture, repr(sorted(config.ceilings.items())))

    def warm(self, config: ActorConfig) -> None:
        """Parse the fixture now, in the zygote, unless a valid copy is cached."""
        key = self._key(config)
        identity = _identity(config.fixture)
        cached = self._entries.get(key)
        if identity is None or (cached is not None and cached[0] == identity):
            if cached is not None:
                self._entries.move_to_end(key)
            return
        try:
            fixture = load_fixture(config.fixture, ceilings=Ceilings(**config.ceilings))
        except FixtureError:
            self._entries.pop(key, None)
            return  # the actor will load it itself and report the rejection
        if _identity(config.fixture) != identity:
            return  # changed while we read it: do not cache a torn view
        fixture.snapshot()  # computed once here, inherited by every child
        self._entries[key] = (identity, fixture)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)
        gc.collect()
        trim_heap()  # what the parse freed must not count in every child's RSS
        gc.freeze()  # keep the table out of the children's collections

    def get(self, config: ActorConfig) -> FixtureSet | None:
        """The cached fixture if the file is still the one that was parsed."""
        cached = self._entries.get(self._key(config))
        if cached is None or _identity(config.fixture) != cached[0]:
            return None
        return cached[1]


def main() -> None:
    """Entry point of the zygote process: ``python -P -c '...main()' FD``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    set_process_name("replay-zygote")
    control = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, fileno=int(sys.argv[1]))
    cache = FixtureCache()
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, _MAX_CONFIG, 1)
        except OSError:
            break
        if not message:
            break  # the acquiring process is gone
        if len(fds) != 1:
            for fd in fds:
                os.close(fd)
            continue
        try:
            config = msgspec.json.decode(message, type=ActorConfig)
        except msgspec.DecodeError:
            os.close(fds[0])
            continue
        cache.warm(config)
        pid = os.fork()
        if pid == 0:
            control.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            serve_forked(fds[0], config, cache.get(config))  # never returns
        os.close(fds[0])
        try:
            control.send(str(pid).encode("ascii"))
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


class Zygote:
    """The acquiring process's handle on its zygote; started on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._control: socket.socket | None = None
        self._popen: subprocess.Popen[bytes] | None = None
        self._pid = -1

    def spawn(self, config: ActorConfig, actor_end: socket.socket, timeout: float) -> int:
        """Fork an actor that serves ``actor_end``; return its PID.

        ``timeout`` bounds the wait for the zygote (which may parse the fixture first).
        """
        payload = msgspec.json.encode(config)
        with self._lock:
            for attempt in (1, 2):
                if self._control is None or self._pid != os.getpid():
                    self._start()
                control = self._control
                assert control is not None
                set_timeouts(control, timeout)
                try:
                    socket.send_fds(control, [payload], [actor_end.fileno()])
                    reply = control.recv(32)
                except OSError:
                    reply = b""
                if reply.isdigit():
                    return int(reply)
                # The zygote died (or was killed): start another once.
                self._stop()
                if attempt == 2:
                    break
        raise ActorLost("could not start a cursor actor")

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

    def _stop(self) -> None:
        control, self._control = self._control, None
        if control is not None:
            control.close()
        popen, self._popen = self._popen, None
        if popen is not None and popen.poll() is None:
            popen.kill()  # our own child, by its PID

    def after_fork_in_child(self) -> None:
        # The parent's zygote is the parent's: drop our copy of its channel, so it still
        # sees EOF when the parent exits, and start our own on first use.
        self._lock = threading.Lock()
        control, self._control = self._control, None
        if control is not None:
            control.close()
        self._popen = None

    @property
    def pid(self) -> int | None:
        """The zygote's PID, if one runs for this process."""
        return None if self._popen is None else self._popen.pid

    def shutdown(self, wait: float = 1.0) -> None:
        """At interpreter exit: close the channel and reap the zygote ourselves, so it
        does not outlive us as an orphan for init to collect.

        A zygote whose actors still serve (their owners live on) is left to finish
        with them rather than killed: killing it would orphan them."""
        with self._lock:
            control, self._control = self._control, None
            popen, self._popen = self._popen, None
        if control is not None:
            control.close()  # EOF: the zygote exits once its actors have
        if popen is not None:
            try:
                popen.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                pass


zygote = Zygote()
os.register_at_fork(after_in_child=zygote.after_fork_in_child)
atexit.register(zygote.shutdown)
