"""Fixture files: reading, validating and indexing them (SPEC §1).

A fixture is accepted whole or rejected whole. A rejection is a ``FixtureError`` with a
reason code and a line number, nothing else: it is raised outside every ``except`` block
so no parser exception rides along in ``__context__``.

Three paths judge a line, from fast to exact:

- the hot path (``_Parser._run``) decodes the line with msgspec into a typed entry
  whose response type admits only what msgspec checks for us in C: integers within
  +-(2^53 - 1), no float, containers at most ``_TYPED_DEPTH`` deep. It re-encodes the
  response sorted (its RFC 8785 form, outside the rare non-BMP key) and proves the line
  had no duplicate key by length: msgspec's output is never longer than its input for
  any token, so equal lengths mean no pair was dropped. A line written as ``entry_line``
  writes it (``{"schema_version":1,"request_hash":"…","response":…}`` with the response
  already canonical, as every line the tools write is) is kept as it is;
- ``_Parser._other_line``: msgspec again, with any JSON, floats kept as source text for
  the length proof, and a per-line byte test for big integers and depth;
- ``_jsonscan``: the precise checker, which names the first broken rule.

A line goes down a path as soon as anything is unusual, so rejection reasons and line
numbers come from the exact path only. The result is a ``FixtureSet``: request hash ->
the entry's bytes (single response) or the tuple of a sequence's canonical responses.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import re
import stat
from collections.abc import Callable
from itertools import repeat
from typing import Annotated, Any, Final, Literal, Union

import msgspec

from ._canonical import MAX_SAFE_INTEGER, canonical_json, jcs_float
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
    "parse_fixture",
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
_Hash71 = Annotated[str, msgspec.Meta(min_length=71, max_length=71)]
_Responses = Annotated[
    list[dict[str, Any]], msgspec.Meta(min_length=1, max_length=MAX_SEQUENCE_LENGTH)
]


class _Entry(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A line's shape for ``_other_line`` (any refusal goes to the precise checker)."""

    schema_version: Literal[1]
    request_hash: _HashStr
    response: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET
    responses: _Responses | msgspec.UnsetType = msgspec.UNSET


#: How deep the hot path's typed response may nest (below the response object itself);
#: a deeper line is judged by the other paths. Each level doubles the decoder's type
#: tree, so this stays small; chat responses nest 3 or 4 deep.
_TYPED_DEPTH: Final = 6
_SafeInt = Annotated[int, msgspec.Meta(ge=-MAX_SAFE_INTEGER, le=MAX_SAFE_INTEGER)]


@functools.lru_cache(maxsize=8)
def _hot_decoders(depth: int) -> tuple[Callable[[bytes], Any], Callable[[bytes], Any]]:
    """(loose, strict) decoders of the hot path's entry shape for a response ``depth``.

    Loose checks the hash's length only (its pattern is checked in bulk, a regex per line
    costing as much as the decode); strict checks the pattern.
    """
    value: Any = Union[None, bool, _SafeInt, str]  # noqa: UP007 - built at run time
    for _ in range(depth):
        value = Union[None, bool, _SafeInt, str, list[value], dict[str, value]]  # noqa: UP007

    def shape(name: str, hash_type: Any) -> Any:
        fields = [
            ("schema_version", Literal[1]),
            ("request_hash", hash_type),
            ("response", dict[str, value]),
        ]
        return msgspec.defstruct(name, fields, forbid_unknown_fields=True)

    Loose = shape("Loose", _Hash71)
    Strict = shape("Strict", _HashStr)
    return msgspec.json.Decoder(Loose).decode, msgspec.json.Decoder(Strict).decode


_HEX_DIGITS: Final = b"0123456789abcdef"

# ``_plain_line`` works on a skeleton of the line: digits and ``-`` become "0", ``{``
# becomes "[", the bytes a number token may follow are kept, everything else is deleted
# (which only makes the test more eager).
_KEPT: Final = b'0123456789-[{":,'
_SKELETON_TABLE: Final = bytes(
    0x30 if 0x30 <= b <= 0x39 or b == 0x2D else 0x5B if b == 0x7B else b for b in range(256)
)
_SKELETON_DELETE: Final = bytes(b for b in range(256) if b not in _KEPT)
_DIGIT_RUN: Final = b"0" * 16
_BIG_INT_PATTERNS: Final = (b'":' + _DIGIT_RUN, b"," + _DIGIT_RUN, b"[" + _DIGIT_RUN)
_ASTRAL_LEAD: Final = re.compile(rb"[\xf0-\xf4]")

# How a single entry is kept: the line as ``entry_line`` writes it. The response is
# ``kept[_RESPONSE_AT:-1]``; the canonical entry (keys sorted) is
# ``b"{" + kept[_SORTED_FROM:-1] + _SUFFIX``.
_HEAD: Final = b'{"schema_version":1,"request_hash":"'
_MID: Final = b'","response":'
_RESPONSE_AT: Final = len(_HEAD) + 71 + len(_MID)
_SORTED_FROM: Final = len(b'{"schema_version":1,')
_SUFFIX: Final = b',"schema_version":1}'
#: A single entry's length, less its response's, in either key order.
_FIXED: Final = _RESPONSE_AT + 1
_SEQUENCE_PREFIX: Final = b'{"request_hash":"'
_SEQUENCE: Final = b'","responses":['

_encoder: Final = msgspec.json.Encoder(order="sorted")
_encode_sorted: Final[Callable[[Any], bytes]] = _encoder.encode


def _kept(request_hash: str, response: bytes) -> bytes:
    return _HEAD + request_hash.encode("ascii") + _MID + response + b"}"


class FixtureSet:
    """A validated fixture: the table of responses and its safe summary.

    Hold it to look responses up in-process (the CLI's ``lookup`` does); hand the path,
    not this object, to ``acquire`` — the actor loads its own copy.
    """

    __slots__ = ("_counts", "_set_hash", "_table", "ceilings")

    def __init__(self, table: dict[str, Stored], ceilings: Ceilings) -> None:
        # Values: a single entry's line (see ``_HEAD``), or a sequence's responses.
        self._table = table
        self.ceilings = ceilings
        self._set_hash: str | None = None
        # (sequence entries, responses), counted once: the actor forked from the zygote
        # must not walk (and so copy-on-write) the whole table for a snapshot.
        self._counts: tuple[int, int] | None = None

    @property
    def fixture_set_hash(self) -> str:
        """``sha256:`` + hex sha256 of the RFC 8785 array of all entries, sorted by hash.

        Computed on first use and kept: a load does not pay for it until someone asks.
        The stored bytes are canonical already, so the array is assembled, not encoded.
        """
        if self._set_hash is None:
            table = self._table
            parts: list[bytes | memoryview] = []
            append = parts.append
            for request_hash in sorted(table):
                value = table[request_hash]
                if type(value) is bytes:
                    append(b",{")
                    append(memoryview(value)[_SORTED_FROM:-1])
                    append(_SUFFIX)
                else:
                    append(b"," + _SEQUENCE_PREFIX + request_hash.encode("ascii") + _SEQUENCE)
                    append(b",".join(value))  # type: ignore[arg-type]
                    append(b"]" + _SUFFIX)
            if parts:
                parts[0] = bytes(parts[0])[1:]  # no comma before the first entry
            digest = hashlib.sha256(b"[" + b"".join(parts) + b"]")
            self._set_hash = "sha256:" + digest.hexdigest()
        return self._set_hash

    def _count(self) -> tuple[int, int]:
        if self._counts is None:
            sequences = responses = 0
            for value in self._table.values():
                if type(value) is bytes:
                    responses += 1
                else:
                    sequences += 1
                    responses += len(value)
            self._counts = (sequences, responses)
        return self._counts

    @property
    def sequence_entries(self) -> int:
        """How many entries hold a ``responses`` sequence."""
        return self._count()[0]

    @property
    def responses(self) -> int:
        """How many responses the fixture holds (a sequence counts each element)."""
        return self._count()[1]

    def __len__(self) -> int:
        return len(self._table)

    def __contains__(self, request_hash: object) -> bool:
        return request_hash in self._table

    def __repr__(self) -> str:
        return f"<FixtureSet {len(self._table)} entries {self.fixture_set_hash}>"

    def snapshot(self) -> dict[str, Any]:
        """The safe snapshot: counts and the set hash; no payload, hash or path."""
        sequences = self.sequence_entries
        return {
            "format_version": FORMAT_VERSION,
            "fixture_set_hash": self.fixture_set_hash,
            "entries": len(self._table),
            "single_entries": len(self._table) - sequences,
            "sequence_entries": sequences,
            "responses": self.responses,
            "ceilings": self.ceilings.as_dict(),
        }

    def stored(self, request_hash: str) -> Stored | None:
        """The canonical response bytes (or sequence) for a hash, or None."""
        value = self._table.get(request_hash)
        if type(value) is bytes:
            return value[_RESPONSE_AT:-1]
        return value

    def request_hashes(self) -> list[str]:
        """Every request hash in the fixture, sorted (owner-side tooling only)."""
        return sorted(self._table)

    def responses_for(self, request_hash: str) -> list[dict[str, Any]] | None:
        """Fresh decoded responses for a hash (one for a single entry), or None."""
        stored = self.stored(request_hash)
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
    """Read up to ``limit`` bytes: one read of the whole file when it is what fstat says.

    A single ``os.read`` sized from ``st_size`` avoids joining chunks (a copy of the
    whole file); the loop after it only runs when the file grew or lied about its size.
    """
    size = os.fstat(fd).st_size
    first = os.read(fd, max(1, min(size + 1, limit)))
    if not first or len(first) >= limit:
        return first
    chunks = [first]
    remaining = limit - len(first)
    while remaining > 0:
        chunk = os.read(fd, min(remaining, 16 * 1024 * 1024))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return first if len(chunks) == 1 else b"".join(chunks)


# -- validating ---------------------------------------------------------------------------


class _Restart(Exception):
    """Internal: the optimistic pass stored a bad hash; judge the file again, strictly."""


class _Parser:
    """Walks a fixture's bytes line by line; reports rejections to ``on_reject``.

    ``on_reject(reason, line)`` returns True to go on (validate every line) or False to
    stop at the first rejection (load).
    """

    def __init__(self, ceilings: Ceilings) -> None:
        self.ceilings = ceilings
        self._floats: list[str] = []
        floats = self._floats

        def keep_float(text: str) -> msgspec.Raw:
            floats.append(text)
            return msgspec.Raw(text.encode("ascii"))

        self._decode = msgspec.json.Decoder(_Entry, float_hook=keep_float).decode
        self._decode_jcs = msgspec.json.Decoder(_Entry, float_hook=_jcs_raw).decode
        self._reset()

    def _reset(self) -> None:
        self.table: dict[str, Stored] = {}
        # Valid hashes of lines rejected for a later rule: they still count as seen, so
        # a repeat of one is a duplicate whatever happened to its first line.
        self.rejected_hashes: set[str] = set()
        self.entries = 0
        self.blank_lines = 0

    def run(self, data: bytes, on_reject: Callable[[str, int], bool]) -> bool:
        """Check every line; return True if the whole fixture is valid."""
        try:
            return self._run(data, on_reject, optimistic=True)
        except _Restart:
            self._reset()
            return self._run(data, on_reject, optimistic=False)

    def _run(self, data: bytes, on_reject: Callable[[str, int], bool], optimistic: bool) -> bool:
        """One pass over the lines.

        This loop is the hot path of a load (one turn per line, a million lines allowed),
        so it is written flat. The optimistic pass leaves the request hash's pattern
        unchecked on the lines it accepts and checks all stored hashes at once
        (``_check_hashes``) before anything is reported; if one is bad, the whole pass
        is redone strictly, so what is reported never depends on the shortcut.
        """
        ceilings = self.ceilings
        # A kept line is its response plus _FIXED bytes: bound the response so that
        # the line is within max_line_bytes too.
        max_stored = min(ceilings.max_response_bytes, ceilings.max_line_bytes - _FIXED)
        lines = data.split(b"\n")
        if lines[-1] == b"":
            lines.pop()  # the final newline ends the last line; it starts none
        depth = min(ceilings.max_depth - 2, _TYPED_DEPTH)
        loose, strict = _hot_decoders(max(depth, 0))
        decode = loose if optimistic else strict
        # The entry count is checked line by line only when it can be exceeded.
        hot = depth >= 0 and len(lines) <= ceilings.max_entries
        table = self.table
        rejected = self.rejected_hashes
        encode_into = _encoder.encode_into
        buffer = bytearray()
        head = _HEAD
        fixed = _FIXED
        response_at = _RESPONSE_AT
        other = self._other_line
        checked = not optimistic
        valid = True
        for number, line in enumerate(lines, 1):
            if hot:
                try:
                    entry = decode(line)
                except msgspec.DecodeError:
                    pass
                else:
                    # Into one reused buffer: no allocation for the common line.
                    encode_into(entry.response, buffer)
                    stored: bytes | bytearray = buffer
                    if not buffer.isascii() and _ASTRAL_LEAD.search(buffer):
                        # msgspec orders keys by code point, RFC 8785 by UTF-16 unit.
                        stored = canonical_json(entry.response)
                    request_hash = entry.request_hash
                    # Equal lengths prove no key was dropped as a duplicate (module doc).
                    if (
                        len(stored) + fixed == len(line)
                        and len(stored) <= max_stored
                        and request_hash not in table
                        and (not rejected or request_hash not in rejected)
                    ):
                        if line.startswith(head) and line.startswith(stored, response_at):
                            table[request_hash] = line
                        else:
                            table[request_hash] = _kept(request_hash, bytes(stored))
                        continue
            reason = other(line, number)
            if reason is None:
                continue
            if reason == "":
                self.blank_lines += 1
                continue
            valid = False
            if not checked:
                self._check_hashes()
                checked = True
                decode = strict
            if not on_reject(reason, number):
                return False
        if not checked:
            self._check_hashes()
        return valid

    def _check_hashes(self) -> None:
        """Raise ``_Restart`` unless every stored hash has the required form.

        Each key is 71 characters (the decoder checked); with the prefix known, the
        other 64 are lowercase hex exactly when deleting hex digits leaves "sh:" alone.
        """
        keys = list(self.table)
        if not all(map(str.startswith, keys, repeat("sha256:"))):
            raise _Restart
        rest = "".join(keys).encode("utf-8", "surrogatepass").translate(None, _HEX_DIGITS)
        if rest != b"sh:" * len(keys):
            raise _Restart

    def _other_line(self, line: bytes, number: int) -> str | None:
        """Judge a line the hot path did not accept: the reason, None, or "" if blank."""
        if line[-1:] == b"\r":
            line = line[:-1]
        ceilings = self.ceilings
        if len(line) > ceilings.max_line_bytes:
            return "line_too_long"
        if not line.strip(b" \t"):
            return ""  # a blank line: skipped, but counted
        self.entries = number - self.blank_lines
        if line[:1] == b"{" and line[-1:] == b"}" and _plain_line(line, ceilings.max_depth):
            floats = self._floats
            floats.clear()
            try:
                entry = self._decode(line)
            except (msgspec.DecodeError, RecursionError):
                entry = None
            if entry is not None:
                canon = _encode_sorted(entry)
                # Equal lengths prove no key was dropped as a duplicate (module doc).
                if (
                    len(canon) == len(line)
                    and not _ASTRAL_LEAD.search(line)
                    and all(map(_finite, floats))
                ):
                    if floats:
                        # Floats were kept as source text for the length proof; now
                        # decode again with each float in its RFC 8785 form.
                        entry = self._decode_jcs(line)
                    return self._store_fast(entry)
        return self._line_slow(line)

    def _store_fast(self, entry: _Entry) -> str | None:
        ceilings = self.ceilings
        response = entry.response
        responses = entry.responses
        if response is not msgspec.UNSET:
            if responses is not msgspec.UNSET:
                return self._finish(entry.request_hash, "conflicting_response", None)
            items: tuple[bytes, ...] = (_encode_sorted(response),)
        elif responses is not msgspec.UNSET:
            if len(responses) > ceilings.max_sequence_length:
                return self._finish(entry.request_hash, "too_many_responses", None)
            items = tuple(map(_encode_sorted, responses))
        else:
            return self._finish(entry.request_hash, "missing_response", None)
        if max(map(len, items)) > ceilings.max_response_bytes:
            return self._finish(entry.request_hash, "response_too_large", None)
        stored: Stored = items[0] if responses is msgspec.UNSET else items
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
        if request_hash is None:
            return reason
        return self._finish(request_hash, reason, stored)

    def _finish(self, request_hash: str, reason: str | None, stored: Stored | None) -> str | None:
        """Rules that involve other lines (duplicates, the entry count); then store."""
        if reason is None:
            if request_hash in self.table or request_hash in self.rejected_hashes:
                reason = "duplicate_request_hash"
            elif self.entries > self.ceilings.max_entries:
                reason = "too_many_entries"
            else:
                assert stored is not None
                if type(stored) is bytes:
                    stored = _kept(request_hash, stored)
                self.table[request_hash] = stored
                return None
        self.rejected_hashes.add(request_hash)
        return reason


def _plain_line(line: bytes, max_depth: int) -> bool:
    """True if msgspec may judge the line: no possible integer beyond 2^53 and no more
    openers than ``max_depth``.

    In a compact line a number token follows ``":``, ``,`` or ``[``; a run of 16 digits
    there may be beyond 2^53 (``-`` counts as a digit, so the test errs on the eager
    side). Depth is at most the count of ``[`` and ``{``. A line that fails goes to the
    precise checker, which decides.
    """
    skeleton = line.translate(_SKELETON_TABLE, _SKELETON_DELETE)
    if any(pattern in skeleton for pattern in _BIG_INT_PATTERNS):
        return False
    return skeleton.count(b"[") <= max_depth


def _finite(text: str) -> bool:
    return math.isfinite(float(text))


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
