"""Why a request missed: its nearest recorded request and every JSON path that differs.

Runs in: the caller, only after a miss (a handle's miss branch, ``replay-actor explain``).

Ranking, against the request sidecar (see ``sidecar``):

1. most shared leading messages (``messages[0..k)`` equal, in order): a conversation
   that diverged late is nearer than one that diverged early;
2. then fewest differing JSON paths;
3. then the smallest ``request_hash`` (plain string order), so a tie always names the
   same entry, whatever order the sidecar's lines are in.

Paths read as a JSON path without the ``$``: ``messages[3].content``,
``params.temperature``, ``tools[1]``, ``scope.epoch``; a key that is not an identifier is
quoted (``params["top-k"]``). Objects are compared key by key, arrays index by index, down
to the first place the two differ; a key or element present on one side only is one
difference, its other side absent (``null`` in JSON output).

Speed: the sidecar's requests are canonical (RFC 8785) bytes, so equal values are equal
bytes. Each line is decoded once into raw byte slices per top-level field and per message
(msgspec, in C); messages are compared as bytes, an entry sharing fewer leading messages
than the best so far is dropped with one list comparison, and among the rest one that
cannot win (its differing slices already outnumber the best's paths, or equal them with a
later hash) is never diffed. Only the others are decoded, only where their bytes differ.
A handle's miss keeps the last small sidecar it parsed (``_parsed``), so misses that
follow one another skip the read.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import threading
from collections.abc import Container, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from .._errors import InspectionPathError, ReplayError, ReplayMiss
from .._request import Request, RequestLike, canonical_request
from ..replay.inspection import open_inspection_record
from .sidecar import line_hash, sidecar_path

__all__ = [
    "ABSENT",
    "Difference",
    "Nearest",
    "explain_json",
    "explain_miss",
    "explain_text",
    "find_nearest",
    "miss_error",
    "read_sidecar",
]


class _Absent:
    """The value on the side of a difference where the path does not exist."""

    _instance: _Absent | None = None

    def __new__(cls) -> _Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = _Absent()


@dataclass(frozen=True)
class Difference:
    """One path where the recorded and the requested request differ."""

    path: str
    recorded: Any  # ABSENT when the path exists only in the request
    requested: Any  # ABSENT when the path exists only in the recording

    def as_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "recorded": None if self.recorded is ABSENT else self.recorded,
            "requested": None if self.requested is ABSENT else self.requested,
        }


@dataclass(frozen=True)
class Nearest:
    """The nearest recorded request and how the request differs from it."""

    request_hash: str
    shared_messages: int
    differences: tuple[Difference, ...]

    @property
    def paths(self) -> list[str]:
        return [difference.path for difference in self.differences]


# -- decoding the sidecar ---------------------------------------------------------------------

_LIST_FIELDS: Final = ("messages", "tools")
#: Every field of ``Request``, and ``scope`` (a request's pairing key) even where this
#: version's ``Request`` lacks it, so a sidecar written with scopes is read, not refused.
_ALL_FIELDS: Final = tuple(sorted({*Request.__struct_fields__, "scope"}))


def _split_type() -> Any:
    """A Struct with one raw slice per request field (lists: one per element).

    Built from ``Request``'s own fields, so a field added there is compared here too.
    """
    fields: list[tuple[str, Any, Any]] = []
    for name in _ALL_FIELDS:
        if name in _LIST_FIELDS:
            fields.append((name, list[msgspec.Raw], msgspec.field(default_factory=list)))
        else:
            fields.append((name, msgspec.Raw | msgspec.UnsetType, msgspec.UNSET))
    return msgspec.defstruct("SplitRequest", fields, forbid_unknown_fields=True)


_Split: Final = _split_type()
_decode_split: Final = msgspec.json.Decoder(_Split).decode
_FIELDS: Final = _ALL_FIELDS
_REQUEST_AT: Final = len(b'{"request_hash":"') + 71 + len(b'","request":')
_CLOSE: Final = ord("}")


class _Line(msgspec.Struct):
    """A sidecar line not in the layout the writer uses (edited by hand)."""

    request_hash: str
    request: msgspec.Raw


_decode_line: Final = msgspec.json.Decoder(_Line).decode


def read_sidecar(path: str | os.PathLike[str]) -> Iterator[tuple[str, Any]]:
    """(hash, split request) for each line of a sidecar, the first line of a hash only.

    A torn last line (no newline: a writer crashed mid-append) is ignored. Raises
    ``ReplayError`` naming the path and line for a line that is not a sidecar line,
    ``FileNotFoundError`` when there is no sidecar.
    """
    # Opened without blocking and checked to be a regular file: a FIFO planted at the
    # path must not hang a miss. Read, not mapped: a mapping of a file someone truncates
    # meanwhile faults (SIGBUS), and a diagnostic must never crash its process.
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    with open(fd, "rb", closefd=True) as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ReplayError(f"the request sidecar {os.fspath(path)} is not a regular file")
        data = handle.read()
    # Lines are sliced as views, never copied: a sidecar of 10,000 realistic requests is
    # ~170 MB.
    view = memoryview(data)
    seen: set[str] = set()
    number = 0
    start = 0
    while True:
        end = data.find(b"\n", start)
        if end < 0:
            break  # the rest is empty, or a torn line
        number += 1
        line_start, start = start, end + 1
        digest = line_hash(data[line_start : line_start + _REQUEST_AT])
        split: Any = None
        try:
            if digest is not None and data[end - 1] == _CLOSE:
                if digest in seen:
                    continue
                split = _decode_split(view[line_start + _REQUEST_AT : end - 1])
            elif not data[line_start:end].strip():
                continue
            else:
                parsed = _decode_line(view[line_start:end])
                digest = parsed.request_hash
                if digest in seen:
                    continue
                split = _decode_split(parsed.request)
        except msgspec.DecodeError:
            split = None
        if split is None or digest is None:
            raise ReplayError(f"{os.fspath(path)}: line {number} is not a request sidecar line")
        seen.add(digest)
        yield digest, split


# -- comparing ----------------------------------------------------------------------------------

_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _key_path(path: str, key: str) -> str:
    if _IDENTIFIER.match(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def _diff(path: str, recorded: Any, requested: Any, out: list[Difference]) -> None:
    if type(recorded) is dict and type(requested) is dict:
        for key in sorted(recorded.keys() | requested.keys()):
            sub = _key_path(path, key)
            if key not in recorded:
                out.append(Difference(sub, ABSENT, requested[key]))
            elif key not in requested:
                out.append(Difference(sub, recorded[key], ABSENT))
            else:
                _diff(sub, recorded[key], requested[key], out)
    elif type(recorded) is list and type(requested) is list:
        _diff_items(path, recorded, requested, out, load=lambda value: value)
    elif type(recorded) is not type(requested) or recorded != requested:
        out.append(Difference(path, recorded, requested))


def _diff_items(
    path: str,
    recorded: list[Any],
    requested: list[Any],
    out: list[Difference],
    *,
    load: Any,
    skip: int = 0,
) -> None:
    """Index by index from ``skip`` (known equal before it); ``load`` turns an element
    into a value (decodes a raw slice)."""
    for index in range(skip, max(len(recorded), len(requested))):
        sub = f"{path}[{index}]"
        if index >= len(recorded):
            out.append(Difference(sub, ABSENT, load(requested[index])))
        elif index >= len(requested):
            out.append(Difference(sub, load(recorded[index]), ABSENT))
        elif recorded[index] != requested[index]:
            _diff(sub, load(recorded[index]), load(requested[index]), out)


def _load(raw: Any) -> Any:
    return msgspec.json.decode(raw)


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
    for name in _FIELDS:
        mine = getattr(recorded, name)
        theirs = getattr(requested, name)
        if name == "messages":
            _diff_items(name, mine, theirs, out, load=_load, skip=shared)
        elif mine == theirs:
            continue
        elif memo is None:
            _diff_field(name, mine, theirs, out)
        else:
            key = (name, b"\0".join(mine) if name in _LIST_FIELDS else bytes(mine or b""))
            found = memo.get(key)
            if found is None:
                found = memo[key] = []
                _diff_field(name, mine, theirs, found)
            out.extend(found)
    return out


def _diff_field(name: str, mine: Any, theirs: Any, out: list[Difference]) -> None:
    if name in _LIST_FIELDS:
        _diff_items(name, mine, theirs, out, load=_load)
    elif mine is msgspec.UNSET:
        out.append(Difference(name, ABSENT, _load(theirs)))
    elif theirs is msgspec.UNSET:
        out.append(Difference(name, _load(mine), ABSENT))
    else:
        _diff(name, _load(mine), _load(theirs), out)


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
    for name in _FIELDS:
        mine = getattr(recorded, name)
        theirs = getattr(requested, name)
        if mine == theirs:  # lists too: compared element by element in C
            continue
        if name in _LIST_FIELDS:
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
    return "sha256:" + hashlib.sha256(canonical).hexdigest(), _decode_split(canonical)


def find_nearest(
    sidecar: str | os.PathLike[str],
    request: RequestLike,
    *,
    known: Container[str] | None = None,
) -> Nearest | None:
    """The nearest recorded request in ``sidecar`` (see the module's ranking), or None
    when the sidecar holds no candidate. ``known``: consider only these hashes (the
    fixture's entries), so a line whose entry was removed is never named.

    Raises ``RequestError`` for an invalid request, ``FileNotFoundError`` without a
    sidecar, ``ReplayError`` for a corrupt one.
    """
    return _rank(read_sidecar(sidecar), request, known)


def _rank(
    entries: Iterable[tuple[str, Any]], request: RequestLike, known: Container[str] | None
) -> Nearest | None:
    _, wanted = split_request(request)
    messages = wanted.messages
    best_shared = 0
    prefix: list[Any] = []
    candidates: list[tuple[str, Any]] = []
    for digest, split in entries:
        if known is not None and digest not in known:
            continue
        # Below the best so far is out at once: one list comparison, in C.
        if best_shared and split.messages[:best_shared] != prefix:
            continue
        shared = _shared_messages(split.messages, messages, best_shared)
        if shared > best_shared:
            best_shared = shared
            prefix = messages[:shared]
            candidates = [(digest, split)]
        else:
            candidates.append((digest, split))
    best: Nearest | None = None
    memo: dict[tuple[str, bytes], list[Difference]] = {}
    for digest, split in candidates:
        if best is not None:
            # Skip one that cannot win: more paths at least, or as many and a later hash.
            floor = _at_least(split, wanted, best_shared)
            most = len(best.differences)
            if floor > most or (floor == most and digest > best.request_hash):
                continue
        found = differences(split, wanted, best_shared, memo)
        if (
            best is None
            or len(found) < len(best.differences)
            or (len(found) == len(best.differences) and digest < best.request_hash)
        ):
            best = Nearest(digest, best_shared, tuple(found))
    return best


#: The last sidecar a miss parsed, kept while the file stays the same, so a run whose
#: calls miss one after another reads it once, not once per miss. Its entries are views
#: into the file's bytes, which it keeps alive: only a sidecar up to this size is kept.
_KEEP_BYTES: Final = 32 << 20
_last: tuple[tuple[int, int, int, int], list[tuple[str, Any]]] | None = None
_last_lock: Final = threading.Lock()


def _parsed(path: str) -> Iterable[tuple[str, Any]]:
    global _last
    st = os.stat(path)
    if st.st_size > _KEEP_BYTES:
        return read_sidecar(path)
    identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    with _last_lock:
        if _last is None or _last[0] != identity:
            _last = None  # let the old bytes go before reading the new ones
            _last = (identity, list(read_sidecar(path)))
        return _last[1]


def explain_miss(fixture: str | os.PathLike[str], request: RequestLike) -> dict[str, Any] | None:
    """``{"request_hash", "paths"}`` of the nearest recorded request, for a miss.

    None when the fixture has no sidecar or the sidecar holds no candidate. Never
    raises for an unusable sidecar (unreadable, corrupt): this runs while a miss is
    being reported, and a diagnostic must not replace the failure it explains.
    """
    path = sidecar_path(fixture)
    try:
        nearest = _rank(_parsed(path), request, None)
    except (OSError, ReplayError, ValueError, msgspec.MsgspecError):
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
    inspection record, if the acquisition has one. Either way the work is done here, in
    frames that are gone before the exception is raised, so no traceback holds it.
    """
    if not private:
        return ReplayMiss(digest, explain_miss(fixture, request) if fixture else None)
    if fixture and inspection_path is not None:
        _note_nearest(fixture, request, digest, inspection_path)
    return ReplayMiss(None)


def _note_nearest(fixture: str, request: RequestLike, digest: str, inspection_path: str) -> None:
    nearest = explain_miss(fixture, request)
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


# -- presenting ---------------------------------------------------------------------------------


def explain_json(hit: bool, digest: str, nearest: Nearest | None) -> dict[str, Any]:
    """``explain --json``'s document."""
    return {
        "hit": hit,
        "request_hash": digest,
        "nearest": None
        if nearest is None
        else {
            "request_hash": nearest.request_hash,
            "differences": [difference.as_json() for difference in nearest.differences],
        },
    }


_SHOWN: Final = 72


def _first_difference(a: str, b: str) -> int:
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return min(len(a), len(b))


def _show(value: Any, other: Any) -> str:
    """A value as compact JSON, shortened around where it differs from ``other``."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if len(text) <= _SHOWN:
        return text
    if isinstance(value, str) and isinstance(other, str):
        at = _first_difference(value, other)
        start = max(0, at - 24)
        piece = json.dumps(value[start : start + 48], ensure_ascii=False)[1:-1]
        head = "…" if start else ""
        tail = "…" if start + 48 < len(value) else ""
        return f'"{head}{piece}{tail}" ({len(value)} chars)'
    return text[: _SHOWN - 1] + "…"


def explain_text(
    fixture: str, hit: bool, digest: str, requested_messages: int, nearest: Nearest | None
) -> str:
    """``explain``'s human-readable report."""
    if hit:
        return f"hit: {digest} has an entry in {fixture}\n"
    lines = [f"miss: {digest} has no entry in {fixture}"]
    if nearest is None:
        lines.append("nearest recorded request: none (the sidecar holds none of its entries)")
        return "\n".join(lines) + "\n"
    count = len(nearest.differences)
    lines.append(f"nearest recorded request: {nearest.request_hash}")
    lines.append(
        f"  shares {nearest.shared_messages} of {requested_messages} leading messages; "
        f"{count} {'path differs' if count == 1 else 'paths differ'} (recorded → requested):"
    )
    for difference in nearest.differences:
        if difference.recorded is ABSENT:
            shown = f"only in the request: {_show(difference.requested, None)}"
        elif difference.requested is ABSENT:
            shown = f"only in the recording: {_show(difference.recorded, None)}"
        else:
            before = _show(difference.recorded, difference.requested)
            after = _show(difference.requested, difference.recorded)
            shown = f"{before} → {after}"
        lines.append(f"  {difference.path}: {shown}")
    if not nearest.differences:
        lines.append("  (none: the sidecar holds this very request; its fixture entry is gone)")
    return "\n".join(lines) + "\n"
