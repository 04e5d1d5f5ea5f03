"""Connecting a handle to its actor's listener, and what a failed connect means.

Runs in: the caller.

Only one failure says the acquisition is over: nobody listens at the address any more
(``ECONNREFUSED``, or ``ENOENT`` for a path-bound listener). Everything else is not an
end and must not be reported as one:

- a full listen backlog (``EAGAIN``) or an interrupted call is retried, with a short
  back-off, until the handle's timeout; then the actor did not answer in time
  (``ActorLost``);
- a lack of resources in the caller (``EMFILE``, ``ENFILE``, ``ENOBUFS``, ``ENOMEM``) is
  a ``ReplayError`` saying so; the handle stays usable once the resource is back.
"""

from __future__ import annotations

import errno
import socket
import time
from typing import Final

from ..._errors import ActorLost, ProviderClosed, ReplayError
from ..io.wire import set_timeouts

__all__ = ["GONE", "RETRY", "connect", "new_socket", "resource_error"]

#: Nobody listens: the acquisition is over.
GONE: Final = frozenset({errno.ECONNREFUSED, errno.ENOENT})
#: Try again: a full backlog (the actor is busy), an interrupted call.
RETRY: Final = frozenset({errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR, errno.EINPROGRESS})
_FIRST_DELAY: Final = 0.0005
_LAST_DELAY: Final = 0.05


def resource_error(exc: OSError) -> ReplayError:
    """The ``ReplayError`` for a local failure that is not the actor's (no fd left...)."""
    error = ReplayError(f"could not reach the cursor actor: {exc.strerror or exc}")
    error.__cause__ = exc.with_traceback(None)
    return error


def new_socket() -> socket.socket:
    """An AF_UNIX stream socket; ``ReplayError`` if this process has no fd to spare."""
    try:
        return socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    except OSError as exc:
        error = resource_error(exc)
    raise error


def connect(address: bytes, timeout: float) -> socket.socket:
    """A blocking socket connected to ``address`` with read/write bounds of ``timeout``.

    Raises ``ProviderClosed`` if nobody listens, ``ActorLost`` if the listener stays
    busy for ``timeout`` seconds, ``ReplayError`` for a local lack of resources.
    """
    deadline = time.monotonic() + timeout
    delay = _FIRST_DELAY
    while True:
        sock = new_socket()
        try:
            sock.setblocking(False)
            sock.connect(address)
            sock.setblocking(True)
            set_timeouts(sock, timeout)
            return sock
        except OSError as exc:
            sock.close()
            failure = exc
        code = failure.errno
        if code in GONE:
            raise ProviderClosed("the acquisition has ended")
        if code not in RETRY:
            raise resource_error(failure)
        left = deadline - time.monotonic()
        if left <= 0:
            lost = ActorLost("the cursor actor did not accept a connection in time")
            lost.__cause__ = failure.with_traceback(None)
            raise lost
        time.sleep(min(delay, left))
        delay = min(delay * 2, _LAST_DELAY)
