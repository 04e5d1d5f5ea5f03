"""The precise JSON checker: the slow path that decides *why* a fixture line is bad.

The fast loader hands a line here whenever msgspec refused it or one of its cheap
checks was inconclusive. This module parses the line with an iterative tokenizer (no
recursion, so any depth is safe), finishes the whole line before judging, and returns
either the parsed value or the first broken rule in the fixture format's priority order:
``invalid_json`` > ``unsupported_number`` > ``nesting_too_deep`` > ``not_an_object`` >
``duplicate_key``. It never raises and never returns text from the line.
"""

from __future__ import annotations

import math
import re
from typing import Any, Final

import msgspec

__all__ = ["Rejected", "scan_line"]

_MAX_SAFE: Final = 2**53 - 1
_TOKEN: Final = re.compile(
    r"""[ \t\n\r]*(?:
        (?P<s>"(?:[^"\\\x00-\x1f]++|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*+")
      | (?P<n>-?(?:0|[1-9][0-9]*)(?P<f>\.[0-9]+)?(?P<e>[eE][+-]?[0-9]+)?)
      | (?P<l>true|false|null)
      | (?P<p>[\[\]{},:])
    )""",
    re.VERBOSE,
)
_TRAILING_WS: Final = re.compile(r"[ \t\n\r]*\Z")
_LITERALS: Final[dict[str, Any]] = {"true": True, "false": False, "null": None}
_decode_string = msgspec.json.Decoder(str).decode


class Rejected(str):
    """A reason code returned (not raised) by ``scan_line``."""


_INVALID: Final = Rejected("invalid_json")

# Parser states: what the next token may be.
_VALUE, _FIRST_VALUE, _FIRST_KEY, _KEY, _COLON, _AFTER = range(6)


def scan_line(text: str, max_depth: int) -> Any:
    """Parse one JSON text; return its value, or a ``Rejected`` reason code."""
    unsupported = False
    duplicate = False
    deepest = 0
    # Each frame: [container, is_object, pending_key]
    stack: list[list[Any]] = []
    root: Any = None
    have_root = False
    state = _VALUE
    pos = 0
    match = _TOKEN.match
    while True:
        m = match(text, pos)
        if m is None:
            break
        pos = m.end()
        kind = m.lastgroup
        if kind == "f" or kind == "e":
            kind = "n"
        if kind == "p":
            tok = m.group("p")
            if tok == "[" or tok == "{":
                if state not in (_VALUE, _FIRST_VALUE):
                    return _INVALID
                stack.append([[] if tok == "[" else {}, tok == "{", None])
                deepest = max(deepest, len(stack))
                state = _FIRST_KEY if tok == "{" else _FIRST_VALUE
                continue
            if tok == ",":
                if state != _AFTER or not stack:
                    return _INVALID
                state = _KEY if stack[-1][1] else _VALUE
                continue
            if tok == ":":
                if state != _COLON:
                    return _INVALID
                state = _VALUE
                continue
            # A closing bracket: it must match the open container and follow a value
            # (or close an empty one).
            if not stack or stack[-1][1] != (tok == "}"):
                return _INVALID
            if state not in ((_FIRST_KEY if tok == "}" else _FIRST_VALUE), _AFTER):
                return _INVALID
            value: Any = stack.pop()[0]
        elif kind == "s":
            try:
                string = _decode_string(m.group("s").encode("utf-8"))
            except (msgspec.DecodeError, UnicodeEncodeError):
                return _INVALID  # a lone surrogate escape is not JSON
            if state == _KEY or state == _FIRST_KEY:
                frame = stack[-1]
                if string in frame[0]:
                    duplicate = True
                frame[2] = string
                state = _COLON
                continue
            if state not in (_VALUE, _FIRST_VALUE):
                return _INVALID
            value = string
        elif kind == "n":
            if state not in (_VALUE, _FIRST_VALUE):
                return _INVALID
            tok = m.group("n")
            if m.group("f") is None and m.group("e") is None:
                if len(tok) > 17:  # beyond 2**53 whatever the digits; skip int()'s limit
                    unsupported = True
                    value = 0
                else:
                    value = int(tok)
                    if not -_MAX_SAFE <= value <= _MAX_SAFE:
                        unsupported = True
            else:
                value = float(tok)
                if not math.isfinite(value):
                    unsupported = True
        else:  # a literal
            if state not in (_VALUE, _FIRST_VALUE):
                return _INVALID
            value = _LITERALS[m.group("l")]
        # A complete value: attach it to its parent, or make it the root.
        if stack:
            parent = stack[-1]
            if parent[1]:
                parent[0][parent[2]] = value
            else:
                parent[0].append(value)
        else:
            root = value
            have_root = True
        state = _AFTER
    if stack or not have_root or _TRAILING_WS.match(text, pos) is None:
        return _INVALID
    if unsupported:
        return Rejected("unsupported_number")
    if deepest > max_depth:
        return Rejected("nesting_too_deep")
    if type(root) is not dict:
        return Rejected("not_an_object")
    if duplicate:
        return Rejected("duplicate_key")
    return root
