"""RFC 8785 (JSON Canonicalization Scheme) encoding, byte-identical to the reference.

``canonical_json`` is the one place that decides which bytes a JSON value hashes to.
It is built on msgspec's sorted encoder, whose output already agrees with JCS for
strings (same escapes, lowercase ``\\u00xx``), integers, literals and key order within
the Basic Multilingual Plane. Two things differ and are patched here, in one pass over
the containers (strings are never walked, so a prompt's bulk costs nothing extra):

- floats: JCS prints numbers as ECMAScript's ``Number.prototype.toString`` does
  (``1.0`` -> ``1``, ``1e21`` -> ``1e+21``, ``1e16`` -> ``10000000000000000``);
  each float is replaced by a ``msgspec.Raw`` holding its JCS text;
- key order: JCS sorts keys by UTF-16 code units, msgspec by code points; the two
  disagree only for keys outside the BMP, so only an object holding such a key is
  encoded here by hand (as a ``Raw``).

The same pass enforces the domain: dicts with string keys, lists, tuples, str, int
within +-(2^53 - 1), finite floats, bool and None; anything else raises ``RequestError``
with the JSON path of the offending value.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from itertools import islice
from typing import Annotated, Any, Final, Union

import msgspec

from ._errors import RequestError

__all__ = [
    "MAX_SAFE_INTEGER",
    "canonical_each",
    "canonical_json",
    "clean_as_they_are",
    "jcs_float",
    "needs_key_reorder",
    "prepare",
    "encode_prepared",
]

#: Integers beyond this magnitude are not exactly representable as an IEEE double,
#: which is what RFC 8785 numbers are.
MAX_SAFE_INTEGER: Final = 2**53 - 1

_encode: Final[Callable[[Any], bytes]] = msgspec.json.Encoder(order="sorted").encode
_Raw: Final = msgspec.Raw


class _Invalid(Exception):
    """Internal: the value is outside the JSON domain; ``_diagnose`` says where."""


@functools.lru_cache(maxsize=1024)
def jcs_float(value: float) -> bytes:
    """Format a finite float as ECMAScript's Number.prototype.toString (RFC 8785 §3.2.2.3).

    Python's ``repr`` already yields the shortest digit string that round-trips (and the
    closest one when several do), which is what ECMAScript requires; only the layout of
    digits and exponent differs.
    """
    if value != value or value in (math.inf, -math.inf):
        raise _Invalid
    if value == 0.0:
        return b"0"  # -0.0 included: ECMAScript prints it as "0"
    text = repr(value)
    sign = ""
    if text[0] == "-":
        sign = "-"
        text = text[1:]
    mantissa, _, exp_text = text.partition("e")
    exponent = int(exp_text) if exp_text else 0
    int_part, _, frac_part = mantissa.partition(".")
    all_digits = int_part + frac_part
    digits = all_digits.lstrip("0")
    stripped = digits.rstrip("0")
    trailing = len(digits) - len(stripped)
    digits = stripped
    k = len(digits)
    # ECMAScript's n: the value is digits x 10^(n - k).
    n = exponent - len(frac_part) + trailing + k
    if k <= n <= 21:
        out = digits + "0" * (n - k)
    elif 0 < n <= 21:
        out = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        out = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        exp_out = f"e+{e}" if e > 0 else f"e-{-e}"
        out = digits + exp_out if k == 1 else digits[0] + "." + digits[1:] + exp_out
    return (sign + out).encode("ascii")


def _utf16_key(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def _has_astral(key: str) -> bool:
    return not key.isascii() and any(ord(ch) > 0xFFFF for ch in key)


def _encode_astral_object(obj: dict[str, Any]) -> msgspec.Raw:
    """Encode an object with a non-BMP key, keys ordered by UTF-16 code units."""
    parts = [_encode(key) + b":" + _encode(obj[key]) for key in sorted(obj, key=_utf16_key)]
    return _Raw(b"{" + b",".join(parts) + b"}")


def _prep_dict(obj: dict[Any, Any]) -> Any:
    out: dict[str, Any] | None = None
    astral = False
    for index, (key, item) in enumerate(obj.items()):
        new_key = key
        if type(key) is not str:
            if not isinstance(key, str):
                raise _Invalid
            new_key = str.__str__(key)  # a str subclass (a str Enum too): its text
        if not astral and not new_key.isascii() and _has_astral(new_key):
            astral = True
        new = _prep(item)
        if out is None and (new is not item or new_key is not key):
            # First change: copy what came before; the caller's dict is never mutated.
            out = dict(islice(obj.items(), index))
        if out is not None:
            out[new_key] = new
    result = obj if out is None else out
    if astral:
        return _encode_astral_object(result)
    return result


def _prep_list(seq: list[Any] | tuple[Any, ...]) -> Any:
    out: list[Any] | None = None
    for index, item in enumerate(seq):
        new = _prep(item)
        if out is None and new is not item:
            out = list(seq[:index])
        if out is not None:
            out.append(new)
    return seq if out is None else out


def _prep(value: Any) -> Any:
    t = type(value)
    if t is str or t is bool or value is None:
        return value
    if t is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return value
        raise _Invalid
    if t is float:
        return _Raw(jcs_float(value))
    if t is dict:
        return _prep_dict(value)
    if t is list or t is tuple:
        return _prep_list(value)
    return _prep_subclass(value)


def _prep_subclass(value: Any) -> Any:
    """``_prep`` of a value whose type is no JSON type itself (the rare case, apart so
    that the exact types above stay a few identity checks): subclasses of the JSON types
    (IntEnum, str-Enum, OrderedDict, ...) hash as their plain JSON value; everything
    else is outside the domain."""
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return str.__str__(value)  # not str(): a str Enum would give "Cls.NAME"
    if isinstance(value, int):
        return _prep(int(value))
    if isinstance(value, float):
        return _prep(float(value))
    if isinstance(value, dict):
        return _prep_dict(dict(value))
    if isinstance(value, list | tuple):
        return _prep_list(list(value))
    raise _Invalid


_join: Final = "".join


def _clean(obj: dict[Any, Any] | list[Any]) -> bool:
    """Fast check-only pass: True when ``obj`` needs no patching and is in the domain.

    ``"".join`` checks in C that every key is a str (TypeError otherwise) and, with
    ``isascii``, that none can sort differently under UTF-16. A False answer only sends
    the value down the slower patching path, which decides precisely.
    """
    if type(obj) is dict:
        try:
            if not _join(obj).isascii():
                return False
        except TypeError:
            return False
        values: Any = obj.values()
    else:
        values = obj
    for item in values:
        t = type(item)
        if t is str:
            continue
        if t is dict or t is list:
            if not _clean(item):
                return False
        # Any other clean value is a scalar: a safe integer, a bool or None (the bounds
        # as two plain comparisons: a chained one costs this walk about 1%).
        elif not (
            (t is int and item <= MAX_SAFE_INTEGER and item >= -MAX_SAFE_INTEGER)
            or t is bool
            or item is None
        ):
            return False
    return True


_SafeInt = Annotated[int, msgspec.Meta(ge=-MAX_SAFE_INTEGER, le=MAX_SAFE_INTEGER)]
#: How deep ``_fast_clean``'s typed check reaches; each level doubles the type tree.
_FAST_DEPTH: Final = 9


def _free_type(depth: int) -> Any:
    value: Any = Union[None, bool, _SafeInt, str]  # noqa: UP007 - built at run time
    for _ in range(depth):
        value = Union[None, bool, _SafeInt, str, list[value], dict[str, value]]  # noqa: UP007
    return dict[str, value]


# A Struct wraps the type so msgspec builds its (large) type tree once, not per call.
_FreeObject: Final = msgspec.defstruct("_FreeObject", [("v", _free_type(_FAST_DEPTH))])
_FreeObjects: Final = msgspec.defstruct("_FreeObjects", [("v", list[_free_type(_FAST_DEPTH)])])  # type: ignore[misc]
_ASTRAL_BYTES: Final = re.compile(rb"[\xf0-\xf4]")


def _fast_clean(obj: dict[Any, Any]) -> bool:
    """True when ``obj`` is in the JSON domain without floats, checked in C.

    msgspec's typed conversion checks key and value types, integer bounds and depth; it
    also turns sets and tuples into lists, so the copy is compared with the original
    (in C): any such conversion makes them differ and sends ``obj`` the slow way. Key
    order under UTF-16 is not checked here (see ``needs_key_reorder``).
    """
    try:
        converted = msgspec.convert({"v": obj}, _FreeObject).v  # type: ignore[attr-defined]
    except msgspec.ValidationError:
        return False
    return bool(converted == obj)


def _fast_clean_all(objs: list[dict[str, Any]]) -> bool:
    """``_fast_clean`` for several dicts in one conversion (e.g. every tool's schema)."""
    try:
        converted = msgspec.convert({"v": objs}, _FreeObjects).v  # type: ignore[attr-defined]
    except msgspec.ValidationError:
        return False
    return bool(converted == objs)


def needs_key_reorder(encoded: bytes) -> bool:
    """True if ``encoded`` holds a character outside the BMP (maybe in a key, whose order
    msgspec and RFC 8785 disagree on): the value must be prepared with ``fast=False``."""
    return not encoded.isascii() and _ASTRAL_BYTES.search(encoded) is not None


def prepare(value: Any, where: str = "$", *, fast: bool = True) -> Any:
    """Check ``value`` is in the JSON domain and patch it for msgspec's sorted encoder.

    Returns ``value`` itself when nothing needed patching (the common case), else a
    copy of the containers on the path to each patched float or astral-keyed object.
    Raises ``RequestError`` naming the JSON path of the first offending value.

    ``fast`` lets a dict be checked by ``_fast_clean``, which does not look at key
    order: the caller must then check the encoding with ``needs_key_reorder`` and, if
    it says so, prepare again with ``fast=False``.
    """
    try:
        if (
            type(value) is dict
            and fast
            # A float is sure to fail the typed check: skip it (params, mostly).
            and float not in set(map(type, value.values()))
            and _fast_clean(value)
        ):
            return value
        if (type(value) is dict or type(value) is list) and _clean(value):
            return value
        return _prep(value)
    except _Invalid:
        pass
    except RecursionError:
        raise RequestError(f"value nests too deeply at {where}") from None
    raise RequestError(_diagnose(value, where))


def canonical_json(value: Any) -> bytes:
    """Return the RFC 8785 canonical JSON encoding of ``value``.

    Accepts dicts with string keys, lists, tuples, str, int within +-(2^53 - 1),
    finite floats, bool and None; anything else raises ``RequestError``.
    """
    return _canonical_at(value, "$")


def _canonical_at(value: Any, where: str) -> bytes:
    encoded = encode_prepared(prepare(value, where), value, where)
    if needs_key_reorder(encoded):
        encoded = encode_prepared(prepare(value, where, fast=False), value, where)
    return encoded


def canonical_each(
    values: list[Any], where: Callable[[int], str]
) -> tuple[msgspec.Raw | None, ...]:
    """The canonical bytes of each non-empty dict or list in ``values``.

    Item ``i`` is ``canonical_json(values[i])`` as a ``msgspec.Raw``, or None when
    ``values[i]`` is not a non-empty dict or list (nothing to canonicalise: the caller
    keeps it as it is). Errors are ``RequestError`` naming the path ``where(i)``.
    """
    return tuple(_canonical_one(value, where, i) for i, value in enumerate(values))


def clean_as_they_are(values: list[Any]) -> bool:
    """True when msgspec's sorted encoding of ``values`` is already RFC 8785, key order
    aside: every non-empty container among them is a dict in the JSON domain without a
    float, checked at once in C (several tools' schemas). The caller must still check
    the encoding with ``needs_key_reorder``."""
    dicts = []
    for value in values:
        if type(value) is dict:
            if value:
                if float in set(map(type, value.values())):
                    return False  # sure to fail the typed check (params, mostly)
                dicts.append(value)
        elif type(value) is list and value:
            return False
    return not dicts or _fast_clean_all(dicts)


def _canonical_one(value: Any, where: Callable[[int], str], i: int) -> msgspec.Raw | None:
    if (type(value) is dict or type(value) is list) and value:
        return _Raw(_canonical_at(value, where(i)))
    return None


def encode_prepared(prepared: Any, original: Any, where: str = "$") -> bytes:
    """Encode a value already passed through ``prepare`` (or a Struct holding such)."""
    try:
        return _encode(prepared)
    except (UnicodeEncodeError, TypeError):
        # msgspec refuses lone surrogates, which is what JCS requires, and types it
        # cannot encode (a UserDict passes the typed check: it equals its dict); say where.
        pass
    raise RequestError(_diagnose(original, where))


def _diagnose(value: Any, where: str) -> str:
    """Walk ``value`` slowly, with paths, and describe its first problem."""
    stack: list[tuple[Any, str, int]] = [(value, where, 0)]
    while stack:
        item, path, depth = stack.pop()
        if depth > 10_000:
            return f"value nests too deeply at {path}"
        if isinstance(item, msgspec.Raw):
            continue  # already canonical: checked when it was made
        if isinstance(item, msgspec.Struct):
            fields = msgspec.structs.asdict(item)
            stack.extend((fields[n], f"{path}.{n}", depth + 1) for n in reversed(list(fields)))
        elif isinstance(item, dict):
            problem = _key_problem(item, path)
            if problem is not None:
                return problem
            stack.extend((item[k], f"{path}.{k}", depth + 1) for k in reversed(list(item)))
        elif isinstance(item, list | tuple):
            stack.extend((item[i], f"{path}[{i}]", depth + 1) for i in range(len(item) - 1, -1, -1))
        else:
            problem = _scalar_problem(item, path)
            if problem is not None:
                return problem
    return f"value is not JSON at {where}"  # pragma: no cover - prepare found a problem


def _key_problem(item: dict[Any, Any], path: str) -> str | None:
    for key in item:
        if not isinstance(key, str):
            return f"object key of type {type(key).__name__} at {path}"
        if not _utf8(key):
            return f"object key with a lone surrogate at {path}"
    return None


def _utf8(text: str) -> bool:
    """Whether ``text`` is UTF-8 encodable (holds no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _scalar_problem(item: Any, path: str) -> str | None:
    """What is wrong with a value that is not a container, or None."""
    problem: str | None = None
    if isinstance(item, bool) or item is None:
        pass
    elif isinstance(item, str):
        problem = None if _utf8(item) else "string with a lone surrogate"
    elif isinstance(item, int):
        safe = -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER
        problem = None if safe else "integer outside +-(2**53 - 1)"
    elif isinstance(item, float):
        problem = None if math.isfinite(item) else "non-finite number"
    else:
        problem = f"value of type {type(item).__name__} is not JSON"
    return None if problem is None else f"{problem} at {path}"
