"""P5's strict reference: a bare no-op child forked from a warm process started the same
way as replay-actor's zygote, and the steps between it and a real acquisition.

``MiniZygote`` starts ``python -P -c "from benchmarks.minizygote import main; main()" FD
MODE [FIXTURE...]`` with ``subprocess.Popen`` (the zygote's command line, environment and
passed ``SOCK_SEQPACKET`` control socket), which imports ``replay_actor.replay.forked.zygote``
(all the actor's code, as the zygote does), ignores SIGCHLD and then, per request received with
a socket fd (``SCM_RIGHTS``, as the zygote receives the actor's end), forks a child and
replies with its PID. What the child does is the request's first byte:

- ``N``: write ``b"OK"`` on the passed fd and ``os._exit(0)`` (the no-op child);
- ``A``: run the real actor (``replay_actor.replay.forked.actor.serve_forked``) on the passed fd
  with the JSON config that follows: process name, owner pidfd + psutil identity, the
  fixture table (the cached one, if this mini-zygote holds it), the listener bind and
  the READY frame; it exits when the benchmark closes its end.

With ``MODE`` ``table`` the process first parses each FIXTURE as the zygote's cache does
(``FixtureCache.warm``: parse, snapshot, collect, trim the heap, ``gc.freeze``; it keeps
what the zygote's byte-bounded cache would: files over ``CACHE_ENTRY_BYTES`` are not
parsed), so ``N`` then measures the fork of a process holding those tables.

The benchmark side of each sample is the acquirer's side of ``acquire`` reduced to the
wire: a socketpair, the request with the child's end, the PID reply, then the child's
first bytes on our end.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from typing import Final

import msgspec

from .procs import stop

__all__ = ["MiniZygote", "main"]

_BOOT: Final = "from benchmarks.minizygote import main; main()"
_MAX_REQUEST: Final = 1 << 20


def main() -> None:
    """The mini-zygote's body: ``... main()`` FD MODE [FIXTURE]."""
    import replay_actor.replay.forked.zygote as zyg
    from replay_actor.fixture import DEFAULT_CEILINGS
    from replay_actor.replay.core.protocol import ActorConfig
    from replay_actor.replay.forked.actor import serve_forked

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    control = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, fileno=int(sys.argv[1]))
    mode = sys.argv[2]
    cache = zyg.FixtureCache()
    for path in sys.argv[3:] if mode == "table" else ():
        warm_config = ActorConfig(
            fixture=path,
            owner_pid=os.getppid(),
            owner_create_time=0.0,
            private=False,
            ceilings=DEFAULT_CEILINGS.as_dict(),
            inspection_path=None,
        )
        # What the zygote does before it forks for this fixture: it keeps the fixtures
        # its cache admits (small ones); a large one is left to the actor to parse.
        cache.warm(warm_config)
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, _MAX_REQUEST, 1)
        except OSError:
            break
        if not message or len(fds) != 1:
            break  # the benchmark is gone (EOF) or spoke out of turn
        op = message[:1]
        config = None
        if op == b"A":
            config = msgspec.json.decode(message[1:], type=ActorConfig)
        pid = os.fork()
        if pid == 0:
            control.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            if config is None:
                try:
                    os.write(fds[0], b"OK")
                finally:
                    os._exit(0)
            serve_forked(fds[0], config, cache.get(config))  # never returns
        os.close(fds[0])
        control.send(str(pid).encode("ascii"))
    os._exit(0)


class MiniZygote:
    """Our handle on one mini-zygote child; ``close`` stops it by its PID and reaps it."""

    def __init__(self, env: dict[str, str], fixtures: tuple[str, ...] = ()) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        mode = "table" if fixtures else "bare"
        args = [str(theirs.fileno()), mode, *fixtures]
        try:
            self.popen = subprocess.Popen(
                [sys.executable, "-P", "-c", _BOOT, *args],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
            )
        finally:
            theirs.close()
        self._control = ours
        ours.settimeout(60.0)  # the first request waits for the imports (and the parse)
        self.noop()
        ours.settimeout(10.0)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def _fork(self, message: bytes) -> float:
        """Seconds from the socketpair to the child's first bytes on our end."""
        start = time.perf_counter()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            try:
                socket.send_fds(self._control, [message], [theirs.fileno()])
                reply = self._control.recv(32)
            finally:
                theirs.close()
            if not reply.isdigit():
                raise RuntimeError("the mini-zygote did not fork")
            ours.settimeout(10.0)
            data = ours.recv(4096)
            elapsed = time.perf_counter() - start
        finally:
            ours.close()  # EOF: an actor child ends its loop and exits
        if b"OK" not in data:
            raise RuntimeError("the forked child did not signal ready")
        return elapsed

    def noop(self) -> float:
        """A no-op child: fork, write OK, exit."""
        return self._fork(b"N")

    def actor(self, config: bytes) -> float:
        """The real actor's set-up in the forked child, until its READY frame."""
        return self._fork(b"A" + config)

    def close(self) -> None:
        self._control.close()  # EOF: it exits by itself
        try:
            self.popen.wait(5.0)
        except subprocess.TimeoutExpired:
            pass
        stop(self.popen)
