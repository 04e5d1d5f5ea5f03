"""``Channel``: length-prefixed messages over one connected AF_UNIX stream socket.

Runs in: the caller and the actor (the frames they carry, and how a byte stream is cut
into them, are ``protocol.py``'s: this module only moves bytes).

Each message is a 4-byte big-endian length and the payload, written with one ``write``
(the same framing as ``multiprocessing.connection``, without importing it: the actor
starts faster, and its start-up is what an acquisition waits for). Reads are buffered,
so a reply whose header and body arrive together costs one ``read``, where a plain
framed read costs two.

Nothing here waits without bound: the socket carries ``SO_RCVTIMEO``/``SO_SNDTIMEO``, so
a silent peer turns into ``BlockingIOError`` (an ``OSError``), and a dead one into
``EOFError``.
"""

from __future__ import annotations

import math
import os
import socket
import struct
from typing import Final

from ..._errors import InvalidArgument
from ..core.protocol import frame, payload_size, split_frames
from .held import send_now
from .waits import readable

__all__ = ["MAX_TIMEOUT", "MIN_TIMEOUT", "Channel", "bounded_timeout", "frame", "set_timeouts"]

_CHUNK: Final = 65536
#: The most one read of a large message asks for (and allocates) at once: 8 MiB.
_LARGEST_READ: Final = 8 * 1024 * 1024
_MAX_MESSAGE: Final = 2**32 - 1
#: The shortest wait the kernel is asked for: a ``timeval`` of zero means "forever", so
#: anything shorter than a microsecond is rounded up to one, never down to zero.
MIN_TIMEOUT: Final = 1e-6
#: The longest: every timeout is capped here (about 11.6 days) so that it fits every
#: kernel interface it reaches (``timeval``, ``poll`` milliseconds).
MAX_TIMEOUT: Final = 1_000_000.0


def bounded_timeout(seconds: float) -> float:
    """``seconds`` as a finite wait in [``MIN_TIMEOUT``, ``MAX_TIMEOUT``].

    Raises ``InvalidArgument`` for anything that is not a positive finite number: a
    non-finite timeout would mean "block forever", which no call may do.
    """
    try:
        # A number, not text that parses as one (and not a bool).
        value = math.nan if isinstance(seconds, (str, bytes, bool)) else float(seconds)
    except (TypeError, ValueError):
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise InvalidArgument(
            f"timeout must be a positive finite number of seconds, not {seconds!r}"
        )
    return min(max(value, MIN_TIMEOUT), MAX_TIMEOUT)


def set_timeouts(sock: socket.socket, seconds: float) -> None:
    """Bound every blocking read and write on ``sock`` by ``seconds``.

    The value is rounded *up* to whole microseconds: ``SO_RCVTIMEO`` reads a zero
    ``timeval`` as "no timeout", so a tiny timeout must never round down to it.
    """
    seconds = bounded_timeout(seconds)
    whole = int(seconds)
    micro = min(math.ceil((seconds - whole) * 1_000_000), 999_999)
    if whole == 0 and micro == 0:
        micro = 1
    value = struct.pack("ll", whole, micro)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, value)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, value)


class Channel:
    """One end of a message channel; owns its file descriptor."""

    __slots__ = ("_buffer", "_fd")

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = b""

    @classmethod
    def from_socket(cls, sock: socket.socket) -> Channel:
        return cls(sock.detach())

    def fileno(self) -> int:
        return self._fd

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def send(self, payload: bytes) -> None:
        if len(payload) > _MAX_MESSAGE:
            raise ValueError("message too large for the channel")
        self.send_frame(frame(payload))

    def send_frame(self, data: bytes, *, hold: bool = False) -> None:
        """Write one already framed message (``protocol.frame``) whole. ``hold``: first
        write what fits at once without letting go of the GIL (``held.send_now``), for a
        thread that shares its process with other calling threads."""
        written = send_now(self._fd, data) if hold else os.write(self._fd, data)
        if written < len(data):  # a full socket buffer: rare for a request
            view = memoryview(data)[written:]
            while view:
                view = view[os.write(self._fd, view) :]

    def recv(self) -> bytes:
        buffer = self._buffer
        if not buffer:
            buffer = self._read()
            # The common case: exactly one whole message arrived in one read.
            if len(buffer) == 4 + payload_size(buffer):
                return buffer[4:]
        while len(buffer) < 4:
            buffer += self._read()  # at most three more bytes: no growth to speak of
        spans, _, _ = split_frames(buffer)
        if spans:
            start, stop = spans[0]
            self._buffer = buffer[stop:]
            return buffer[start:stop]
        size = payload_size(buffer)
        # A large message: each read asks for exactly what is still missing, and the
        # pieces are joined once (never concatenated piece by piece: quadratic). Not
        # into a zeroed buffer of the final size copied out at the end: two fresh
        # allocations that size cost their pages afresh (a 500 KB reply: ~0.65 ms
        # that way, ~0.17 ms this way, on a VM).
        self._buffer = b""
        pieces: list[bytes | memoryview] = [memoryview(buffer)[4:]]
        have = len(buffer) - 4
        fd = self._fd
        while have < size:
            piece = os.read(fd, min(size - have, _LARGEST_READ))
            if not piece:
                raise EOFError("the peer closed the channel")
            pieces.append(piece)
            have += len(piece)
        return b"".join(pieces)

    def _read(self) -> bytes:
        chunk = os.read(self._fd, _CHUNK)
        if not chunk:
            raise EOFError("the peer closed the channel")
        return chunk

    def pending(self) -> bool:
        """True if a message (or part of one) is already buffered here."""
        return bool(self._buffer)

    def poll(self, timeout: float = 0.0) -> bool:
        """True if ``recv`` would find data (or EOF) without waiting longer than this."""
        if self._buffer:
            return True
        return readable(self._fd, timeout)

    def detach(self) -> int:
        """Give up ownership of the descriptor (unread buffered data is dropped)."""
        fd, self._fd = self._fd, -1
        self._buffer = b""
        return fd

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:
        self.close()
