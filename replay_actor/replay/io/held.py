"""``send_now``: a socket write that never waits and keeps the GIL while it writes.

Runs in: the caller, when several threads share one handle (``caller/sync.py``).

CPython lets go of the GIL around every ``os.write`` and ``socket.send``. With one
calling thread that costs nothing; with several, each write hands the GIL to a waiting
thread, and the writer, whose write the kernel finishes in a few microseconds, then
sleeps until it gets the GIL back: two context switches per call, for nothing, on a
machine with few cores (docs/concurrency.md, "Threads on one handle").

``send_now`` writes through ``ctypes.PyDLL`` (a foreign call that keeps the GIL) with
``MSG_DONTWAIT``: it writes what fits in the socket's buffer at once and never blocks,
so holding the GIL can never stall the process. It returns how many bytes went out, 0
when none could (a full buffer, an interrupted call, any error, or no C library to call):
the caller writes the rest the ordinary way, which waits, reports the error and releases
the GIL as usual.
"""

from __future__ import annotations

import socket

from .libc import LibcFunction

__all__ = ["send_now"]

_SEND = LibcFunction("send", ("c_int", "c_char_p", "c_size_t", "c_int"), "c_ssize_t", keep_gil=True)

_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)
#: A closed peer is an ``EPIPE`` to report, never a ``SIGPIPE`` to die of (an application
#: may have restored the signal's default action).
_FLAGS = _DONTWAIT | getattr(socket, "MSG_NOSIGNAL", 0)


def send_now(fd: int, data: bytes) -> int:
    """Write as much of ``data`` to the socket ``fd`` as fits now, keeping the GIL; the
    number of bytes written (0 if none could be, whatever the reason)."""
    send = _SEND.function if _SEND.bound else _SEND.bind()
    if send is None or not _DONTWAIT:
        return 0
    written = send(fd, data, len(data), _FLAGS)
    return written if written > 0 else 0
