"""The handles of this process, and what happens to them at ``fork`` and at exit.

Runs in: the caller.

A fork child disowns the parent's connections (``disown_after_fork``), and at
interpreter exit this process ends the acquisitions it owns and acquired.
"""

from __future__ import annotations

import atexit
import os
import weakref
from typing import Protocol

from .zygote_client import zygote

__all__ = ["handles"]


class _Handle(Protocol):
    @property
    def owner_pid(self) -> int: ...

    def acquired_here(self) -> bool: ...

    def actor_alive(self) -> bool: ...

    def release_within(self, timeout: float) -> None: ...

    def disown_after_fork(self) -> None: ...


#: Every live handle of this process (weakly: an unreferenced handle leaves it).
handles: weakref.WeakSet[_Handle] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for handle in list(handles):
        handle.disown_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _release_own_at_exit() -> None:
    """At interpreter exit, end the acquisitions this process owns and acquired.

    Their actors would exit with us anyway (we are their owner), but only after we are
    gone: the zygote's exit hook, which waits for its actors, would otherwise wait its
    whole bound for actors that are waiting for us. Registered after the zygote's hook
    (this module imports ``zygote`` first), so it runs before it. Acquisitions owned by
    another process live on (their owner may still use them), and the zygote is then
    left to finish with them rather than waited for.
    """
    me = os.getpid()
    foreign = False
    for handle in list(handles):
        if not handle.acquired_here():
            continue  # a copy: its actor is another process's zygote's child
        if handle.owner_pid == me:
            handle.release_within(1.0)
        elif handle.actor_alive():
            foreign = True
    if foreign:
        # Our zygote outlives us for actors whose owners live on (it exits after
        # them); waiting for it here would only delay our exit by the hook's bound.
        zygote.shutdown(wait=0.0)


atexit.register(_release_own_at_exit)
