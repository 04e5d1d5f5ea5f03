"""Durable files: atomic replacement, fsync, append-all, and an exclusive lock.

Runs in: the caller (the recorder, and the authoring tools that rewrite a fixture).

``atomic_write`` replaces a file so that a reader sees the old or the new content, whole,
at every moment (temp file in the same folder, fsync, ``os.replace``, fsync the folder).
``take_lock`` is ``fcntl.flock`` on a ``.lock`` file, non-blocking: a second writer of the
same file (in this process or another) fails at once with ``RecordingLocked``. The lock
file is unlinked on release while still locked, and a locker checks that the path still
names the inode it locked, so two writers can never hold "the" lock at once.

``SessionLock`` is the same file held *shared* by each recorder for its session, so that
several recorders (threads, processes) record one fixture at once while ``add`` (which
takes it exclusively) is refused. A recorder that finds itself alone, opening or
leaving (the exclusive lock granted), does what only a lone recorder may: recover or
fold the journal, remove stale temporary files, and on leaving delete the journal and
the lock file.
"""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import stat
import time
from collections.abc import Callable
from typing import Final

from .._errors import RecordingError, RecordingLocked

__all__ = [
    "SessionLock",
    "atomic_write",
    "create_empty",
    "fsync_dir",
    "release_lock",
    "remove_stale_temps",
    "take_lock",
    "write_all",
]

_LOCK_ATTEMPTS: Final = 20
#: How long a recorder opening or a lone recorder's cleanup may make another wait: the
#: exclusive holder is ``add`` or a lone recorder folding a journal into the fixture.
SESSION_WAIT: Final = 60.0


def fsync_dir(folder: str) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _new_file_mode() -> int:
    """0666 less the umask, read without the thread-unsafe set-and-restore of os.umask."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o644


def atomic_write(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a reader sees the old or the new file,
    whole, at every moment; durable once this returns."""
    folder, name = os.path.split(path)
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = _new_file_mode()
    tmp = os.path.join(folder, f".{name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        try:
            write_all(fd, data)
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_dir(folder)


def create_empty(path: str) -> None:
    """Create ``path`` empty, durably, unless something is there: never over a file that
    another process creates meanwhile (``os.link`` of a complete file fails instead)."""
    if os.path.lexists(path):
        return
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, f".{name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, _new_file_mode())
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp)
    fsync_dir(folder)


def remove_stale_temps(path: str) -> None:
    """Temp files a crashed recorder left behind (we hold the lock: none is live)."""
    folder, name = os.path.split(path)
    prefix = f".{name}."
    for entry in os.listdir(folder):
        if entry.startswith(prefix) and entry.endswith(".tmp"):
            try:
                os.unlink(os.path.join(folder, entry))
            except OSError:
                pass


def take_lock(lock_path: str, purpose: str = "for recording") -> int:
    """Lock ``lock_path`` (flock, non-blocking); ``RecordingLocked`` if another holds it,
    ``RecordingError`` naming ``purpose`` ("for recording", "to add to it") if it cannot
    be locked at all."""
    for _ in range(_LOCK_ATTEMPTS):
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                problem = "a symbolic link, refused"
            else:
                problem = os.strerror(exc.errno) if exc.errno else type(exc).__name__
            break
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            held = exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
            problem = "held" if held else (os.strerror(exc.errno) if exc.errno else "error")
            break
        try:
            on_disk = os.stat(lock_path, follow_symlinks=False)
        except FileNotFoundError:
            on_disk = None
        mine = os.fstat(fd)
        if on_disk is not None and (on_disk.st_ino, on_disk.st_dev) == (mine.st_ino, mine.st_dev):
            return fd
        # The previous holder unlinked it between our open and our flock: start again.
        os.close(fd)
    else:
        problem = "contended"
    if problem == "held":
        raise RecordingLocked(
            "this fixture is already being recorded by another provider "
            f"({lock_path} is held); release that one first"
        )
    raise RecordingError(f"cannot lock the fixture {purpose}: {lock_path} ({problem})")


def release_lock(lock_path: str, fd: int) -> None:
    """Unlink ``lock_path`` (still locked, so no other locker can take the old inode),
    then close the locked descriptor."""
    try:
        os.unlink(lock_path)
    except OSError:
        pass
    os.close(fd)


def _opened(lock_path: str) -> int:
    try:
        return os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            problem = "a symbolic link, refused"
        else:
            problem = os.strerror(exc.errno) if exc.errno else type(exc).__name__
    raise RecordingError(f"cannot lock the fixture for recording: {lock_path} ({problem})")


def _names(lock_path: str, fd: int) -> bool:
    """True if ``lock_path`` still names the file open at ``fd``."""
    try:
        on_disk = os.stat(lock_path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (on_disk.st_ino, on_disk.st_dev) == (mine.st_ino, mine.st_dev)


def _try(fd: int, operation: int) -> bool:
    try:
        fcntl.flock(fd, operation | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False
        raise
    return True


class SessionLock:
    """A recording session's hold on ``FIXTURE.lock`` (module doc).

    ``acquire(when_alone)`` takes it shared, first trying it exclusively: granted, this
    recorder is alone and ``when_alone()`` runs before the lock is made shared.
    ``release(when_last)`` tries it exclusively: granted, this recorder was the last
    one, ``when_last()`` runs and the lock file goes. Waits (for ``add``, or for a lone
    recorder's folding) are bounded by ``SESSION_WAIT``.
    """

    __slots__ = ("fd", "path")

    def __init__(self, lock_path: str) -> None:
        self.path = lock_path
        self.fd = -1

    def acquire(self, when_alone: Callable[[], None]) -> None:
        deadline = time.monotonic() + SESSION_WAIT
        while True:
            fd = _opened(self.path)
            try:
                alone = _try(fd, fcntl.LOCK_EX) and _names(self.path, fd)
            except BaseException:
                os.close(fd)
                raise
            if alone:
                try:
                    when_alone()
                except BaseException:
                    self._drop(fd, unlink=True)
                    raise
            try:
                held = self._shared(fd, deadline) and _names(self.path, fd)
            except BaseException:
                os.close(fd)
                raise
            if held:
                self.fd = fd
                return
            os.close(fd)  # the file was unlinked by its last holder: take the new one

    def _shared(self, fd: int, deadline: float) -> bool:
        pause = 0.001
        while not _try(fd, fcntl.LOCK_SH):
            if time.monotonic() > deadline:
                raise RecordingLocked(
                    "this fixture stayed locked by another writer for "
                    f"{SESSION_WAIT:.0f} s ({self.path} is held); is replay-actor add "
                    "running, or a stopped process holding it?"
                )
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
        return True

    def _drop(self, fd: int, *, unlink: bool) -> None:
        if unlink and _names(self.path, fd):
            try:
                os.unlink(self.path)
            except OSError:
                pass
        os.close(fd)

    def release(self, when_last: Callable[[], None]) -> None:
        """Leave the session (idempotent); run ``when_last`` if no other recorder is in."""
        fd, self.fd = self.fd, -1
        if fd < 0:
            return
        try:
            last = _try(fd, fcntl.LOCK_EX)
        except OSError:
            last = False
        if not last:
            os.close(fd)
            return
        try:
            when_last()
        finally:
            self._drop(fd, unlink=True)

    def disown(self) -> None:
        """In a fork child: close this process's copy of the descriptor (the parent's
        copy keeps the lock)."""
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)
