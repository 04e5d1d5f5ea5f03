"""How ``replay-actor explain`` shows a hit or a miss: its text report and its JSON.

Runs in: the caller (``replay-actor explain``).

The text names each differing path with its recorded and requested value as compact
JSON, a long one shortened around where the two differ; a value nested too deeply to
carry (``nearest.TOO_DEEP``) is shown as such, and is ``null`` with ``"truncated": true``
in the JSON.
"""

from __future__ import annotations

import json
from typing import Any, Final

from .nearest import ABSENT, TOO_DEEP, Nearest

__all__ = ["explain_json", "explain_text", "show_value"]

_SHOWN: Final = 72
_TOO_DEEP_TEXT: Final = "(a value nested too deeply to show)"


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


def _first_difference(a: str, b: str) -> int:
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return min(len(a), len(b))


def _show(value: Any, other: Any) -> str:
    """A value as compact JSON, shortened around where it differs from ``other``."""
    if value is TOO_DEEP:
        return _TOO_DEEP_TEXT
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


#: A value as compact JSON, shortened around where it differs from another (``compare``
#: shows its differing paths the same way).
show_value: Final = _show


def _difference_line(recorded: Any, requested: Any) -> str:
    if recorded is ABSENT:
        return f"only in the request: {_show(requested, None)}"
    if requested is ABSENT:
        return f"only in the recording: {_show(recorded, None)}"
    return f"{_show(recorded, requested)} → {_show(requested, recorded)}"


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
    # A request without messages (an embedding, a completion) shares none to count.
    shared = (
        f"shares {nearest.shared_messages} of {requested_messages} leading messages; "
        if requested_messages
        else ""
    )
    lines.append(
        f"  {shared}{count} {'path differs' if count == 1 else 'paths differ'}"
        " (recorded → requested):"
    )
    lines.extend(
        f"  {d.path}: {_difference_line(d.recorded, d.requested)}" for d in nearest.differences
    )
    if not nearest.differences:
        lines.append("  (none: the sidecar holds this very request; its fixture entry is gone)")
    return "\n".join(lines) + "\n"
