"""Strict reading of JSON text that arrives from outside: the CLI's input files and the
request bodies the transports are posted (docs/cli.md, docs/sdk.md). One rule set, so a
body the CLI refuses is refused by the transports too:

- a key repeated within one object is refused (``json`` would keep the last one, and
  msgspec too: the request would hash as something its author did not write);
- ``NaN``, ``Infinity`` and ``-Infinity`` are refused (they are not JSON);
- nesting deeper than ``max_depth`` is refused before anything recursive reads the text
  (:func:`nesting_depth` is iterative), so no ``RecursionError`` and no deep C recursion
  comes out of it whatever the recursion limit.

Messages say which rule and where (line and column), never a byte of the text.

Most texts are read by msgspec alone (a request body in ~20 us where ``json`` with the
rule hooks takes ~80): msgspec refuses ``NaN`` and ``Infinity`` itself, and a repeated
key, which it would silently drop, is caught by counting colons. In JSON text every colon
outside a string ends a key, and msgspec writes strings back with their colons as they
were, so the text and msgspec's re-encoding of its value have as many colons exactly
when no key was dropped. An escape ``\\u....`` could spell a colon the text does not
show, so a text holding one, and any text msgspec cannot read or write back, is read by
``json`` with the hooks, which also words every refusal.
"""

from __future__ import annotations

import json
import operator
import re
from itertools import accumulate, count
from typing import Any, Final, NoReturn

import msgspec

__all__ = ["MAX_BODY_DEPTH", "NotStrictJSON", "loads_strict", "loads_strict_utf8", "nesting_depth"]

#: How deep a request body posted to a transport may nest (objects and arrays). Deeper
#: than any real request, shallow enough that every reader after it (msgspec, the
#: request's normalisation, RFC 8785) stays far from Python's recursion limit.
MAX_BODY_DEPTH: Final = 512

_STRING: Final = re.compile(rb'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
_NOT_BRACKET: Final = bytes(range(256)).translate(None, b"[]{}")
# Openers become 2 and closers 0, so the running sum minus the position is the depth.
_STEP: Final = bytes.maketrans(b"[]{}", b"\x02\x00\x02\x00")
#: Every byte but the colons and the openers: dropping them in one pass leaves a few
#: hundred bytes of a request body to count in, where three counts read it whole three
#: times (~10 us against ~20 us for an 18 KB body).
_NOT_COUNTED: Final = bytes(range(256)).translate(None, b":[{")


class NotStrictJSON(ValueError):
    """The text is not strict JSON; the message names the rule (and the line and column
    of a syntax error), never the text."""


class _DuplicateKey(Exception):
    pass


class _Constant(Exception):
    pass


#: What ``_quick`` returns when only ``json`` with the hooks can tell.
_UNSURE: Final = object()
_ENCODE: Final = msgspec.json.Encoder().encode
#: ``\\u``, in text and in bytes: a regular expression finds it several times faster than
#: ``in`` or ``find`` (measured in an 18 KB request body: ~6 us against ~19 us).
_ESCAPE: Final = re.compile(r"\\u")
_ESCAPE_UTF8: Final = re.compile(rb"\\u")


def _quick(text: str | bytes, colons: int | None = None) -> Any:
    """The value msgspec reads, when it is certainly the value of the strict reading;
    else ``_UNSURE`` (see the module docstring). UTF-8 bytes are read as they are
    (msgspec refuses bytes that are not UTF-8 in a string, and anything else is not
    JSON): no ``str`` is made of them. ``colons``: the text's, when already counted."""
    if isinstance(text, bytes):
        escaped = _ESCAPE_UTF8.search(text) is not None
        if colons is None:
            colons = text.count(b":")
    else:
        escaped = _ESCAPE.search(text) is not None
        colons = text.count(":")
    if escaped:
        return _UNSURE
    try:
        value = msgspec.json.decode(text)
        again = _ENCODE(value)
    except (msgspec.MsgspecError, ValueError, RecursionError):
        # Not JSON, NaN, a number out of range, a surrogate, too deep: worded below.
        return _UNSURE
    if again.count(b":") != colons:
        return _UNSURE  # a key was repeated (msgspec kept the last)
    return value


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise _DuplicateKey
    return result


def _no_constant(_name: str) -> NoReturn:
    raise _Constant


def nesting_depth(data: bytes) -> int:
    """How deep the arrays and objects of the JSON text ``data`` nest (0 for a scalar),
    without recursion. On text that is not JSON it is an estimate (the parser then names
    the real problem)."""
    # Brackets inside strings are text: drop the strings first, then everything else.
    steps = _STRING.sub(b"", data).translate(None, _NOT_BRACKET).translate(_STEP)
    return max(map(operator.sub, accumulate(steps), count(1)), default=0)


def loads_strict(text: str, *, max_depth: int | None = None) -> Any:
    """The value of the JSON text ``text``, by the rules of the module docstring.

    Raises :class:`NotStrictJSON`, outside every ``except`` block (a parser exception
    may quote the text).
    """
    if max_depth is not None:
        _bound_depth(text.encode("utf-8", "surrogatepass"), max_depth)
    value = _quick(text)
    if value is not _UNSURE:
        return value
    return _slow(text)


def loads_strict_utf8(data: bytes, *, max_depth: int | None = None) -> Any:
    """:func:`loads_strict` of the UTF-8 text ``data`` (a request body as it arrived),
    without decoding it to ``str`` first when msgspec's reading is certain.

    Raises :class:`NotStrictJSON`, or ``UnicodeDecodeError`` for bytes that are not
    UTF-8 (as ``data.decode("utf-8")`` would).
    """
    marks = data.translate(None, _NOT_COUNTED)
    if max_depth is not None:
        _bound_depth(data, max_depth, marks.count(b"[") + marks.count(b"{"))
    value = _quick(data, marks.count(b":"))
    if value is not _UNSURE:
        return value
    return _slow(data.decode("utf-8"))


def _bound_depth(data: bytes, max_depth: int, openers: int | None = None) -> None:
    # The count of openers bounds the depth: most texts need nothing more.
    if openers is None:
        openers = data.count(b"[") + data.count(b"{")
    if openers > max_depth and nesting_depth(data) > max_depth:
        raise NotStrictJSON(f"nested more than {max_depth} levels deep")


def _slow(text: str) -> Any:
    """The reading by ``json`` with the hooks, which words every refusal."""
    problem: str
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        # exc.msg is a fixed phrase; exc.doc (the input) is deliberately not used.
        problem = f"line {exc.lineno}, column {exc.colno}"
    except _DuplicateKey:
        problem = "a key is repeated within one object"
    except _Constant:
        problem = "NaN and Infinity are not JSON"
    except RecursionError:
        problem = "nested too deeply"
    except ValueError:
        # An integer beyond the interpreter's digit limit; the message would quote it.
        problem = "a number is too long"
    raise NotStrictJSON(problem)
