"""The nearest recorded request to one that missed, and every JSON path where they differ.

Runs in: the caller, only after a miss (through ``explain``, or ``replay-actor explain``).

Ranking, over the request sidecar's lines (``files/sidecar.py``):

1. most shared leading messages (``messages[0..k)`` equal, in order): a conversation
   that diverged late is nearer than one that diverged early;
2. then fewest differing JSON paths;
3. then the smallest whole-request distance (``request_distance``): over each message,
   tool and field whose canonical bytes differ, the bytes that differ once their common
   beginning and end are set aside. Among prompts that differ at one path each (every
   row of an eval asks its own question), the one that differs least is the same
   question;
4. then the smallest canonical bytes of the recorded request, so a tie always names
   the same entry, whatever order the sidecar's lines are in.

Paths read as a JSON path without the ``$``: ``messages[3].content``,
``params.temperature``, ``tools[1]``, ``scope.epoch``; a key that is not an identifier is
quoted (``params["top-k"]``). Objects are compared key by key, arrays index by index, down
to the first place the two differ; a key or element present on one side only is one
difference, its other side absent (``null`` in JSON output).

Depth. The walk is iterative, so no nesting turns a miss into a ``RecursionError``. Paths
are followed ``MAX_PATH_DEPTH`` levels down; two values that differ below that are one
difference at that depth. A value nested deeper than ``MAX_VALUE_DEPTH`` is not carried
at all: it is ``TOO_DEEP`` (shown as such, ``null`` with ``"truncated": true`` in JSON).

Speed and memory: the ranking is one pass, keeping only the best so far. The sidecar's
requests are canonical (RFC 8785) bytes, so equal values are equal bytes: messages are
compared as raw slices, a line sharing fewer leading messages than the best is dropped
with one list comparison, and one that cannot win (its differing slices already outnumber
the best's paths, or equal them and lose on distance, itself measured on raw slices) is
never diffed. Only the others are decoded, only where their bytes differ.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Container, Iterable
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from .._request import RequestLike, canonical_request
from ..files.sidecar import LIST_FIELDS, REQUEST_FIELDS, decode_split, read_sidecar

__all__ = [
    "ABSENT",
    "MAX_PATH_DEPTH",
    "MAX_VALUE_DEPTH",
    "TOO_DEEP",
    "Difference",
    "Nearest",
    "canonical_bytes",
    "canonical_less",
    "differences",
    "find_nearest",
    "rank",
    "request_distance",
    "slice_distance",
    "split_request",
]

#: How deep a differing path is followed; below, the difference is reported here.
MAX_PATH_DEPTH: Final = 64
#: The deepest value a ``Difference`` carries (deeper: ``TOO_DEEP``), so printing one as
#: JSON never recurses far.
MAX_VALUE_DEPTH: Final = 32
#: How many whole-field differences the ranking remembers (each field's recorded bytes).
_MEMO_ENTRIES: Final = 256


class _Marker:
    """A value that stands for something that is not a JSON value."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


#: The value on the side of a difference where the path does not exist.
ABSENT: Final = _Marker("ABSENT")
#: A value nested deeper than ``MAX_VALUE_DEPTH``: not carried, not shown.
TOO_DEEP: Final = _Marker("TOO_DEEP")


@dataclass(frozen=True)
class Difference:
    """One path where the recorded and the requested request differ."""

    path: str
    recorded: Any  # ABSENT when the path exists only in the request; or TOO_DEEP
    requested: Any  # ABSENT when the path exists only in the recording; or TOO_DEEP

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "recorded": _json_value(self.recorded),
            "requested": _json_value(self.requested),
        }
        if self.recorded is TOO_DEEP or self.requested is TOO_DEEP:
            out["truncated"] = True
        return out


def _json_value(value: Any) -> Any:
    return None if value is ABSENT or value is TOO_DEEP else value


@dataclass(frozen=True)
class Nearest:
    """The nearest recorded request and how the request differs from it."""

    request_hash: str
    shared_messages: int
    differences: tuple[Difference, ...]

    @property
    def paths(self) -> list[str]:
        return [difference.path for difference in self.differences]


# -- one value against another ---------------------------------------------------------------

_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _key_path(path: str, key: str) -> str:
    if _IDENTIFIER.match(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests more than ``limit`` containers deep (iteratively)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if type(item) is dict:
            children: Iterable[Any] = item.values()
        elif type(item) is list:
            children = item
        else:
            continue
        if depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _bounded(value: Any) -> Any:
    if value is ABSENT or value is TOO_DEEP:
        return value
    return TOO_DEEP if _deeper_than(value, MAX_VALUE_DEPTH) else value


def _difference(path: str, recorded: Any, requested: Any) -> Difference:
    return Difference(path, _bounded(recorded), _bounded(requested))


def _equal(a: Any, b: Any) -> bool:
    """JSON equality, iteratively (``==`` on nested lists recurses); ``True != 1``."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if type(x) is not type(y):
            return False
        if type(x) is dict:
            if x.keys() != y.keys():
                return False
            stack.extend((x[key], y[key]) for key in x)
        elif type(x) is list:
            if len(x) != len(y):
                return False
            stack.extend(zip(x, y, strict=True))
        elif x != y:
            return False
    return True


def _children(path: str, a: Any, b: Any) -> list[tuple[str, Any, Any]] | None:
    """The pairs below two containers of one kind, in output order; None otherwise."""
    if type(a) is dict and type(b) is dict:
        return [
            (_key_path(path, key), a.get(key, ABSENT), b.get(key, ABSENT))
            for key in sorted(a.keys() | b.keys())
        ]
    if type(a) is list and type(b) is list:
        return [
            (
                f"{path}[{index}]",
                a[index] if index < len(a) else ABSENT,
                b[index] if index < len(b) else ABSENT,
            )
            for index in range(max(len(a), len(b)))
        ]
    return None


def _diff(path: str, recorded: Any, requested: Any, out: list[Difference]) -> None:
    """Append every differing path below ``path``, depth first in key/index order."""
    stack = [(path, recorded, requested, 0)]
    while stack:
        here, a, b, depth = stack.pop()
        if a is ABSENT or b is ABSENT or a is TOO_DEEP or b is TOO_DEEP:
            out.append(_difference(here, a, b))
            continue
        below = _children(here, a, b)
        if below is None:
            if type(a) is not type(b) or a != b:
                out.append(_difference(here, a, b))
        elif depth >= MAX_PATH_DEPTH:
            if not _equal(a, b):
                out.append(_difference(here, a, b))
        else:
            stack.extend((sub, x, y, depth + 1) for sub, x, y in reversed(below))


def _load(raw: Any) -> Any:
    """A raw slice's value; ``TOO_DEEP`` when it nests too deeply to decode."""
    try:
        return msgspec.json.decode(raw)
    except RecursionError:
        return TOO_DEEP


def _diff_items(
    path: str, recorded: list[Any], requested: list[Any], out: list[Difference], skip: int = 0
) -> None:
    """Raw slices index by index from ``skip`` (known equal before it)."""
    for index in range(skip, max(len(recorded), len(requested))):
        sub = f"{path}[{index}]"
        if index >= len(recorded):
            out.append(_difference(sub, ABSENT, _load(requested[index])))
        elif index >= len(requested):
            out.append(_difference(sub, _load(recorded[index]), ABSENT))
        elif recorded[index] != requested[index]:
            _diff(sub, _load(recorded[index]), _load(requested[index]), out)


def _diff_field(name: str, mine: Any, theirs: Any, out: list[Difference]) -> None:
    if name in LIST_FIELDS:
        _diff_items(name, mine, theirs, out)
    else:
        recorded = ABSENT if mine is msgspec.UNSET else _load(mine)
        requested = ABSENT if theirs is msgspec.UNSET else _load(theirs)
        _diff(name, recorded, requested, out)


def differences(
    recorded: Any,
    requested: Any,
    shared: int = 0,
    memo: dict[tuple[str, bytes], list[Difference]] | None = None,
) -> list[Difference]:
    """Every differing path between two split requests, in canonical key order.

    ``shared``: how many leading messages are already known to be equal. ``memo``: the
    differences of a whole field by its recorded bytes, for comparing one request with
    many recorded ones (those tend to share their parameters and tools).
    """
    out: list[Difference] = []
    for name in REQUEST_FIELDS:
        mine = getattr(recorded, name)
        theirs = getattr(requested, name)
        if name == "messages":
            _diff_items(name, mine, theirs, out, skip=shared)
        elif mine == theirs:
            continue
        elif memo is None:
            _diff_field(name, mine, theirs, out)
        else:
            key = (name, b"\0".join(mine) if name in LIST_FIELDS else bytes(mine or b""))
            found = memo.get(key)
            if found is None:
                if len(memo) >= _MEMO_ENTRIES:
                    memo.clear()
                found = memo[key] = []
                _diff_field(name, mine, theirs, found)
            out.extend(found)
    return out


# -- distance -----------------------------------------------------------------------------


def _common_prefix(a: bytes, b: bytes, limit: int) -> int:
    """How many leading bytes ``a`` and ``b`` share, at most ``limit`` (a binary search
    over slice comparisons, each a ``memcmp``: a megabyte takes a few milliseconds)."""
    low, high = 0, limit
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _common_suffix(a: bytes, b: bytes, limit: int) -> int:
    """How many trailing bytes ``a`` and ``b`` share, at most ``limit``."""
    low, high = 0, limit
    while low < high:
        middle = (low + high + 1) // 2
        if a[len(a) - middle :] == b[len(b) - middle :]:
            low = middle
        else:
            high = middle - 1
    return low


def slice_distance(a: Any, b: Any) -> int:
    """The bytes that differ between two raw slices once their common beginning and end
    are set aside (0 for equal slices; the whole of one when the other is absent:
    ``None`` or ``msgspec.UNSET``)."""
    if a is None or a is msgspec.UNSET:
        return 0 if b is None or b is msgspec.UNSET else len(b)
    if b is None or b is msgspec.UNSET:
        return len(a)
    x, y = bytes(a), bytes(b)
    if x == y:
        return 0
    shortest = min(len(x), len(y))
    head = _common_prefix(x, y, shortest)
    tail = _common_suffix(x, y, shortest - head)
    return len(x) + len(y) - 2 * (head + tail)


def _field_distance(name: str, mine: Any, theirs: Any, start: int = 0) -> int:
    if mine == theirs:
        return 0
    if name not in LIST_FIELDS:
        return slice_distance(mine, theirs)
    total = 0
    for index in range(start, max(len(mine), len(theirs))):
        a = mine[index] if index < len(mine) else None
        b = theirs[index] if index < len(theirs) else None
        if a is None or b is None or a != b:
            total += slice_distance(a, b)
    return total


def request_distance(recorded: Any, requested: Any, shared: int = 0) -> int:
    """The whole-request distance of two split requests (the module's ranking, step 3):
    over each message, tool and field whose bytes differ, the bytes that differ once
    their common beginning and end are set aside. ``shared``: leading messages known to
    be equal."""
    total = 0
    for name in REQUEST_FIELDS:
        start = shared if name == "messages" else 0
        total += _field_distance(name, getattr(recorded, name), getattr(requested, name), start)
    return total


def canonical_bytes(split: Any) -> bytes:
    """A split request's RFC 8785 bytes, rebuilt from its slices (its field names are
    ASCII and sorted, as the canonical form has them; defaults are absent)."""
    parts: list[bytes] = []
    for name in REQUEST_FIELDS:
        value = getattr(split, name)
        if name in LIST_FIELDS:
            if value:
                parts.append(b'"%s":[%s]' % (name.encode(), b",".join(bytes(v) for v in value)))
        elif value is not msgspec.UNSET:
            parts.append(b'"%s":%s' % (name.encode(), bytes(value)))
    return b"{" + b",".join(parts) + b"}"


def _first_differing_slices(a: Any, b: Any) -> tuple[bytes, bytes] | None:
    """The first slices, in canonical order, where two split requests differ, when all
    that comes before them is the same in both (so their canonical bytes agree up to
    there); None when the requests are equal or differ first in what is present."""
    for name in REQUEST_FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        if x == y:
            continue
        if name in LIST_FIELDS:
            if not x or not y:
                return None
            for xi, yi in zip(x, y, strict=False):
                if xi != yi:
                    return bytes(xi), bytes(yi)
            return None  # one list is the other's beginning
        if x is msgspec.UNSET or y is msgspec.UNSET:
            return None
        return bytes(x), bytes(y)
    return None


def canonical_less(a: Any, b: Any) -> bool:
    """``canonical_bytes(a) < canonical_bytes(b)``, deciding from the first differing
    slices where it can (a tie among thousands of recorded requests must not rebuild
    each one's bytes)."""
    found = _first_differing_slices(a, b)
    if found is not None:
        x, y = found
        shortest = min(len(x), len(y))
        if x[:shortest] != y[:shortest]:
            return x < y
    return canonical_bytes(a) < canonical_bytes(b)


# -- ranking -----------------------------------------------------------------------------------


def _shared_messages(recorded: list[Any], requested: list[Any], start: int = 0) -> int:
    """How many leading messages are equal, counting from ``start`` (known equal)."""
    shared = start
    for mine, theirs in zip(recorded[start:], requested[start:], strict=False):
        if mine != theirs:
            break
        shared += 1
    return shared


def _at_least(recorded: Any, requested: Any, shared: int) -> int:
    """A lower bound of ``len(differences(...))`` from raw bytes alone: each message,
    tool or field whose bytes differ holds at least one differing path."""
    count = 0
    for name in REQUEST_FIELDS:
        mine = getattr(recorded, name)
        theirs = getattr(requested, name)
        if mine == theirs:  # lists too: compared element by element in C
            continue
        if name in LIST_FIELDS:
            start = shared if name == "messages" else 0
            count += max(len(mine), len(theirs)) - start
            for a, b in zip(mine[start:], theirs[start:], strict=False):
                count -= a == b
        else:
            count += 1
    return count


def split_request(request: RequestLike) -> tuple[str, Any]:
    """(hash, split request) of a request; ``RequestError`` if it is invalid."""
    canonical = canonical_request(request)
    return "sha256:" + hashlib.sha256(canonical).hexdigest(), decode_split(canonical)


class _Best:
    """The nearest so far and its ranking key."""

    def __init__(self, nearest: Nearest, split: Any, distance: int) -> None:
        self.nearest = nearest
        self.split = split
        self.distance = distance

    @property
    def paths(self) -> int:
        return len(self.nearest.differences)

    def loses_to(self, paths: int, distance: int, split: Any) -> bool:
        """Whether a request with these paths and distance ranks before the best."""
        if paths != self.paths:
            return paths < self.paths
        if distance != self.distance:
            return distance < self.distance
        return canonical_less(split, self.split)


def rank(
    entries: Iterable[tuple[str, Any]], request: RequestLike, known: Container[str] | None
) -> Nearest | None:
    """The nearest of ``entries`` ((hash, split request), as ``read_sidecar`` yields them)
    to ``request``, or None; ``known``: consider only these hashes. One pass, holding
    the best so far only."""
    _, wanted = split_request(request)
    messages = wanted.messages
    best: _Best | None = None
    best_shared = 0
    prefix: list[Any] = []
    memo: dict[tuple[str, bytes], list[Difference]] = {}
    for digest, split in entries:
        if known is not None and digest not in known:
            continue
        # Below the best so far is out at once: one list comparison, in C.
        if best_shared and split.messages[:best_shared] != prefix:
            continue
        shared = _shared_messages(split.messages, messages, best_shared)
        if shared > best_shared or best is None:
            best_shared = shared
            prefix = messages[:shared]
            found = differences(split, wanted, shared, memo)
            distance = request_distance(split, wanted, shared)
            best = _Best(Nearest(digest, shared, tuple(found)), split, distance)
            continue
        # As many shared messages: skip one that cannot win, else compare in full. The
        # floor bounds the paths from below; at the best's count only a smaller distance
        # (or, at an equal one, smaller bytes) can still win.
        floor = _at_least(split, wanted, shared)
        if floor > best.paths:
            continue
        distance = request_distance(split, wanted, shared)
        if floor == best.paths and not best.loses_to(floor, distance, split):
            continue
        found = differences(split, wanted, shared, memo)
        if best.loses_to(len(found), distance, split):
            best = _Best(Nearest(digest, shared, tuple(found)), split, distance)
    return None if best is None else best.nearest


def find_nearest(
    sidecar: str | os.PathLike[str],
    request: RequestLike,
    *,
    known: Container[str] | None = None,
    max_bytes: int | None = None,
) -> Nearest | None:
    """The nearest recorded request in ``sidecar`` (see the module's ranking), or None
    when the sidecar holds no candidate. ``known``: consider only these hashes (the
    fixture's entries), so a line whose entry was removed is never named. ``max_bytes``:
    read no more of the sidecar than this.

    Raises ``RequestError`` for an invalid request, ``FileNotFoundError`` without a
    sidecar, ``ReplayError`` for a corrupt one.
    """
    return rank(read_sidecar(sidecar, max_bytes=max_bytes), request, known)
