"""``CoreFollower``: keeps an acquisition's actor on the core its caller runs on.

Runs in: the caller (the acquirer's handle, while one thread calls ``complete``).

A call is a ping-pong: the caller hashes, writes and sleeps in ``read``; the actor
wakes, answers and sleeps in ``epoll``. Left free, the scheduler wakes each on the core
it last ran on while that core is idle, so the two settle on two cores and every call
pays two wake-ups across cores; on a virtual machine each one is an interrupt to a
halted virtual CPU (~15 us on the machine of docs/benchmarks.md, "Where a call's time
goes"). On one core the same exchange takes no interrupt at all. So before each call
the follower asks which core the caller runs on (``sched_getcpu``, ~0.1 us) and, when
that changed, pins the actor there (``sched_setaffinity``). Never the caller: its
process is the application's.

Running beside the caller is worth more when the caller does not wait for each answer,
so the follower lets go for good (the actor's own affinity back) the first time the
handle is used another way: a second calling thread, an event loop (``acomplete``), a
pipelined batch (``complete_many``). It also stops for good, silently, when the platform
cannot tell or set cores or a setting fails (a cpuset that changed, an actor already
gone): a call never fails because of it. ``REPLAY_ACTOR_FOLLOW_CORE=0`` turns it off.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from .libc import LibcFunction

__all__ = ["ENV", "CoreFollower"]

#: Set to ``0`` to leave every actor where the scheduler puts it.
ENV = "REPLAY_ACTOR_FOLLOW_CORE"

_GETCPU = LibcFunction("sched_getcpu", (), "c_int")


class CoreFollower:
    """Pins the actor ``pid`` to the calling thread's core before each call (``follow``)
    until ``let_go``; see the module docstring."""

    __slots__ = ("_alive", "_core", "_lock", "_on", "_own", "_pid", "_read")

    def __init__(self, pid: int, alive: Callable[[], bool]) -> None:
        self._pid = pid
        # Asked before each move: a PID is only the actor's while the actor lives (its
        # pidfd says so exactly), and an unrelated process must never be moved.
        self._alive = alive
        self._core = -1  # where the actor is pinned now (-1: nowhere)
        self._own: set[int] | None = None  # the actor's affinity before the first pin
        self._lock = threading.Lock()
        self._read = _GETCPU.bind()
        self._on = (
            self._read is not None
            and hasattr(os, "sched_setaffinity")
            and os.environ.get(ENV, "1").strip() != "0"
        )

    @property
    def following(self) -> bool:
        return self._on

    def follow(self) -> None:
        """Pin the actor to this thread's core, if it is not there already. Never
        raises: a call must not fail because of where its actor runs."""
        if not self._on or self._read is None:
            return
        try:  # (free on the way through: this is on every call's path)
            core = self._read()
            if core == self._core:
                return
            with self._lock:
                if self._on:  # (else let go meanwhile)
                    self._pin(core)
        except Exception:  # whatever failed (an error, a closed pidfd), following ends
            with self._lock:
                self._stop()

    def _pin(self, core: int) -> None:
        # Under the lock.
        if not self._alive():
            self._on = False  # nothing to move, and nothing to give back
            return
        if self._own is None:
            self._own = os.sched_getaffinity(self._pid)
        if core < 0 or core not in self._own:
            raise OSError("the caller's core is not one the actor may run on")
        os.sched_setaffinity(self._pid, {core})
        self._core = core

    def let_go(self) -> None:
        """Give the actor its own affinity back and follow no more. Never raises."""
        if not self._on:
            return
        with self._lock:
            self._stop()

    def _stop(self) -> None:
        # Under the lock.
        self._on = False
        try:
            if self._core >= 0 and self._own is not None and self._alive():
                os.sched_setaffinity(self._pid, self._own)
        except Exception:
            pass  # the actor is gone, or cannot be looked at: nothing left to give back
        self._core = -1
