"""Durable files: atomic replacement, fsync, append-all, and an exclusive lock.

Runs in: the caller (the recorder, and the authoring tools that rewrite a fixture).

``atomic_write`` replaces a file so that a reader sees the old or the new content, whole,
at every moment (temp file in the same folder, fsync, ``os.replace``, fsync the folder).
``take_lock`` is ``fcntl.flock`` on a ``.lock`` file, non-blocking: a second writer of the
same file (in this process or another) fails at once with ``RecordingLocked``. The lock
file is unlinked on release while still locked, and a locker checks that the path still
names the inode it locked, so two writers can never hold "the" lock at once.
"""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import stat
from typing import Final

from .._errors import RecordingError, RecordingLocked

__all__ = [
    "atomic_write",
    "fsync_dir",
    "release_lock",
    "remove_stale_temps",
    "take_lock",
    "write_all",
]

_LOCK_ATTEMPTS: Final = 20


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
