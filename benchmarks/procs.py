"""The reference children and the discipline for every process a benchmark starts.

Each child is ours, stopped by its PID and reaped (``stop``); nothing is killed by name.

- ``EchoPeer``: a ``multiprocessing.Pipe`` echo child started through a *spawn* context
  (a fresh interpreter, as the actor is): the floor of one request/reply round trip.
- ``RawEcho``: a child answering on a raw AF_UNIX socketpair with fixed reply bytes: the
  floor of one exchange of the actor's own request and reply frames (P1b).
- ``bare_child_ready``: a no-op interpreter started exactly as ``acquire`` starts the
  actor (``subprocess.Popen``, same environment, a passed socket fd) that signals ready:
  the floor of acquire -> ready.
- ``Owner``: a small process that stays alive until killed, to own an acquisition.
- ``Hogs``: one busy-looping process pinned to the last core for a whole pass
  (``--hog``): the targets measured with another job on the other core.
- ``baseline_rss``: the RSS of a bare interpreter started as the zygote is, that has
  imported the actor's code.
- ``zygote_pid``, ``actors_alive``, ``stop_zygote``: the run's own zygote (started by
  its first acquisition, found by PID and checked by name, ``replay-zygote``) and the
  actors it forked (``replay-actor``), for the end-of-run check; the zygote is ended
  (and reaped) once no actor is left.
"""

from __future__ import annotations

import multiprocessing
import os
import select
import signal
import socket
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Final

import psutil

import replay_actor

__all__ = [
    "EchoPeer",
    "Hogs",
    "RawEcho",
    "Owner",
    "actors_alive",
    "bare_child_ready",
    "baseline_rss",
    "child_env",
    "start_worker",
    "stop",
    "stop_resource_tracker",
    "stop_zygote",
    "wait_exit",
    "zygote_pid",
]

_PACKAGE_ROOT: Final = str(Path(replay_actor.__file__).resolve().parent.parent)
_ECHO_BYTES: Final = b"x" * 100
_NOOP: Final = "import os, sys; os.write(int(sys.argv[1]), b'OK')"


def child_env() -> dict[str, str]:
    """The environment ``acquire`` gives the actor (PYTHONPATH reaching the package)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
    return env


def start_worker(module: str, *args: str) -> subprocess.Popen[bytes]:
    """``python -m MODULE ARGS`` with pipes on stdin/stdout; stderr goes to a log in the
    cache directory (kept for diagnosis)."""
    from .workload import cache_dir

    log = os.open(cache_dir() / "children.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        return subprocess.Popen(
            [sys.executable, "-m", module, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            env=child_env(),
        )
    finally:
        os.close(log)


def stop(popen: subprocess.Popen[bytes], timeout: float = 5.0) -> None:
    """End our child by its PID (if it is still running) and reap it."""
    if popen.poll() is None:
        popen.kill()
    popen.wait(timeout)


class Hogs:
    """``--hog``: one child spinning on the machine's last core, pinned there, for the
    whole pass: another job on the other core of a 2-core machine (a CI runner's
    neighbour). The benchmark's own processes are left free to go anywhere, as an
    evaluation's are; on the last core they share with the hog. Started before the
    pass's first section and stopped by PID (SIGKILL, reaped) when the pass ends, also
    on an error or an interrupt."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        cores = sorted(os.sched_getaffinity(0))
        last = cores[-1]
        proc = subprocess.Popen(
            [sys.executable, "-S", "-c", "while True: pass"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.procs.append(proc)
        try:
            os.sched_setaffinity(proc.pid, {last})
        except OSError:
            pass  # (not where the platform cannot pin: still one busy process)
        self.core = last

    def stop(self) -> None:
        for proc in self.procs:
            stop(proc)
        self.procs.clear()


def _echo(conn: Connection) -> None:
    """The echo child's body: return every message until the parent closes the pipe."""
    try:
        while True:
            conn.send_bytes(conn.recv_bytes())
    except EOFError:
        pass


class EchoPeer:
    """A spawned child echoing over a ``multiprocessing.Pipe``."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, theirs = ctx.Pipe()
        self._proc = ctx.Process(target=_echo, args=(theirs,), daemon=True)
        self._proc.start()
        theirs.close()
        self.round_trip()

    def round_trip(self) -> bytes:
        self._conn.send_bytes(_ECHO_BYTES)
        return self._conn.recv_bytes()

    def close(self) -> None:
        self._conn.close()  # EOF: the child returns
        self._proc.join(5.0)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join()
        self._proc.close()


#: The raw echo child: answer every read with the given reply, one write, until EOF.
_RAW_ECHO: Final = (
    "import os, sys\n"
    "fd, reply = int(sys.argv[1]), bytes.fromhex(sys.argv[2])\n"
    "while os.read(fd, 65536):\n"
    "    os.write(fd, reply)\n"
)


class RawEcho:
    """A child interpreter answering each message on an AF_UNIX socketpair with a fixed
    reply: the floor of one request/reply exchange of these bytes between two processes
    (no framing logic, no event loop, one ``read`` and one ``write`` a side)."""

    def __init__(self, request: bytes, reply: bytes) -> None:
        self._request = request
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock = ours
        self._fd = ours.fileno()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _RAW_ECHO, str(theirs.fileno()), reply.hex()],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                env=child_env(),
            )
        finally:
            theirs.close()
        self._size = len(reply)
        self.round_trip()

    def fileno(self) -> int:
        return self._fd

    @property
    def pid(self) -> int:
        return self._proc.pid

    def round_trip(self) -> bytes:
        os.write(self._fd, self._request)
        got = os.read(self._fd, 65536)
        while len(got) < self._size:  # a reply over one read's worth: not in P1b
            got += os.read(self._fd, 65536)
        return got

    def close(self) -> None:
        self._sock.close()  # EOF: the child returns
        try:
            self._proc.wait(5.0)
        except subprocess.TimeoutExpired:
            pass
        stop(self._proc)


def stop_resource_tracker() -> None:
    """Stop multiprocessing's resource tracker, which a spawn context starts."""
    from multiprocessing import resource_tracker

    tracker = getattr(resource_tracker, "_resource_tracker", None)
    stop_fn = getattr(tracker, "_stop", None)
    if callable(stop_fn):
        stop_fn()


def bare_child_ready(env: dict[str, str], timeout: float = 30.0) -> float:
    """Start a no-op interpreter as ``acquire`` starts the actor; seconds until ready."""
    start = time.perf_counter()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        popen = subprocess.Popen(
            [sys.executable, "-c", _NOOP, str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
    finally:
        theirs.close()
    try:
        ours.settimeout(timeout)
        ready = ours.recv(2)
        elapsed = time.perf_counter() - start
    finally:
        ours.close()
        stop(popen)
    if ready != b"OK":
        raise RuntimeError("the bare child did not signal ready")
    return elapsed


class Owner:
    """A process that stays alive (blocked reading its stdin) until it is killed."""

    def __init__(self) -> None:
        self.popen = subprocess.Popen(
            [sys.executable, "-S", "-c", "import sys; sys.stdin.read()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.pid = self.popen.pid
        # acquire() checks the owner's identity (create time): let it exist first.
        psutil.Process(self.pid).create_time()

    def close(self) -> None:
        if self.popen.stdin is not None:
            self.popen.stdin.close()
        stop(self.popen)


def wait_exit(pidfd: int, timeout: float) -> bool:
    """Block until the process behind ``pidfd`` has exited; False on timeout."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(timeout * 1000))


def baseline_rss(env: dict[str, str]) -> int:
    """RSS of a bare interpreter started as the zygote is (``python -P -c``, same
    environment) that imported ``replay_actor.replay.forked.zygote``: all the code an actor runs,
    no fixture (an actor is a fork of such a process)."""
    popen = subprocess.Popen(
        [
            sys.executable,
            "-P",
            "-c",
            "import sys, replay_actor.replay.forked.zygote;"
            " print('ready', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        assert popen.stdout is not None
        if popen.stdout.readline().strip() != b"ready":
            raise RuntimeError("the baseline interpreter did not start")
        return int(psutil.Process(popen.pid).memory_info().rss)
    finally:
        if popen.stdin is not None:
            popen.stdin.close()
        if popen.stdout is not None:
            popen.stdout.close()
        stop(popen)


def zygote_pid() -> int | None:
    """The PID of this process's replay-actor zygote, if one runs (checked by name)."""
    from replay_actor.replay.caller.zygote_client import zygote

    pid = zygote.pid
    if pid is None:
        return None
    try:
        proc = psutil.Process(pid)
        if proc.ppid() != os.getpid() or proc.name() != "replay-zygote":
            return None
    except psutil.NoSuchProcess:
        return None
    return pid


def actors_alive() -> list[psutil.Process]:
    """Live replay-actor processes among our descendants (an actor is the zygote's
    child, named ``replay-actor``)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.name() == "replay-actor" and child.status() != psutil.STATUS_ZOMBIE:
                found.append(child)
        except psutil.NoSuchProcess:
            pass
    return found


def stop_zygote(timeout: float = 5.0) -> bool:
    """End this process's zygote (our child) once every actor is gone, and reap it.

    The library's own exit path (``zygote.shutdown``: close its channel, so it exits on
    EOF, then wait for it) where it exists, else SIGKILL through a pidfd (the PID pinned
    and checked by name first; the library's reaper thread reaps it). True if there was
    one and it exited."""
    from replay_actor.replay.caller.zygote_client import zygote

    pid = zygote.pid
    if pid is None:
        return False
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    try:
        if zygote_pid() is None:  # checked after the pidfd pins the process
            return False
        shutdown = getattr(zygote, "shutdown", None)
        if callable(shutdown):
            shutdown(timeout)
        else:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        return wait_exit(pidfd, timeout)
    finally:
        os.close(pidfd)
