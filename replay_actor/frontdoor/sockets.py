"""The host's Unix sockets, hidden from a sealed child (docs/front-door.md, "The seal").

Runs in: the ``run`` process (:func:`host_sockets`, and :class:`SocketCover`'s set-up,
before the fork) and, for :meth:`SocketCover.cover`, the child between ``fork`` and
``exec``, inside its new namespaces.

Why: a network namespace keeps the child from every address, abstract Unix sockets
included (they belong to a network namespace), but a Unix socket bound to a *path* is
reached through the file system, which the child shares with the host: the Docker
daemon's ``/run/docker.sock``, a local proxy's or agent's socket. So the sealed child
also gets a mount namespace of its own (inside its user namespace when ``run`` is not
root, so no privilege is needed), in which every path socket bound on the host when
COMMAND starts is covered by a bind mount of ``/dev/null``: connecting to it is refused
(``ECONNREFUSED``, as for a socket nobody listens on), and the host's own view, where
the mounts are not propagated (the namespace's mounts are made private first), is
unchanged.

Which sockets: the host network namespace's bound path sockets, as the kernel lists them
(``/proc/net/unix``, read by ``run``, which stays in the host's namespaces), those that
are still a socket at that path. Kept reachable: the few system services the C library
itself dials and that reach no network — the name service caches (nscd, SSSD, systemd's
user database: without them a user from a directory service has no name) and the system
log (``/dev/log``, journald) — :data:`KEPT`.

What stays reachable, said in the docs: a socket bound on the host after COMMAND
started; a socket reached by another path than the one it was bound to (a hard link, a
bind mount, ``/proc/PID/root/…``, which a deliberate program could use: the seal is
against accidents, not a sandbox). Why not Landlock: its rights for path sockets
(``LANDLOCK_ACCESS_FS_RESOLVE_UNIX``) came after ABI 7; before that it can refuse making
a socket file, not connecting to one. Seccomp cannot read the address ``connect`` is
given.

COMMAND's own sockets are untouched: a path socket it binds is new (not covered),
abstract sockets live in its network namespace, and socket pairs have no address, so
Python's multiprocessing, a replay-actor acquisition inside COMMAND and a server it
starts work as unsealed.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from collections.abc import Iterable
from typing import Final

__all__ = ["KEPT", "SocketCover", "host_sockets", "warning"]

#: Sockets left reachable (a path, or a folder ending in ``/``): local system services the
#: C library dials, which reach no network (see the module docstring).
KEPT: Final = (
    "/run/nscd/",
    "/var/run/nscd/",
    "/var/lib/sss/pipes/",
    "/run/systemd/userdb/",
    "/run/systemd/journal/",
    "/dev/log",
)
_LISTING: Final = "/proc/net/unix"
_MS_BIND: Final = 4096
_MS_REC: Final = 16384
_MS_PRIVATE: Final = 1 << 18
#: Opening a path that is gone or not ours to reach: the child could not reach it either.
_UNREACHABLE: Final = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EACCES, errno.ELOOP})


def _kept(path: str) -> bool:
    return any(path.startswith(k) if k.endswith("/") else path == k for k in KEPT)


def host_sockets(listing: str = _LISTING) -> list[str]:
    """The path sockets bound in this process's network namespace that a sealed child
    must not reach: absolute, still a socket at that path, not :data:`KEPT`; sorted."""
    try:
        with open(listing, encoding="utf-8", errors="surrogateescape") as handle:
            lines = handle.read().splitlines()[1:]
    except OSError:
        return []
    found: set[str] = set()
    for line in lines:
        fields = line.split(maxsplit=7)
        # Num RefCount Protocol Flags Type St Inode Path: an abstract name starts with @.
        if len(fields) == 8 and fields[7].startswith("/"):
            found.add(fields[7])
    return sorted(path for path in found if not _kept(path) and _is_socket(path))


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except OSError:
        return False


class SocketCover:
    """``SocketCover(paths)``: covers ``paths`` in the child's new mount namespace.

    Made in ``run`` before the fork (everything :meth:`cover` calls is resolved here);
    :meth:`cover` runs in the child after ``unshare(CLONE_NEWNS)``."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.paths = [os.fsencode(path) for path in paths]
        libc = ctypes.CDLL(None, use_errno=True)
        self._mount = libc.mount
        self._mount.argtypes = [
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_ulong,
            ctypes.c_void_p,
        ]

    def __bool__(self) -> bool:
        return bool(self.paths)

    def cover(self) -> list[bytes]:
        """In the child: make the namespace's mounts private, then cover every path;
        the paths that stay reachable (a mount refused), to be said by ``run``."""
        mount = self._mount
        if mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
            return list(self.paths)  # never mount where it could reach the host's view
        left: list[bytes] = []
        for path in self.paths:
            try:
                # The socket itself, by descriptor: a path swapped for a link meanwhile
                # is not followed, and the mount lands on the inode that was checked.
                fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError as exc:
                if exc.errno not in _UNREACHABLE:
                    left.append(path)
                continue
            try:
                # Held by its descriptor, the target exists: any failure here (no
                # /dev/null, too many mounts) leaves it reachable, and run says so.
                target = b"/proc/self/fd/%d" % fd
                if stat.S_ISSOCK(os.fstat(fd).st_mode) and (
                    mount(b"/dev/null", target, None, _MS_BIND, None) != 0
                ):
                    left.append(path)
            finally:
                os.close(fd)
        return left


def warning(paths: Iterable[str]) -> str:
    """``run``'s warning naming the host sockets a sealed child can still reach."""
    shown = list(paths)
    return (
        f"replay-actor run: warning: COMMAND can reach {len(shown)} Unix socket"
        f"{'s' if len(shown) != 1 else ''} of this host ({', '.join(shown[:5])}"
        f"{', …' if len(shown) > 5 else ''}): the seal could not hide "
        f"{'it' if len(shown) == 1 else 'them'} "
        "(docs/front-door.md, 'The seal')"
    )
