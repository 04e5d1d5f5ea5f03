"""Waiting for descriptors to be ready, with ``poll``: any descriptor number will do.

Runs in: every process of the replay machinery (the caller, the zygote, the holders, the
actor).

``select.select`` refuses a descriptor of 1,024 or more (``FD_SETSIZE``): in a process
holding that many (Ray, servers and evaluation harnesses raise their limit and use it),
every descriptor opened later is past the bound, and each wait on one raised
``ValueError``. ``poll`` has no such bound and costs no more for the few descriptors
waited on here. The replay machinery's other waits are ``epoll`` (the actor's loop, the
supervisor's and the reaper's selectors); none is ``select``.

The answers are ``select``'s: an end of file, a hang-up or an error counts as ready (the
read or write that follows says which), a negative descriptor raises ``ValueError`` and a
closed one ``OSError`` (``EBADF``).
"""

from __future__ import annotations

import errno
import select
from collections.abc import Iterable
from typing import Final, Protocol, TypeVar

__all__ = ["readable", "ready"]

#: The longest wait ``poll`` takes, in milliseconds (a C ``int``); longer ones are cut
#: to it, and every caller here waits again or moves on when a wait ends with nothing.
_LONGEST_MS: Final = 2**31 - 1


class _HasFileno(Protocol):
    def fileno(self) -> int: ...


_Source = TypeVar("_Source", bound="int | _HasFileno")


def _milliseconds(timeout: float | None) -> float | None:
    if timeout is None:
        return None  # until something is ready
    # Seconds to milliseconds; poll rounds a fraction up, so a short wait never spins.
    return min(max(0.0, timeout) * 1000.0, _LONGEST_MS)


def _number(source: int | _HasFileno) -> int:
    fd = source if isinstance(source, int) else source.fileno()
    if fd < 0:
        raise ValueError("file descriptor cannot be a negative integer")
    return fd


def readable(fd: int, timeout: float = 0.0) -> bool:
    """True if a read of ``fd`` would not wait (data, end of file or an error), waiting
    at most ``timeout`` seconds for it."""
    return bool(ready((fd,), timeout))


def ready(
    sources: Iterable[_Source], timeout: float | None, *, write: bool = False
) -> list[_Source]:
    """The ``sources`` (descriptors, or objects with ``fileno``) ready to be read, or
    written with ``write=True``, after waiting at most ``timeout`` seconds (None: until
    one is)."""
    poller = select.poll()
    by_fd: dict[int, _Source] = {}
    mask = select.POLLOUT if write else select.POLLIN
    for source in sources:
        fd = _number(source)
        by_fd[fd] = source
        poller.register(fd, mask)
    found = []
    for fd, events in poller.poll(_milliseconds(timeout)):
        if events & select.POLLNVAL:
            raise OSError(errno.EBADF, "Bad file descriptor")
        found.append(by_fd[fd])
    return found
