"""The recorder's view of a fixture that is being recorded: the fixture file as loaded,
plus every journal record seen since (this recorder's and the others'), kept so that
each new answer is checked against the ceilings in constant time.

Runs in: the caller (the recorder; its committer thread updates it).

Checking an answer used to mean building the whole new fixture and validating it: a cost
that grew with the fixture, paid per answer. The ledger instead keeps, for every entry a
record touched, how many responses it holds and how long its line will be, and for the
whole fixture its entries and the size it will have once compacted. An answer is then
admitted or refused (``admit``) with the rules the loader would apply to the compacted
file, at a cost that depends on the answer alone: its own response rules (size, depth,
numbers) by the loader itself on a line of its own, the rest by these counts.

The compacted file's size is exact for every line the loader kept in its own layout; a
line the user wrote in another layout (spaces, escapes) that gains a response is counted
as if it stayed, so the size errs high, never low: a fixture is never written past
``max_file_bytes``.
"""

from __future__ import annotations

import threading

from .._errors import FixtureError
from ..fixture import (
    Ceilings,
    FixtureSet,
    Stored,
    kept_line_length,
    parse_fixture,
    sequence_line,
    single_line,
)

__all__ = ["Ledger"]


class _Entry:
    """An entry a record touched: its responses beyond the loaded file's, their count
    and size with the file's, and the length of its line in the file (None: unknown)."""

    __slots__ = ("added", "count", "file_line", "total")

    def __init__(self, stored: Stored | None, file_line: int | None) -> None:
        self.added: list[bytes] = []
        if stored is None:
            self.count = self.total = 0
        elif isinstance(stored, bytes):
            self.count, self.total = 1, len(stored)
        else:
            self.count, self.total = len(stored), sum(len(item) for item in stored)
        self.file_line = file_line


class Ledger:
    """The fixture file as loaded (``base``) plus the records folded in since.

    Not thread-safe by itself: whoever reads or folds it (the recorder's callers, its
    writer thread) holds ``lock``, which travels with it.
    """

    __slots__ = (
        "_cache",
        "_entries",
        "_touched",
        "_version",
        "base",
        "ceilings",
        "lock",
        "responses",
        "size",
    )

    def __init__(self, base: FixtureSet, size: int, ceilings: Ceilings) -> None:
        self.base = base
        self.ceilings = ceilings
        #: The compacted fixture's size in bytes (an upper bound, see the module doc).
        self.size = size
        self._entries = len(base)
        #: How many responses the fixture and the records hold together.
        self.responses = base.responses
        self._touched: dict[str, _Entry] = {}
        self._version = 0
        self._cache: tuple[int, FixtureSet] | None = None
        self.lock = threading.Lock()

    @property
    def entries(self) -> int:
        return self._entries

    def _entry(self, request_hash: str) -> _Entry:
        entry = self._touched.get(request_hash)
        if entry is None:
            base = self.base
            entry = _Entry(base.stored(request_hash), base.line_length(request_hash))
            self._touched[request_hash] = entry
        return entry

    def admit(self, request_hash: str, response: bytes) -> str | None:
        """The loader's reason for refusing the fixture once ``response`` is appended to
        ``request_hash``'s entry, or None if it stays valid; changes nothing."""
        ceilings = self.ceilings
        entry = self._touched.get(request_hash)
        if entry is None:
            base = self.base
            entry = _Entry(base.stored(request_hash), base.line_length(request_hash))
        count = entry.count + 1
        if count > ceilings.max_sequence_length:
            return "too_many_responses"
        reason = _response_reason(request_hash, response, count, ceilings)
        if reason is not None:
            return reason
        new_line = kept_line_length(count, entry.total + len(response))
        if new_line > ceilings.max_line_bytes:
            return "line_too_long"
        if entry.count == 0 and self._entries + 1 > ceilings.max_entries:
            return "too_many_entries"
        if self.size + _growth(entry, new_line) > ceilings.max_file_bytes:
            return "file_too_large"
        return None

    def fold(self, request_hash: str, response: bytes) -> None:
        """Count a record in (one ``admit`` accepted, or another recorder wrote)."""
        entry = self._entry(request_hash)
        new_line = kept_line_length(entry.count + 1, entry.total + len(response))
        self.size += _growth(entry, new_line)
        if entry.count == 0:
            self._entries += 1
        entry.count += 1
        entry.total += len(response)
        entry.file_line = new_line
        entry.added.append(response)
        self.responses += 1
        self._version += 1

    def state(self) -> FixtureSet:
        """The fixture the file and the records make together (for the snapshot and
        for answering what a session found there): built on demand, kept until the
        next record."""
        cache = self._cache
        if cache is not None and cache[0] == self._version:
            return cache[1]
        additions: dict[str, Stored] = {}
        for request_hash, entry in self._touched.items():
            if not entry.added:
                continue
            held = self.base.stored(request_hash)
            items: tuple[bytes, ...] = (
                () if held is None else (held,) if type(held) is bytes else held  # type: ignore[assignment]
            )
            items += tuple(entry.added)
            additions[request_hash] = items[0] if len(items) == 1 else items
        state = self.base.extended(additions)
        self._cache = (self._version, state)
        return state


def _growth(entry: _Entry, new_line: int) -> int:
    """How much the compacted file grows when ``entry``'s line becomes ``new_line``
    bytes long (a new line brings its newline; a line of unknown length is counted as
    staying)."""
    if entry.count == 0:
        return new_line + 1
    if entry.file_line is None:
        return new_line + 1
    return new_line - entry.file_line


def _response_reason(
    request_hash: str, response: bytes, count: int, ceilings: Ceilings
) -> str | None:
    """The loader's verdict on ``response`` as an element of an entry that will hold
    ``count`` responses: judged on a line of its own in that entry's layout (a sequence
    nests one level deeper), so size, depth and number rules are exactly the loader's."""
    if len(response) > ceilings.max_response_bytes:
        return "response_too_large"
    line = (
        single_line(request_hash, response)
        if count == 1
        else sequence_line(request_hash, [response])
    )
    try:
        parse_fixture(line + b"\n", ceilings)
    except FixtureError as exc:
        return exc.reason
    return None
