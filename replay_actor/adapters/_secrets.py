"""Key hygiene: finding pieces of an API key in text, and keeping them out of logs.

Runs in: the caller (a live or record provider's calls).

A vendor rarely echoes a whole key: an error code may hold ``"invalid_" + key[7:]``, an
answer the key less its last character. So the test is not "does the text contain the
key" but "does it share a *long piece* with the key" (docs/privacy.md, "API keys"):

- a piece is long from ``piece_length(len(key))`` characters on: 16, or one less than the
  key's length for a key of 9 to 16 characters (so the key less one character always
  counts), and the whole key for a key of 8 characters or fewer (any shorter run would
  match ordinary text);
- the search samples the text every ``L - 8 + 1`` positions and looks the 8 characters
  there up in a set of the key's 8-grams; every run of ``L`` shared characters covers a
  sampled position, and each hit is extended both ways to the full shared run. So a
  4 MiB answer costs about half a million dictionary look-ups, whatever the key.

``KeyLogFilter`` is a logging filter on the HTTP library's loggers (httpx2 and
httpcore2), installed by the adapters: at DEBUG, httpcore2 logs response headers, and a
header may echo the key. Every record is rewritten with each live adapter's key pieces
replaced by ``[redacted]``.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Iterator
from typing import Any, AnyStr, Final, Protocol

__all__ = [
    "REDACTED",
    "holds_key_piece",
    "install_log_filter",
    "key_piece_spans",
    "piece_length",
    "redact_key_pieces",
    "strings_in",
    "KeyLogFilter",
]

#: How many characters of the key a shared run needs, at most.
_PIECE: Final = 16
#: Keys this short only count whole.
_FLOOR: Final = 8
#: The anchor the search samples the text with.
_ANCHOR: Final = 8
REDACTED: Final = "[redacted]"
#: The loggers of the HTTP library the adapters use (httpx2 logs each request's URL at
#: INFO; httpcore2 logs headers at DEBUG).
_HTTP_LOGGERS: Final = (
    "httpx2",
    "httpcore2",
    "httpcore2.connection",
    "httpcore2.http11",
    "httpcore2.http2",
    "httpcore2.proxy",
    "httpcore2.socks",
)


def piece_length(key_length: int) -> int:
    """How long a shared run must be to count as a piece of a key this long."""
    if key_length <= _FLOOR:
        return key_length
    return min(_PIECE, key_length - 1)


def key_piece_spans(text: AnyStr, key: AnyStr) -> list[tuple[int, int]]:
    """The ``(start, end)`` spans of ``text`` that are long pieces of ``key``, merged and
    in order (empty if none or if ``key`` is empty)."""
    if not key or not text:
        return []
    length = piece_length(len(key))
    if length >= len(key):
        return _merged(_whole_key_spans(text, key))
    return _merged(_sampled_spans(text, key, length))


def _whole_key_spans(text: AnyStr, key: AnyStr) -> list[tuple[int, int]]:
    """Where the whole key occurs (a key only whole counts): the C search is fastest."""
    spans: list[tuple[int, int]] = []
    start = text.find(key)
    while start >= 0:
        spans.append((start, start + len(key)))
        start = text.find(key, start + 1)
    return spans


def _sampled_spans(text: AnyStr, key: AnyStr, length: int) -> list[tuple[int, int]]:
    """The runs of at least ``length`` characters ``text`` shares with ``key``, found
    from ``text`` sampled every ``length - anchor + 1`` positions (module docstring)."""
    anchor = min(_ANCHOR, length)
    step = length - anchor + 1
    grams: dict[AnyStr, list[int]] = {}
    for j in range(len(key) - anchor + 1):
        grams.setdefault(key[j : j + anchor], []).append(j)
    end_of_text = len(text)
    spans: list[tuple[int, int]] = []
    for t in range(0, end_of_text - anchor + 1, step):
        offsets = grams.get(text[t : t + anchor])
        if offsets is None:
            continue
        for j in offsets:
            a, ka, b, kb = t, j, t + anchor, j + anchor
            while a > 0 and ka > 0 and text[a - 1] == key[ka - 1]:
                a, ka = a - 1, ka - 1
            while b < end_of_text and kb < len(key) and text[b] == key[kb]:
                b, kb = b + 1, kb + 1
            if b - a >= length:
                spans.append((a, b))
    return spans


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def holds_key_piece(text: AnyStr, key: AnyStr | None) -> bool:
    """Whether ``text`` shares a long piece (``piece_length``) with ``key``."""
    if not key:
        return False
    return bool(key_piece_spans(text, key))


def redact_key_pieces(text: str, key: str) -> str:
    """``text`` with every long piece of ``key`` replaced by ``[redacted]``."""
    spans = key_piece_spans(text, key)
    if not spans:
        return text
    parts: list[str] = []
    last = 0
    for start, end in spans:
        parts.append(text[last:start])
        parts.append(REDACTED)
        last = end
    parts.append(text[last:])
    return "".join(parts)


def strings_in(value: Any) -> Iterator[str]:
    """Every string in a decoded JSON value (keys included), iteratively: a response's
    depth is bounded by the loader's ceilings, not by the recursion limit."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            for name, inner in item.items():
                if isinstance(name, str):
                    yield name
                stack.append(inner)
        elif isinstance(item, list):
            stack.extend(item)


class _HasKey(Protocol):
    api_key: str | None


class KeyLogFilter(logging.Filter):
    """Redacts the keys of every registered live adapter from the records it sees."""

    def __init__(self) -> None:
        super().__init__("replay_actor.keys")
        self._holders: weakref.WeakSet[Any] = weakref.WeakSet()
        self._lock = threading.Lock()

    def register(self, holder: _HasKey) -> None:
        with self._lock:
            self._holders.add(holder)

    def filter(self, record: logging.LogRecord) -> bool:
        with self._lock:
            keys = {holder.api_key for holder in self._holders if holder.api_key}
        if not keys:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a broken record is the logging system's to report
            return True
        redacted = message
        for key in keys:
            redacted = redact_key_pieces(redacted, key)
        if redacted != message:
            record.msg = redacted
            record.args = None
        return True


_filter = KeyLogFilter()
_installed = False
_install_lock = threading.Lock()


def install_log_filter(holder: _HasKey) -> None:
    """Keep ``holder.api_key`` out of the HTTP library's log records (for as long as
    ``holder`` lives); installs the filter on those loggers once per process."""
    global _installed
    _filter.register(holder)
    with _install_lock:
        if _installed:
            return
        for name in _HTTP_LOGGERS:
            logging.getLogger(name).addFilter(_filter)
        _installed = True
