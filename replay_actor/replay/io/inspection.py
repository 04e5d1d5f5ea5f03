"""The owner-only inspection record: where private-mode hashes go instead of errors.

Runs in: the actor (and the CLI's ``lookup --inspection``, and the caller for a miss's
``nearest`` line).

Each miss or exhaustion is appended as one JSON line
``{"event": "miss" | "exhausted", "request_hash": "sha256:...", "call": N}``; each hit as
``{"event": "served", ...}`` when the acquisition asked for them (``inspection_served``);
and, from the caller, a miss's nearest recorded request as ``{"event": "nearest",
"request_hash", "nearest": {"request_hash", "paths"}}``. The file is
created with mode 0600 and opened with ``O_NOFOLLOW``, so a symbolic link planted at the
path is refused rather than followed, and ``O_NONBLOCK``, so a FIFO there is refused at
once instead of blocking the actor; each record is one ``write`` on an ``O_APPEND``
descriptor, so concurrent writers never interleave inside a line.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Any, Final, Literal

import msgspec

from ..._errors import InspectionPathError

__all__ = ["InspectionRecord", "open_inspection_record"]

# O_NONBLOCK: opening a FIFO for writing would otherwise wait for a reader (forever);
# non-blocking, it fails at once (ENXIO) or opens and is refused as not a regular file.
# On a regular file the flag changes nothing.
_FLAGS: Final = (
    os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
)
_encode = msgspec.json.Encoder().encode


class InspectionRecord:
    """An open, append-only inspection file. Not shared between processes' handles."""

    __slots__ = ("_fd",)

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def append(
        self, event: Literal["miss", "exhausted", "served"], request_hash: str, call: int
    ) -> None:
        line = _encode({"event": event, "request_hash": request_hash, "call": call}) + b"\n"
        os.write(self._fd, line)

    def append_nearest(self, request_hash: str, nearest: dict[str, Any]) -> None:
        line = {"event": "nearest", "request_hash": request_hash, "nearest": nearest}
        os.write(self._fd, _encode(line) + b"\n")

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def open_inspection_record(path: str | os.PathLike[str]) -> InspectionRecord:
    """Open (creating with mode 0600) the inspection file for appending.

    Raises ``InspectionPathError``, naming the path, if it is a symbolic link, not a
    regular file, or cannot be opened.
    """
    problem = "cannot be opened"
    try:
        fd = os.open(path, _FLAGS, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            problem = "is a symbolic link (refused)"
        elif exc.errno == errno.ENXIO:
            problem = "is not a regular file"  # a FIFO nobody reads, or a socket
        elif exc.strerror:
            problem = f"cannot be opened ({exc.strerror})"
    else:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode):
            if stat.S_IMODE(st.st_mode) & 0o077:
                os.fchmod(fd, 0o600)  # an existing file is made owner-only too
            return InspectionRecord(fd)
        os.close(fd)
        problem = "is not a regular file"
    raise InspectionPathError(f"the inspection record path {os.fspath(path)} {problem}")
