"""Holding a process we did not necessarily start: a pidfd where the kernel has one,
psutil where it has not.

Runs in: the caller (the acquirer's hold on its actor, the reaper's on the zygote) and
the actor (its watch on the owner).

A pidfd names one process for good, so waiting on it is an event and a signal sent
through it can never reach a recycled PID. Without one (an old kernel, a seccomp
filter), psutil stands in: identity is the pair (pid, creation time), and a zombie
counts as dead (psutil's ``is_running()`` is true for one).

On Linux the creation time is read from ``/proc/PID/stat`` in one read: the start time
the kernel keeps there, in seconds since boot, which no change of the wall clock moves.
psutil reads the same file twice and ``/proc/stat`` for the boot time, and that in every
actor before it is ready: ~0.5 ms of the ~5 ms of an acquisition (docs/benchmarks.md,
P5a). An identity is only ever compared with another taken on the same machine (the
acquirer's of the owner with the actor's), so the two readings never meet.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Final

import psutil

from .waits import readable

__all__ = ["ProcessHandle", "identity", "open_pidfd"]

#: Clock ticks a second, where ``/proc/PID/stat`` is read (Linux); 0: psutil instead.
_TICKS: Final = (
    os.sysconf("SC_CLK_TCK")
    if sys.platform.startswith("linux") and os.path.exists("/proc/self/stat")
    else 0
)
#: ``starttime``'s index among the fields after the command name (``proc(5)``: field 22,
#: the state being field 3).
_START: Final = 19


def open_pidfd(pid: int) -> int | None:
    """A pidfd for ``pid``, or None where the kernel or platform refuses one.

    Raises ``ProcessLookupError`` if there is no such process.
    """
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        raise
    except (AttributeError, OSError):
        return None


def identity(pid: int) -> float | None:
    """The creation time identifying a live process, or None if it is dead or a zombie
    (or cannot be seen). Compare it only with another identity (module docstring)."""
    if _TICKS:
        return _proc_identity(pid)
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc.create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return None


def _proc_identity(pid: int) -> float | None:
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:  # no such process, or not ours to see
        return None
    try:
        line = os.read(fd, 4096)
    except OSError:  # it ended between the open and the read
        return None
    finally:
        os.close(fd)
    # The command name is in parentheses and may hold anything, ")" and spaces included.
    fields = line[line.rfind(b")") + 2 :].split()
    try:
        if fields[0] == b"Z":
            return None
        return int(fields[_START]) / _TICKS
    except (IndexError, ValueError):
        return None


class ProcessHandle:
    """A hold on one process: alive, wait (bounded), kill; by pidfd where possible."""

    __slots__ = ("_fd", "pid")

    def __init__(self, pid: int) -> None:
        self.pid = pid
        try:
            self._fd = open_pidfd(pid)
        except ProcessLookupError:
            self._fd = None

    @property
    def fd(self) -> int | None:
        """The pidfd (readable once the process has exited), or None."""
        return self._fd

    def alive(self) -> bool:
        if self._fd is not None:
            return not readable(self._fd)
        try:
            return psutil.Process(self.pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the process to exit; True if it did."""
        if self._fd is not None:
            return readable(self._fd, timeout)
        try:
            psutil.Process(self.pid).wait(timeout)
        except psutil.NoSuchProcess:
            return True
        except psutil.TimeoutExpired:
            return False
        return True

    def kill(self) -> None:
        try:
            if self._fd is not None:
                signal.pidfd_send_signal(self._fd, signal.SIGKILL)
            else:
                os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def finish(self, timeout: float) -> None:
        """Wait (bounded) for the process to exit; kill it if it will not."""
        if not self.wait(min(timeout, 5.0)):
            self.kill()
            self.wait(5.0)
        self.close()

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
