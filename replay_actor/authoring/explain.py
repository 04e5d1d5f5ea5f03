"""The miss policy: what a miss's ``nearest`` is, in normal and in private mode.

Runs in: the caller, only after a miss (a handle's miss branch).

Normal mode: ``ReplayMiss.nearest`` is ``{"request_hash", "paths"}`` of the nearest
recorded request in the fixture's request sidecar (``nearest.py`` ranks, and
``files/sidecar.py`` reads), and the message gains one line saying the same. Private
mode: the exception carries nothing; the explanation goes to the acquisition's owner-only
inspection record, if it has one, as a ``nearest`` line.

A miss stays cheap, whatever is at the sidecar's path:

- a sidecar over ``MISS_SIDECAR_BYTES`` (64 MiB) is not read at all (one ``stat``): the
  miss has no ``nearest``, and ``replay-actor explain`` (no such cap) still explains it;
  so a miss reads at most that much, one line at a time (at most ``MAX_LINE_BYTES`` held);
- the last sidecar of up to ``_KEEP_BYTES`` (32 MiB) a miss parsed is kept while the file
  stays the same, so misses that follow one another read it once;
- only the fixture's entries are candidates: the sidecar also holds the requests ``run``
  saved on earlier misses (docs/front-door.md), which are not answers yet, and a missed
  request is never its own nearest. The fixture's hashes are found by a scan of its
  bytes (up to ``MISS_FIXTURE_BYTES``, 256 MiB; over it, every sidecar line but the
  miss's own is a candidate), kept while the file stays the same;
- nothing about the sidecar (unreadable, corrupt, nested too deeply) ever raises here: a
  diagnostic must not replace the failure it explains.

The work is done in frames that are gone before the caller raises, so no traceback's
locals hold a private request's hash or explanation.
"""

from __future__ import annotations

import os
import re
import stat
import threading
from collections.abc import Iterable
from typing import Any, Final

import msgspec

from .._errors import InspectionPathError, ReplayError, ReplayMiss
from .._request import RequestLike
from ..files.sidecar import read_sidecar, sidecar_path
from ..replay.io.inspection import open_inspection_record
from .nearest import rank

__all__ = ["MISS_FIXTURE_BYTES", "MISS_SIDECAR_BYTES", "explain_miss", "miss_error"]

#: The largest sidecar a miss reads to explain itself; a larger one is not opened.
MISS_SIDECAR_BYTES: Final = 64 << 20
#: The last sidecar a miss parsed is kept (with its lines' bytes) up to this size.
_KEEP_BYTES: Final = 32 << 20
_last: tuple[tuple[int, int, int, int], list[tuple[str, Any]]] | None = None
_last_lock: Final = threading.Lock()


def _parsed(path: str, max_bytes: int) -> Iterable[tuple[str, Any]] | None:
    """The sidecar's entries, from the kept parse when the file is unchanged; None when it
    is over ``max_bytes`` (not read)."""
    global _last
    st = os.stat(path)
    if st.st_size > max_bytes:
        return None
    if st.st_size > _KEEP_BYTES:
        return read_sidecar(path, max_bytes=max_bytes)
    identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    with _last_lock:
        if _last is None or _last[0] != identity:
            _last = None  # let the old entries go before reading the new ones
            _last = (identity, list(read_sidecar(path, max_bytes=_KEEP_BYTES)))
        return _last[1]


#: The largest fixture a miss scans for its hashes (below); a larger one is not scanned.
MISS_FIXTURE_BYTES: Final = 256 << 20
_ENTRY_HASH: Final = re.compile(rb'"request_hash"\s{0,8}:\s{0,8}"(sha256:[0-9a-f]{64})"')
_CHUNK: Final = 1 << 20
_CARRY: Final = 128  # longer than any match, so one split by a chunk boundary is found
_hashes: tuple[tuple[int, int, int, int], frozenset[str]] | None = None


def _fixture_hashes(fixture: str | os.PathLike[str]) -> frozenset[str] | None:
    """The request hashes the fixture file spells out, kept while the file is unchanged;
    None when it cannot be scanned (over ``MISS_FIXTURE_BYTES``, not a regular file).

    The sidecar holds requests that are not answers yet (``run`` saves every miss there,
    docs/front-door.md): only these hashes may be named as the nearest *recorded*
    request. A scan, not a load: a miss must stay cheap, and the loader has checked the
    file already (a key spelled with escapes is missed, which costs only a candidate).
    """
    global _hashes
    fd = os.open(fixture, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    with open(fd, "rb", closefd=True) as handle:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MISS_FIXTURE_BYTES:
            return None
        identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        with _last_lock:
            if _hashes is not None and _hashes[0] == identity:
                return _hashes[1]
        found: set[str] = set()
        carry = b""
        while chunk := handle.read(_CHUNK):
            data = carry + chunk
            found.update(m.decode("ascii") for m in _ENTRY_HASH.findall(data))
            carry = data[-_CARRY:]
    hashes = frozenset(found)
    with _last_lock:
        _hashes = (identity, hashes)
    return hashes


class _Recorded:
    """The candidates a miss may be explained by: the fixture's hashes when known, else
    every hash; never the missed request's own (its sidecar line is the miss itself)."""

    __slots__ = ("_digest", "_known")

    def __init__(self, known: frozenset[str] | None, digest: str | None) -> None:
        self._known = known
        self._digest = digest

    def __contains__(self, item: object) -> bool:
        if item == self._digest:
            return False
        return self._known is None or item in self._known


def _candidates(fixture: str | os.PathLike[str], digest: str | None) -> _Recorded:
    try:
        known = _fixture_hashes(fixture)
    except OSError:
        known = None
    return _Recorded(known, digest)


def explain_miss(
    fixture: str | os.PathLike[str],
    request: RequestLike,
    *,
    max_bytes: int = MISS_SIDECAR_BYTES,
    digest: str | None = None,
) -> dict[str, Any] | None:
    """``{"request_hash", "paths"}`` of the nearest recorded request, for a miss
    (``digest``: the missed request's hash, whose own sidecar line is skipped). Only
    the fixture's entries are candidates (``_fixture_hashes``).

    None when the fixture has no sidecar, the sidecar is over ``max_bytes`` or holds no
    candidate. Never raises for an unusable sidecar (unreadable, corrupt, too deep).
    """
    path = sidecar_path(fixture)
    try:
        entries = _parsed(path, max_bytes)
        if entries is None:
            return None
        nearest = rank(entries, request, _candidates(fixture, digest))
    except (OSError, ReplayError, ValueError, RecursionError, msgspec.MsgspecError):
        return None
    if nearest is None:
        return None
    return {"request_hash": nearest.request_hash, "paths": nearest.paths}


def miss_error(
    request: RequestLike,
    digest: str,
    private: bool,
    fixture: str,
    inspection_path: str | None,
) -> ReplayMiss:
    """The ``ReplayMiss`` a handle raises for ``request`` (hash ``digest``), explained.

    Normal mode: ``nearest`` on the exception (and one more message line). Private mode:
    the exception carries nothing; the explanation is appended to the owner-only
    inspection record, if the acquisition has one.
    """
    if not private:
        nearest = explain_miss(fixture, request, digest=digest) if fixture else None
        return ReplayMiss(digest, nearest)
    if fixture and inspection_path is not None:
        _note_nearest(fixture, request, digest, inspection_path)
    return ReplayMiss(None)


def _note_nearest(fixture: str, request: RequestLike, digest: str, inspection_path: str) -> None:
    nearest = explain_miss(fixture, request, digest=digest)
    if nearest is None:
        return
    try:
        record = open_inspection_record(inspection_path)
    except InspectionPathError:
        return  # the actor opened it at acquisition; if it is gone now, so is this line
    try:
        record.append_nearest(digest, nearest)
    except OSError:
        pass  # a full disk must not turn a miss into another error
    finally:
        record.close()
