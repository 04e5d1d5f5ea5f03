"""The reaper: collects the exit status of this process's zygote.

Runs in: the caller (one daemon thread).

Actors are the zygote's children and the kernel reaps them (the zygote ignores
SIGCHLD); the zygote is ours. An orchestrator that lives on must not accumulate
zombies, and a zygote may exit while nobody is calling (its actors gone, or killed):
one daemon thread, started on the first acquisition (never at import), sleeps in
``epoll`` (``selectors.DefaultSelector``) on the child's pidfd and reaps it the moment it
exits. Where pidfds are unavailable it polls once a second.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import threading

from ..io.procs import open_pidfd

__all__ = ["Reaper", "reaper"]


class Reaper:
    """Reaps ``subprocess.Popen`` children as they exit, without being asked."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._selector: selectors.BaseSelector | None = None
        self._wake_r = self._wake_w = -1
        self._pending: list[subprocess.Popen[bytes]] = []
        self._polled: list[subprocess.Popen[bytes]] = []
        self._pid = -1

    def watch(self, popen: subprocess.Popen[bytes]) -> None:
        """Reap ``popen`` when it exits."""
        with self._lock:
            if self._thread is None or self._pid != os.getpid():
                self._start()
            self._pending.append(popen)
        os.write(self._wake_w, b"x")

    def _start(self) -> None:
        # Also after a fork: the parent's thread does not exist in the child.
        self._pid = os.getpid()
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._pending = []
        self._polled = []
        self._thread = threading.Thread(target=self._run, name="replay-actor-reaper", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        selector = self._selector
        assert selector is not None
        while True:
            events = selector.select(1.0 if self._polled else None)
            for key, _ in events:
                if key.data is None:
                    try:
                        while os.read(self._wake_r, 4096):
                            pass
                    except BlockingIOError:
                        pass
                    continue
                popen, fd = key.data
                selector.unregister(fd)
                os.close(fd)
                popen.poll()
            with self._lock:
                pending, self._pending = self._pending, []
            for popen in pending:
                self._add(selector, popen)
            self._polled = [p for p in self._polled if p.poll() is None]

    def _add(self, selector: selectors.BaseSelector, popen: subprocess.Popen[bytes]) -> None:
        if popen.poll() is not None:
            return
        try:
            fd = open_pidfd(popen.pid)
        except ProcessLookupError:
            fd = None
        if fd is None:
            self._polled.append(popen)
            return
        selector.register(fd, selectors.EVENT_READ, (popen, fd))


reaper = Reaper()
