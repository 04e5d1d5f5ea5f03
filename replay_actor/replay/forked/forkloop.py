"""The fork-and-reap loop the zygote and every holder run: receive a request with the
actor's socket end, fork an actor for it, reply, and stay the actors' parent to the end.

Runs in: the zygote (``zygote.py``) and the holders (``holder.py``); each passes a
``Forker`` that says what differs (what else it watches, where a request may be routed
instead, which fixture an actor is forked with).

::

    poll(channel + the forker's own)   --> forker.other(readable)   timers, holders, actors
    channel: recv TOKEN SP config + fd --> hung up?        reply TOKEN SP -
                                           forker.route?   (another process replies)
                                           fork            reply TOKEN SP pid
    EOF / EXIT / a failed send         --> close, wait() for every child, _exit(0)

A malformed request is dropped (its socket end closed): only this process's own
acquirer or zygote writes to the channel, so it is a bug, never input to answer.
"""

from __future__ import annotations

import os
import socket
from typing import Any, NoReturn, Protocol

from ..._errors import ControlMessageError, FixtureError
from ...fixture import FixtureSet
from ..core import control
from ..core.control import Request
from ..core.protocol import ActorConfig
from ..io.waits import readable, ready
from .actor import serve_forked

__all__ = ["Forker", "hung_up", "serve"]


class Forker(Protocol):
    """What the zygote and a holder each add to the loop."""

    channel: socket.socket

    def watched(self) -> list[Any]:
        """Besides the channel, what to wait on (anything with ``fileno``, or an fd)."""

    def timeout(self) -> float | None:
        """How long to wait at most (None: until something is readable)."""

    def other(self, readable: list[Any]) -> None:
        """After each wait: handle what is readable besides the channel, and timers."""

    def route(self, message: bytes, request: Request, fd: int) -> bool:
        """True if the request went elsewhere (whose reply is relayed), not forked here."""

    def fixture(self, config: ActorConfig) -> FixtureSet | FixtureError | None:
        """What the actor is forked with (None: it loads the file itself)."""

    def in_child(self) -> None:
        """In the forked actor, before it serves: drop this process's descriptors."""

    def forked(self, pid: int) -> None:
        """In this process, after an actor was forked (and its socket end closed)."""

    def replied(self) -> None:
        """In this process, after a reply went back (work that must not delay it)."""

    def close(self) -> None:
        """The loop ends: close everything but the children."""


def hung_up(fd: int) -> bool:
    """True if the acquirer already closed its end (it sends nothing before READY, so
    readable means EOF): its acquire timed out, and an actor would serve nobody."""
    return readable(fd)


def serve(forker: Forker) -> NoReturn:
    """Run the loop until the channel ends; never returns (the process exits)."""
    try:
        channel = forker.channel
        while True:
            found = ready([channel, *forker.watched()], forker.timeout())
            forker.other(found)
            if channel not in found:
                continue
            try:
                message, fds, _, _ = socket.recv_fds(channel, control.MAX_MESSAGE, 1)
            except OSError:
                break
            if not message or message == control.EXIT:
                break  # the acquirer (or, for a holder, the zygote) is gone or says go
            reply = _answer(forker, message, fds)
            if reply is None:
                continue
            try:
                channel.send(reply)
            except OSError:
                break
            forker.replied()
        forker.close()
        _reap_all()
    finally:
        os._exit(0)


def _answer(forker: Forker, message: bytes, fds: list[int]) -> bytes | None:
    """Fork an actor for one request; the reply to send (None: none to send now)."""
    if len(fds) != 1:
        for fd in fds:
            os.close(fd)
        return None
    fd = fds[0]
    try:
        request = control.parse_request(message)
    except ControlMessageError:
        os.close(fd)
        return None
    if hung_up(fd):
        os.close(fd)
        return control.encode_reply(request.token, None)
    if forker.route(message, request, fd):
        os.close(fd)  # the process it went to has its own copy of the end
        return None
    source = forker.fixture(request.config)
    if hung_up(fd):  # gave up while the fixture loaded: nobody to serve
        os.close(fd)
        return control.encode_reply(request.token, None)
    pid = os.fork()
    if pid == 0:
        forker.in_child()
        serve_forked(fd, request.config, source)  # never returns
    os.close(fd)
    forker.forked(pid)
    return control.encode_reply(request.token, pid)


def _reap_all() -> None:
    """Stay the actors' parent until the last one exits, so that none is ever orphaned
    (their owners may outlive the acquirer). With SIGCHLD ignored, wait() blocks until
    every child is gone, then raises ECHILD."""
    try:
        while True:
            os.wait()
    except ChildProcessError:
        pass
