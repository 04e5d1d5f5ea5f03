"""The caller's handle on its zygote: starts it on first use, sends it requests, and
matches its replies to them.

Runs in: the caller (the acquiring process). The zygote itself, which forks the actors,
is ``replay/forked/zygote.py``; this module only names it in the command line that starts
it (``python -P -c``), never imports it, so nothing of the zygote's process is loaded here.

::

    acquirer --(TOKEN SP config + the actor's socket end, SCM_RIGHTS)--> zygote
    acquirer <--------------------- TOKEN SP pid | TOKEN SP - ---------- zygote

The zygote is shared by all of the process's acquisitions: ``Zygote.spawn`` never kills
it for one caller, never resends an actor's socket end once delivered, and tells a late
reply from its own by the request's token (docs/architecture.md, "Timeouts and the
zygote"). At exit (``Zygote.shutdown``) the channel is closed, so the zygote sees EOF and
exits after its actors, and this process reaps it (``reaper.py``) rather than leave an
orphan for init.
"""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import sys
import threading
import time
from typing import Final

from ..._errors import ActorLost, ControlMessageError
from ..core import control as messages
from ..core.protocol import ActorConfig
from ..io.waits import readable
from ..io.wire import set_timeouts
from .reaper import reaper

__all__ = ["Zygote", "zygote"]

#: The zygote's command: its module is imported in the zygote only, never here.
_BOOT: Final = "from replay_actor.replay.forked.zygote import main; main()"
_PACKAGE_ROOT: Final = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Zygote:
    """The acquiring process's handle on its zygote; started on first use.

    The zygote is shared by every acquisition of this process, so it is never killed
    on behalf of one: a request that timed out leaves the zygote running, and its late
    reply is recognised by its token and skipped. A request is sent once: after the
    actor's socket end was delivered, a process may hold it, so it is never offered
    to a second zygote.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._control: socket.socket | None = None
        self._popen: subprocess.Popen[bytes] | None = None
        self._pid = -1
        self._token = 0
        # The actors forked for this process, with their owners: the exit hook does not
        # wait for those this very process owns (they end when it does).
        self._actors: dict[int, int] = {}
        self._init_replies()

    def _init_replies(self) -> None:
        # Requests waiting for their replies (tokens), the replies read for them, the
        # channels found closed, and whether a waiter is reading the channel now.
        self._replies_cond = threading.Condition(threading.Lock())
        self._waiting: set[bytes] = set()
        self._replies: dict[bytes, bytes] = {}
        self._ended: set[socket.socket] = set()
        self._reading = False

    def spawn(self, config: ActorConfig, actor_end: socket.socket, timeout: float) -> int:
        """Fork an actor that serves ``actor_end``; return its PID.

        ``timeout`` bounds everything here: the wait for the lock (other threads'
        sends), the send, and the zygote's reply. Raises ``ActorLost`` when it runs
        out, and never kills the zygote for it. The lock covers the send only: several
        requests may wait for their replies at once (a large fixture's first load takes
        a while in its holder), each reply matched to its request by the token.
        """
        deadline = time.monotonic() + timeout
        if not self._lock.acquire(timeout=timeout):
            raise ActorLost("the zygote did not take the request in time")
        try:
            control, token = self._send(config, actor_end, deadline)
            with self._replies_cond:
                self._waiting.add(token)
        finally:
            self._lock.release()
        try:
            pid = self._reply(control, token, deadline)
        finally:
            with self._replies_cond:
                self._waiting.discard(token)
                self._replies.pop(token, None)
        with self._lock:
            self._remember(pid, config.owner_pid)
        return pid

    def _send(
        self, config: ActorConfig, actor_end: socket.socket, deadline: float
    ) -> tuple[socket.socket, bytes]:
        for _attempt in (1, 2):
            if self._control is None or self._pid != os.getpid():
                self._start()
            control = self._control
            assert control is not None
            self._token += 1
            token = messages.token(self._token)
            request = messages.encode_request(token, config)
            _bound(control, deadline)
            try:
                socket.send_fds(control, [request], [actor_end.fileno()])
            except BlockingIOError:
                raise ActorLost("the zygote did not take the request in time") from None
            except OSError:
                # Not delivered (the zygote is gone): nobody holds the actor's end, so
                # it may go to a new zygote, once.
                self._forget()
                continue
            return control, token
        raise ActorLost("could not start a cursor actor")

    def _reply(self, control: socket.socket, token: bytes, deadline: float) -> int:
        """Wait for this request's reply. One waiter at a time reads the channel and
        files what it reads by token for the others; a reply nobody waits for any more
        (its request timed out) is dropped."""
        cond = self._replies_cond
        while True:
            with cond:
                while True:
                    if token in self._replies:
                        reply = self._replies.pop(token)
                        break
                    if control in self._ended:
                        raise ActorLost("the zygote ended before it forked the actor")
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise ActorLost("the zygote did not fork the actor in time")
                    if not self._reading:
                        self._reading = True
                        reply = b""
                        break
                    cond.wait(remaining)
            if not reply:
                self._read_one(control, deadline)
                continue
            try:
                pid = messages.parse_reply(reply).pid
            except ControlMessageError:
                pid = None
            if pid is None:
                raise ActorLost("the zygote did not fork the actor")
            return pid

    def _read_one(self, control: socket.socket, deadline: float) -> None:
        """As the reader: wait (until ``deadline`` at most) for one reply and file it."""
        message = _receive(control, deadline)
        with self._replies_cond:
            self._reading = False
            if message == b"":
                # Gone after taking requests: an actor may hold an end, so no retry.
                self._ended.add(control)
            elif message is not None:
                try:
                    got = messages.token_of(message)
                except ControlMessageError:
                    got = b""  # not a reply: nobody waits for it
                if got in self._waiting:
                    self._replies[got] = message
            self._replies_cond.notify_all()
        if message == b"":
            with self._lock:
                if self._control is control:
                    self._forget()

    def _remember(self, pid: int, owner: int) -> None:
        if len(self._actors) >= 64:
            self._actors = {p: o for p, o in self._actors.items() if _running(p)}
        self._actors[pid] = owner

    def _start(self) -> None:
        # The zygote must import this very replay_actor, whatever the caller's path.
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._popen = subprocess.Popen(
                [sys.executable, "-P", "-c", _BOOT, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
            )
        finally:
            theirs.close()
        reaper.watch(self._popen)
        self._control = ours
        self._pid = os.getpid()
        # Tokens keep counting across zygotes: a waiter on a zygote that died must never
        # take the reply meant for a request to its successor.
        self._actors = {}

    def _forget(self) -> None:
        """Let go of a zygote that is gone: close our channel (the reaper collects it)."""
        control, self._control = self._control, None
        if control is not None:
            control.close()
        self._popen = None

    def after_fork_in_child(self) -> None:
        # The parent's zygote is the parent's: drop our copy of its channel, so it still
        # sees EOF when the parent exits, and start our own on first use.
        self._lock = threading.Lock()
        self._init_replies()
        control, self._control = self._control, None
        if control is not None:
            control.close()
        self._popen = None
        self._actors = {}

    @property
    def pid(self) -> int | None:
        """The zygote's PID, if one runs for this process."""
        return None if self._popen is None else self._popen.pid

    def shutdown(self, wait: float = 1.0) -> None:
        """At interpreter exit: close the channel and reap the zygote ourselves, so it
        does not outlive us as an orphan for init to collect.

        A zygote whose actors still serve (their owners live on) is left to finish
        with them rather than killed: killing it would orphan them. An actor this
        exiting process owns ends only once the process has, so while one lives there
        is nothing to wait for."""
        if not self._lock.acquire(timeout=wait):
            return
        try:
            control, self._control = self._control, None
            popen, self._popen = self._popen, None
            me = os.getpid()
            ours = [p for p, owner in self._actors.items() if owner == me and _running(p)]
        finally:
            self._lock.release()
        if control is not None:
            control.close()  # EOF: the zygote exits once its actors have
        if popen is not None and not ours:
            try:
                popen.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                pass


def _receive(control: socket.socket, deadline: float) -> bytes | None:
    """One message from the zygote's channel, waited for until ``deadline`` at most:
    None if none came, ``b""`` if the channel is gone."""
    message: bytes | None = None
    try:
        # poll, then a non-blocking read: the socket's own timeouts are set by
        # whichever thread sent last, so they cannot bound this wait.
        if readable(control.fileno(), deadline - time.monotonic()):
            try:
                message = control.recv(messages.MAX_REPLY + 1, socket.MSG_DONTWAIT)
            except BlockingIOError:
                message = None
            except OSError:
                message = b""
    except (OSError, ValueError):
        message = b""  # closed under us: gone
    return message


def _bound(sock: socket.socket, deadline: float) -> None:
    """Bound the next blocking call on ``sock`` by what is left until ``deadline``."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise ActorLost("the zygote did not fork the actor in time")
    # At least a millisecond: a zero timeout would mean "block forever" to the kernel.
    set_timeouts(sock, max(remaining, 0.001))


zygote = Zygote()
os.register_at_fork(after_in_child=zygote.after_fork_in_child)
atexit.register(zygote.shutdown)
