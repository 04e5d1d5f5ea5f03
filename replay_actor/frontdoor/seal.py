"""The namespace seal: COMMAND in a network namespace where the front door is the only
endpoint (docs/front-door.md, "The seal").

Runs in: the ``run`` process (``NamespaceSeal``, ``listener``) and, for ``hook``, the
child between ``fork`` and ``exec``.

How: the child, before it executes COMMAND, leaves the host's network for a namespace
of its own (``unshare(CLONE_NEWNET)``; with ``CLONE_NEWUSER`` too when not root, its
user id mapped to itself, so files it writes are still the user's), brings that
namespace's ``lo`` up (``SIOCSIFFLAGS``; a new ``lo`` starts down), binds and listens on
the front door's address there, and hands the listening socket to ``run`` over a
``socketpair`` (``SCM_RIGHTS``). ``run`` serves on it: a socket belongs to the namespace
it was created in, whoever holds it, so the server accepts the child's connections while
``run`` itself stays in the host's network.

Why this and not a relay: the other sound form is the server outside on a Unix socket
path (a path, unlike an abstract name, is reachable from any network namespace) and a
relay process inside copying loopback TCP to it. That costs a process to start, watch
and reap, and a copy of every byte; this costs a few system calls in the child and no
process at all. And ``run`` never enters the namespace, so what it owns keeps working
as it does unsealed: the cursor actor, zygote and holder (forked by ``run``, on
``AF_UNIX`` sockets, abstract ones included, which are per network namespace), the live
and record adapters' connections to the vendor, the parent-death signal and pidfds
(the PID namespace is not changed). What COMMAND starts inherits its namespace: its own
processes (an in-process replay-actor, a local server it starts) reach each other on
its loopback; nothing reaches the host's, or any other address.

The host's path sockets (Docker's, a local proxy's), which a network namespace does not
cover, are hidden in a mount namespace of the child's own (:mod:`.sockets`), made in the
same ``unshare`` where the host has any; what could not be hidden is named by ``run``
in a warning (``unhidden``).

Not a sandbox: a child running as root keeps its capabilities (no user namespace is
made for root, so files keep their owners) and could deliberately leave; the seal is
against clients that go elsewhere by accident, not against a hostile program.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import ipaddress
import os
import socket
import struct
from collections.abc import Callable
from typing import Final

from .sockets import SocketCover, host_sockets

__all__ = ["NamespaceSeal", "SealUnavailable"]

_CLONE_NEWNS: Final = 0x00020000
_CLONE_NEWNET: Final = 0x40000000
_CLONE_NEWUSER: Final = 0x10000000
_SIOCGIFFLAGS: Final = 0x8913
_SIOCSIFFLAGS: Final = 0x8914
_IFF_UP: Final = 0x1
#: struct ifreq: a 16-byte name, then a union whose first member is the short flags;
#: 40 bytes on 64-bit Linux.
_IFREQ: Final = struct.Struct("16sh22x")
_BACKLOG: Final = 4096
#: The longest report the child sends back (its socket, and the paths left reachable).
_REPORT_BYTES: Final = 8192


class SealUnavailable(Exception):
    """This system cannot give the child a network namespace (``str`` says which step
    failed and why)."""


def _family(host: str) -> socket.AddressFamily:
    try:
        return socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    except ValueError:
        return socket.AF_INET


class NamespaceSeal:
    """``NamespaceSeal(host, port)``: one child's namespace, listening on ``host:port``.

    Pass ``hook(before)`` as the child's ``preexec_fn``; after the spawn, ``listener()``
    is the socket to serve on, or raises :class:`SealUnavailable`; ``unhidden`` is then
    the host's path sockets the child can still reach (none, unless hiding one
    failed). ``close()`` always."""

    def __init__(self, host: str, port: int) -> None:
        self._address = (host, port)
        self._family = _family(host)
        self._cover = SocketCover(host_sockets())
        self.unhidden: list[str] = []
        self._ours, self._theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._ours.setblocking(False)
        libc = ctypes.CDLL(None, use_errno=True)
        self._unshare = libc.unshare
        self._unshare.argtypes = [ctypes.c_int]

    def hook(self, before: Callable[[], None]) -> Callable[[], None]:
        """The child's ``preexec_fn``: the namespace, then ``before()`` (last, so nothing
        after it changes the child's credentials: the parent-death signal is cleared by
        such a change). Everything it calls is resolved here, before the fork; it raises
        (so the spawn fails and nothing is executed) after telling ``run`` why."""
        unshare = self._unshare
        get_errno = ctypes.get_errno
        uid, gid = os.geteuid(), os.getegid()
        attempts = ([_CLONE_NEWNET] if uid == 0 else []) + [_CLONE_NEWNET | _CLONE_NEWUSER]
        cover = self._cover
        if cover:  # a mount namespace too, where there is a socket to hide; else as before
            attempts = [flags | _CLONE_NEWNS for flags in attempts] + attempts
        maps = (("uid_map", f"{uid} {uid} 1"), ("setgroups", "deny"), ("gid_map", f"{gid} {gid} 1"))
        channel, address, family = self._theirs, self._address, self._family

        def fail(step: str, code: int) -> None:
            channel.send(f"{code} {step}".encode())
            raise OSError(code, step)

        def hook() -> None:
            code = 0
            for flags in attempts:
                if unshare(flags) == 0:
                    code = 0
                    break
                code = get_errno()
            if code:
                fail("unshare", code)
            step = "write /proc/self/uid_map"
            try:
                if flags & _CLONE_NEWUSER:
                    for name, text in maps:
                        step = f"write /proc/self/{name}"
                        fd = os.open(f"/proc/self/{name}", os.O_WRONLY)
                        try:
                            os.write(fd, text.encode())
                        finally:
                            os.close(fd)
                left = cover.cover() if flags & _CLONE_NEWNS else cover.paths
                step = "bring lo up"
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as ctl:
                    got = fcntl.ioctl(ctl, _SIOCGIFFLAGS, _IFREQ.pack(b"lo", 0))
                    up = _IFREQ.unpack(got)[1] | _IFF_UP
                    fcntl.ioctl(ctl, _SIOCSIFFLAGS, _IFREQ.pack(b"lo", up))
                step = f"listen on {address[0]}:{address[1]}"
                with socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP) as sock:
                    sock.bind(address)
                    sock.listen(_BACKLOG)
                    report = b"\0".join([b"ok", *left])[:_REPORT_BYTES]
                    socket.send_fds(channel, [report], [sock.fileno()])
            except OSError as exc:
                fail(step, exc.errno or errno.EIO)
            before()

        return hook

    def listener(self) -> socket.socket:
        """The listening socket the child made in its namespace (after the spawn)."""
        self._theirs.close()
        try:
            message, fds, _, _ = socket.recv_fds(self._ours, _REPORT_BYTES, 1)
        except BlockingIOError:
            raise SealUnavailable("the child did not report its namespace") from None
        if fds:
            sock = socket.socket(fileno=fds[0])
            sock.setblocking(False)
            self.unhidden = [os.fsdecode(p) for p in message.split(b"\0")[1:] if p]
            return sock
        code, _, step = message.decode("ascii", "replace").partition(" ")
        reason = os.strerror(int(code)) if code.isdigit() else "unknown error"
        raise SealUnavailable(f"{step} failed: {reason}")

    def close(self) -> None:
        self._theirs.close()
        self._ours.close()
