"""Fixture files: reading, validating and indexing them (SPEC §1).

A fixture is accepted whole or rejected whole. A rejection is a ``FixtureError`` with a
reason code and a line number, nothing else: it is raised outside every ``except`` block
so no parser exception rides along in ``__context__``.

The loader has two paths per line. The fast path decodes the line with msgspec straight
into a typed entry, re-encodes it sorted (which *is* its RFC 8785 form when the line has
no float and no key outside the BMP) and proves the line had no duplicate key by length:
msgspec's output is never longer than its input for any token (no float is involved,
those are kept as their source text), so equal lengths mean no pair was dropped. Cheap
byte checks cover what msgspec does not (integers beyond 2^53, nesting depth). Anything
unusual — whitespace between tokens, escapes msgspec would shorten, a float, a refusal —
sends the line to ``_jsonscan``, the precise checker, which names the first broken rule.

The result is a ``FixtureSet``: request hash -> the response's canonical bytes (or the
tuple of a sequence's), ready to be sent as they are.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Final

import msgspec

from ._canonical import canonical_json, jcs_float
from ._ceilings import DEFAULT_CEILINGS, MAX_SEQUENCE_LENGTH, Ceilings
from ._errors import FixtureError, RequestError
from ._jsonscan import Rejected, scan_line

__all__ = [
    "FORMAT_VERSION",
    "FixtureSet",
    "Rejection",
    "entry_line",
    "iter_rejections",
    "load_fixture",
    "read_fixture_bytes",
]

FORMAT_VERSION: Final = 1
HASH_PATTERN: Final = r"^sha256:[0-9a-f]{64}$"
_HASH_RE: Final = re.compile(HASH_PATTERN)
_ENTRY_KEYS: Final = frozenset({"schema_version", "request_hash", "response", "responses"})

#: One response's canonical bytes, or a sequence's, in order.
Stored = bytes | tuple[bytes, ...]
#: (reason, line) pairs, as ``validate`` reports them.
Rejection = tuple[str, int | None]

_HashStr = Annotated[str, msgspec.Meta(pattern=HASH_PATTERN)]
_Responses = Annotated[
    list[dict[str, Any]], msgspec.Meta(min_length=1, max_length=MAX_SEQUENCE_LENGTH)
]


class _Entry(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """The typed shape of a line, for the fast path only (any refusal goes slow)."""

    schema_version: Any
    request_hash: _HashStr
    response: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET
    responses: _Responses | msgspec.UnsetType = msgspec.UNSET


# Byte classes for the whole-file pre-scan: digits -> "0" (a run of 16 may be an
# integer beyond 2**53), 4-byte UTF-8 leads -> "4" (a key outside the BMP may sort
# differently in UTF-16), opening brackets -> "[" (their count bounds the depth).
_CLASS_TABLE: Final = bytes(
    0x30
    if 0x30 <= b <= 0x39
    else 0x34
    if 0xF0 <= b <= 0xF4
    else 0x5B
    if b in (0x5B, 0x7B)
    else 0x0A
    if b == 0x0A
    else 0x2E
    for b in range(256)
)
_DIGIT_RUN: Final = b"0" * 16

# The fixed parts of an entry's canonical encoding (keys sorted as JCS sorts them).
_PREFIX: Final = b'{"request_hash":"'
_SINGLE: Final = b'","response":'
_SEQUENCE: Final = b'","responses":'
_SUFFIX: Final = b',"schema_version":1}'
_SINGLE_START: Final = len(_PREFIX) + 71 + len(_SINGLE)
_SUFFIX_LEN: Final = len(_SUFFIX)

_encode_sorted: Final[Callable[[Any], bytes]] = msgspec.json.Encoder(order="sorted").encode


class FixtureSet:
    """A validated fixture: the table of responses and its safe summary.

    Hold it to look responses up in-process (the CLI's ``lookup`` does); hand the path,
    not this object, to ``acquire`` — the actor loads its own copy.
    """

    __slots__ = ("_table", "ceilings", "fixture_set_hash", "responses", "sequence_entries")

    def __init__(self, table: dict[str, Stored], ceilings: Ceilings) -> None:
        self._table = table
        self.ceilings = ceilings
        digest = hashlib.sha256(b"[")
        sequences = 0
        responses = 0
        first = True
        for request_hash in sorted(table):
            stored = table[request_hash]
            if not first:
                digest.update(b",")
            first = False
            key = request_hash.encode("ascii")
            if isinstance(stored, bytes):
                responses += 1
                digest.update(_PREFIX + key + _SINGLE + stored + _SUFFIX)
            else:
                sequences += 1
                responses += len(stored)
                digest.update(_PREFIX + key + _SEQUENCE + b"[" + b",".join(stored) + b"]" + _SUFFIX)
        digest.update(b"]")
        self.fixture_set_hash = "sha256:" + digest.hexdigest()
        self.sequence_entries = sequences
        self.responses = responses

    def __len__(self) -> int:
        return len(self._table)

    def __contains__(self, request_hash: object) -> bool:
        return request_hash in self._table

    def __repr__(self) -> str:
        return f"<FixtureSet {len(self._table)} entries {self.fixture_set_hash}>"

    def snapshot(self) -> dict[str, Any]:
        """The safe snapshot: counts and the set hash; no payload, hash or path."""
        return {
            "format_version": FORMAT_VERSION,
            "fixture_set_hash": self.fixture_set_hash,
            "entries": len(self._table),
            "single_entries": len(self._table) - self.sequence_entries,
            "sequence_entries": self.sequence_entries,
            "responses": self.responses,
            "ceilings": self.ceilings.as_dict(),
        }

    def stored(self, request_hash: str) -> Stored | None:
        """The canonical response bytes (or sequence) for a hash, or None."""
        return self._table.get(request_hash)

    def request_hashes(self) -> list[str]:
        """Every request hash in the fixture, sorted (owner-side tooling only)."""
        return sorted(self._table)

    def responses_for(self, request_hash: str) -> list[dict[str, Any]] | None:
        """Fresh decoded responses for a hash (one for a single entry), or None."""
        stored = self._table.get(request_hash)
        if stored is None:
            return None
        items = (stored,) if isinstance(stored, bytes) else stored
        return [msgspec.json.decode(item) for item in items]


# -- reading -----------------------------------------------------------------------------


def read_fixture_bytes(path: str | os.PathLike[str], max_file_bytes: int) -> bytes:
    """Read a fixture file, at most ``max_file_bytes + 1`` bytes, refusing non-files.

    The type is checked before opening (a FIFO would block ``open``) and again on the
    open descriptor (the path may have been swapped in between).
    """
    reason = _read_checks(path)
    if reason is not None:
        raise FixtureError(reason)
    data: bytes | None = None
    reason = "file_unreadable"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        reason = "file_missing"
    except OSError:
        pass
    else:
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                reason = "not_regular_file"
            else:
                data = _read_bounded(fd, max_file_bytes + 1)
                reason = "file_too_large" if len(data) > max_file_bytes else ""
        except OSError:
            data = None
        finally:
            os.close(fd)
    if data is None or reason:
        raise FixtureError(reason or "file_unreadable")
    return data


def _read_checks(path: str | os.PathLike[str]) -> str | None:
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return "file_missing"
    except (OSError, ValueError):
        return "file_unreadable"
    if not stat.S_ISREG(st.st_mode):
        return "not_regular_file"
    return None


def _read_bounded(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    remaining = limit
    while remaining > 0:
        chunk = os.read(fd, min(remaining, 16 * 1024 * 1024))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


# -- validating ---------------------------------------------------------------------------


class _Parser:
    """Walks a fixture's bytes line by line; reports rejections to ``on_reject``.

    ``on_reject(reason, line)`` returns True to go on (validate every line) or False to
    stop at the first rejection (load).
    """

    def __init__(self, ceilings: Ceilings) -> None:
        self.ceilings = ceilings
        self.table: dict[str, Stored] = {}
        self.seen: set[str] = set()
        self.entries = 0
        self._floats: list[str] = []
        floats = self._floats

        def keep_float(text: str) -> msgspec.Raw:
            floats.append(text)
            return msgspec.Raw(text.encode("ascii"))

        self._decode = msgspec.json.Decoder(_Entry, float_hook=keep_float).decode
        self._decode_jcs = msgspec.json.Decoder(_Entry, float_hook=_jcs_raw).decode

    def run(self, data: bytes, on_reject: Callable[[str, int], bool]) -> bool:
        """Check every line; return True if the whole fixture is valid."""
        ceilings = self.ceilings
        max_line = ceilings.max_line_bytes
        max_depth = ceilings.max_depth
        classes = data.translate(_CLASS_TABLE)
        valid = True
        for number, start, end in _lines(data):
            if end - start > max_line:
                reason: str | None = "line_too_long"
            else:
                line = data[start:end]
                if line[:1] == b"{" and line[-1:] == b"}":
                    fast = (
                        classes.count(b"[", start, end) <= max_depth
                        and classes.find(_DIGIT_RUN, start, end) == -1
                        and classes.find(b"4", start, end) == -1
                    )
                elif not line.strip(b" \t"):
                    continue  # a blank line: skipped, but counted
                else:
                    fast = False
                reason = self._line(line, fast)
            if reason is not None:
                valid = False
                if not on_reject(reason, number):
                    return False
        return valid

    def _line(self, line: bytes, fast: bool) -> str | None:
        """Validate and store one non-blank line; return the reason it is rejected."""
        self.entries += 1
        if fast:
            floats = self._floats
            floats.clear()
            try:
                entry = self._decode(line)
            except (msgspec.DecodeError, RecursionError):
                entry = None
            if entry is not None:
                canon = _encode_sorted(entry)
                # Equal lengths prove no key was dropped as a duplicate (module doc).
                if len(canon) == len(line) and type(entry.schema_version) is int:
                    if floats:
                        # Floats were kept as source text for the length proof; now
                        # decode again with each float in its RFC 8785 form.
                        entry = self._decode_jcs(line)
                        canon = _encode_sorted(entry)
                    return self._store_fast(entry, canon, line)
        return self._line_slow(line)

    def _store_fast(self, entry: _Entry, canon: bytes, line: bytes) -> str | None:
        ceilings = self.ceilings
        if entry.schema_version != 1:
            return self._line_slow(line)
        response = entry.response
        responses = entry.responses
        if response is not msgspec.UNSET:
            if responses is not msgspec.UNSET:
                return self._finish(entry.request_hash, "conflicting_response", None)
            if len(canon) - _SINGLE_START - _SUFFIX_LEN > ceilings.max_response_bytes:
                return self._finish(entry.request_hash, "response_too_large", None)
            stored: Stored = canon[_SINGLE_START:-_SUFFIX_LEN]
        elif responses is not msgspec.UNSET:
            if len(responses) > ceilings.max_sequence_length:
                return self._finish(entry.request_hash, "too_many_responses", None)
            items = tuple(map(_encode_sorted, responses))
            if max(map(len, items)) > ceilings.max_response_bytes:
                return self._finish(entry.request_hash, "response_too_large", None)
            stored = items
        else:
            return self._finish(entry.request_hash, "missing_response", None)
        return self._finish(entry.request_hash, None, stored)

    def _line_slow(self, line: bytes) -> str | None:
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            return "invalid_utf8"
        value = scan_line(text, self.ceilings.max_depth)
        if isinstance(value, Rejected):
            return str(value)
        reason, request_hash, stored = _check_entry(value, self.ceilings)
        if reason is not None and request_hash is None:
            return reason
        assert request_hash is not None
        return self._finish(request_hash, reason, stored)

    def _finish(self, request_hash: str, reason: str | None, stored: Stored | None) -> str | None:
        """Rules that involve other lines: duplicates and the entry count."""
        duplicate = request_hash in self.seen
        self.seen.add(request_hash)
        if reason is not None:
            return reason
        if duplicate:
            return "duplicate_request_hash"
        if self.entries > self.ceilings.max_entries:
            return "too_many_entries"
        assert stored is not None
        self.table[request_hash] = stored
        return None


def _jcs_raw(text: str) -> msgspec.Raw:
    return msgspec.Raw(jcs_float(float(text)))


def _check_entry(
    value: dict[str, Any], ceilings: Ceilings
) -> tuple[str | None, str | None, Stored | None]:
    """Entry-level rules on a parsed object, in priority order.

    Returns (reason, request_hash, stored): the hash is given whenever it is valid, so
    that duplicate detection sees it even on a rejected line.
    """
    for key in value:
        if key not in _ENTRY_KEYS:
            return "unknown_key", None, None
    if "schema_version" not in value:
        return "missing_schema_version", None, None
    version = value["schema_version"]
    if type(version) is not int or version != 1:
        return "unsupported_schema_version", None, None
    if "request_hash" not in value:
        return "missing_request_hash", None, None
    request_hash = value["request_hash"]
    if type(request_hash) is not str or _HASH_RE.match(request_hash) is None:
        return "invalid_request_hash", None, None
    has_one = "response" in value
    has_many = "responses" in value
    if not has_one and not has_many:
        return "missing_response", request_hash, None
    if has_one and has_many:
        return "conflicting_response", request_hash, None
    if has_one:
        response = value["response"]
        if type(response) is not dict:
            return "invalid_response", request_hash, None
        items: list[Any] = [response]
    else:
        seq = value["responses"]
        if type(seq) is list and any(type(item) is not dict for item in seq):
            return "invalid_response", request_hash, None
        if type(seq) is not list or not seq:
            return "invalid_responses", request_hash, None
        if len(seq) > ceilings.max_sequence_length:
            return "too_many_responses", request_hash, None
        items = seq
    try:
        encoded = [canonical_json(item) for item in items]
    except RequestError:
        # Only reachable past Python's recursion limit (a max_depth raised very high).
        return "nesting_too_deep", request_hash, None
    if max(map(len, encoded)) > ceilings.max_response_bytes:
        return "response_too_large", request_hash, None
    stored: Stored = encoded[0] if has_one else tuple(encoded)
    return None, request_hash, stored


def _lines(data: bytes) -> Iterator[tuple[int, int, int]]:
    """(line number, start, end) of every line, without its ``\\n`` or a ``\\r`` before it."""
    find = data.find
    start = 0
    number = 0
    size = len(data)
    while start < size:
        number += 1
        nl = find(b"\n", start)
        stop = size if nl == -1 else nl
        end = stop - 1 if stop > start and data[stop - 1] == 0x0D else stop
        yield number, start, end
        start = stop + 1


# -- the public entry points -------------------------------------------------------------


def load_fixture(path: str | os.PathLike[str], *, ceilings: Ceilings | None = None) -> FixtureSet:
    """Read and validate a fixture in this process; raise ``FixtureError`` if rejected."""
    ceilings = DEFAULT_CEILINGS if ceilings is None else ceilings
    data = read_fixture_bytes(path, ceilings.max_file_bytes)
    return parse_fixture(data, ceilings)


def parse_fixture(data: bytes, ceilings: Ceilings) -> FixtureSet:
    """Validate fixture bytes already read; raise ``FixtureError`` at the first rejection."""
    parser = _Parser(ceilings)
    first: list[Rejection] = []

    def stop(reason: str, line: int) -> bool:
        first.append((reason, line))
        return False

    if not parser.run(data, stop):
        reason, line = first[0]
        raise FixtureError(reason, line)
    return FixtureSet(parser.table, ceilings)


def iter_rejections(
    path: str | os.PathLike[str], *, ceilings: Ceilings | None = None
) -> list[Rejection]:
    """Every rejection in a fixture (empty if valid), for ``replay-actor validate``."""
    ceilings = DEFAULT_CEILINGS if ceilings is None else ceilings
    try:
        data = read_fixture_bytes(path, ceilings.max_file_bytes)
    except FixtureError as exc:
        return [(exc.reason, exc.line)]
    found: list[Rejection] = []

    def keep(reason: str, line: int) -> bool:
        found.append((reason, line))
        return True

    _Parser(ceilings).run(data, keep)
    return found


def entry_line(request_hash: str, response: Any = None, responses: Any = None) -> bytes:
    """One fixture line (no newline) for a hash and a response or a sequence."""
    if _HASH_RE.match(request_hash) is None:
        raise ValueError("request_hash must be 'sha256:' and 64 lowercase hex digits")
    if (response is None) == (responses is None):
        raise ValueError("give exactly one of response and responses")
    head = b'{"schema_version":1,"request_hash":"' + request_hash.encode("ascii")
    if response is not None:
        return head + b'","response":' + canonical_json(response) + b"}"
    body = b",".join(canonical_json(item) for item in responses)
    return head + b'","responses":[' + body + b"]}"
