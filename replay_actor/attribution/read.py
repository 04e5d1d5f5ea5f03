"""A run log read back for ``compare``: every usable line as a :class:`Call`, every other
line skipped and counted by reason, never a crash.

Runs in: the ``replay-actor compare`` process.

A log is input from outside (a file anyone could have written), so each line is held to
the writer's own shape (``log.LogLine``) and bounded before anything reads it deeply:

=====================  ============================================================
reason                 the line
=====================  ============================================================
``line_too_long``      is longer than ``MAX_LINE_BYTES`` (its rest is read past, never
                       held)
``nesting_too_deep``   nests objects/arrays deeper than ``MAX_DEPTH`` (an iterative
                       count, before any decoder recurses)
``not_json``           is not UTF-8 JSON
``invalid_field``      has a field of the wrong type or form: an unknown ``outcome``, a
                       hash not ``sha256:`` + 64 hex, a negative line number…
``torn``               is a last line without its newline (a writer killed mid-write)
=====================  ============================================================

Memory: one line at a time, and per call a small Struct; a scope and a row are kept as
their RFC 8785 text (what samples are keyed by), each distinct one once. Values are never
echoed in a reason.
"""

from __future__ import annotations

import os
import re
import stat
from collections import Counter
from typing import Any, Final

import msgspec

from .._canonical import canonical_json
from .._errors import ReplayError
from .._strict_json import nesting_depth
from .log import OUTCOMES

__all__ = ["MAX_DEPTH", "MAX_LINE_BYTES", "Call", "LogRead", "display_path", "read_log"]

#: The longest line read (the writer's lines are a few hundred bytes; a scope is small).
MAX_LINE_BYTES: Final = 64 * 1024
#: The deepest nesting a line may have (the line is depth 1, a scope's values below).
MAX_DEPTH: Final = 16
_HASH: Final = re.compile(r"sha256:[0-9a-f]{64}\Z")
_CHUNK: Final = 1 << 20


class _Line(msgspec.Struct):
    """A line as the writer writes it; unknown keys are ignored (a newer writer)."""

    seq: int
    outcome: str
    time: float = 0.0
    pid: int = 0
    provider: str | None = None
    kind: str = "chat"
    vendor: str | None = None
    path: str | None = None
    # Raw: kept as its bytes, made canonical once per distinct scope (``_scope_text``).
    scope: msgspec.Raw = msgspec.Raw(b"null")
    request_hash: str | None = None
    line: int | None = None
    element: int | None = None
    row: msgspec.Raw = msgspec.Raw(b"null")


class Call(msgspec.Struct, frozen=True):
    """One call of a log, as ``compare`` uses it."""

    number: int  #: the line number in the log file
    seq: int
    outcome: str
    request_hash: str | None
    line: int | None
    element: int | None
    scope: str | None  #: the scope's RFC 8785 text, or None
    path: str | None
    row: str | None = None  #: the eval row's RFC 8785 text (docs/attribution.md), or None


class LogRead(msgspec.Struct):
    """Every usable call of one log, in file order, and the lines skipped by reason."""

    path: str  #: as shown (``display_path``)
    calls: list[Call]
    skipped: dict[str, int]
    source: str = ""  #: the path as given, to open its request sidecar


_decode: Final = msgspec.json.Decoder(_Line).decode


def _checked(number: int, raw: bytes, scopes: dict[bytes, str | None]) -> Call | str:
    """The line's call, or the reason it is skipped (``scopes``: the texts of the scopes
    seen so far, by their bytes in the log)."""
    if raw.count(b"{") + raw.count(b"[") > MAX_DEPTH and nesting_depth(raw) > MAX_DEPTH:
        return "nesting_too_deep"
    try:
        line = _decode(raw)
    except msgspec.ValidationError:
        return "invalid_field"
    except (msgspec.DecodeError, RecursionError):
        return "not_json"
    if line.outcome not in OUTCOMES or line.seq < 0:
        return "invalid_field"
    digest = line.request_hash
    if digest is not None and not _HASH.match(digest):
        return "invalid_field"
    if (line.line is not None and line.line < 1) or (line.element is not None and line.element < 0):
        return "invalid_field"
    scope = _text_of(line.scope, scopes)
    row = _text_of(line.row, scopes)
    if scope is _INVALID or row is _INVALID:
        return "invalid_field"
    return Call(
        number, line.seq, line.outcome, digest, line.line, line.element, scope, line.path, row
    )


_UNSEEN: Final = "\0unseen"
_INVALID: Final = "\0invalid"
_scope_decode: Final = msgspec.json.Decoder(dict[str, Any] | None).decode


def _text_of(raw: msgspec.Raw, seen: dict[bytes, str | None]) -> str | None:
    """A scope's or a row's text, made once per distinct value (``seen``)."""
    key = bytes(raw)
    found = seen.get(key, _UNSEEN)
    if found is _UNSEEN:
        found = seen[key] = _scope_text(raw)
    return found


def _scope_text(raw: msgspec.Raw) -> str | None:
    """A scope's or a row's RFC 8785 text (None for null), or ``_INVALID``."""
    try:
        scope = _scope_decode(raw)
        return None if scope is None else canonical_json(scope).decode("utf-8")
    except (msgspec.DecodeError, ValueError, RecursionError):  # RequestError: a ValueError
        return _INVALID


def display_path(path: str | os.PathLike[str]) -> str:
    """A path as text that any output can hold: bytes that are not UTF-8 (a file name
    from another locale) are named as ``\\xff`` escapes, never an error."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _skip_rest_of_line(handle: Any) -> None:
    while True:
        piece = handle.readline(_CHUNK)
        if not piece or piece.endswith(b"\n"):
            return


def read_log(path: str | os.PathLike[str], *, max_line: int = MAX_LINE_BYTES) -> LogRead:
    """Read a run log. Raises ``ReplayError`` only for a path that is not a readable
    regular file (the CLI's exit 2); every bad line is skipped and counted."""
    shown = display_path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise ReplayError(f"{shown}: cannot be read ({os.strerror(exc.errno or 0)})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # a directory, a FIFO (never waited on)
        os.close(fd)
        raise ReplayError(f"{shown}: not a regular file")
    calls: list[Call] = []
    skipped: Counter[str] = Counter()
    scopes: dict[bytes, str | None] = {}
    with open(fd, "rb", closefd=True) as handle:
        limit = max_line + 1
        number = 0
        while raw := handle.readline(limit):
            number += 1
            if len(raw) == limit and not raw.endswith(b"\n"):
                _skip_rest_of_line(handle)
                skipped["line_too_long"] += 1
                continue
            if not raw.endswith(b"\n"):
                skipped["torn"] += 1
                break
            if not raw.strip():
                continue
            found = _checked(number, raw, scopes)
            if not isinstance(found, Call):
                skipped[found] += 1
            else:
                calls.append(found)
    return LogRead(shown, calls, dict(skipped), os.fspath(path))
