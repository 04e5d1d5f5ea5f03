"""``loads_strict``: msgspec's quick reading gives exactly what the full strict reading
(``json`` with a hook per rule) gives, value or refusal, whatever the text; a repeated key
is refused however it is spelled."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest

from replay_actor._strict_json import (
    MAX_BODY_DEPTH,
    NotStrictJSON,
    loads_strict,
    loads_strict_utf8,
    nesting_depth,
)


class _Refused(Exception):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise _Refused("repeated")
    return result


def _constant(_: str) -> Any:
    raise _Refused("constant")


def reference(text: str) -> tuple[str, Any]:
    """The rules read the slow way only: ("value", v) or ("refused", None)."""
    try:
        return "value", json.loads(text, object_pairs_hook=_pairs, parse_constant=_constant)
    except (ValueError, _Refused, RecursionError):
        return "refused", None


def ours(text: str) -> tuple[str, Any]:
    try:
        value = loads_strict(text)
    except NotStrictJSON:
        value = _Refused
    # The reading of the same text as UTF-8 bytes (a request body as it arrives) is the
    # same, value or refusal (a text no UTF-8 can spell is refused as not UTF-8).
    try:
        as_bytes = loads_strict_utf8(text.encode("utf-8", "surrogatepass"))
    except (NotStrictJSON, UnicodeDecodeError):
        as_bytes = _Refused
    assert same(as_bytes, value)
    return ("refused", None) if value is _Refused else ("value", value)


def same(a: Any, b: Any) -> bool:
    """Equal, with the types: 1 and 1.0 and True are three values here, and -0.0 is not 0.0."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return bool(a == b)


CASES = [
    '{"a": 1, "b": [true, false, null], "c": {"d": "x:y", "e": -0.0, "f": -0}}',
    '{"a": 1, "a": 2}',
    '{"a": {"b": 1, "b": 1}}',
    '[{"k": "v"}, {"k": "v", "k": "w"}]',
    # A repeated key whose colon is made up by an escaped colon elsewhere.
    '{"a": "x", "a": "y", "b": "\\u003a"}',
    '{"\\u0061": 1, "a": 2}',
    '{"a:": 1, "a:": 2}',
    '{"a" : 1 , "b" :2}',
    '{"a": "\\":\\"", "b": "\\\\"}',
    "NaN",
    "[Infinity]",
    '{"x": -Infinity}',
    "123456789012345678901234567890",
    "-9223372036854775809",
    "1e400",
    "[1e-400, 2.5e-324, 1.7976931348623157e308, 0.1, 1.0, 1E2, -0]",
    '"\\ud800"',
    '"\\udc00x"',
    '"a\\u0000b"',
    '"a\x01b"',
    '"\x7f"',
    " [1] ",
    "[1] x",
    "\ufeff[1]",
    "[1,]",
    '{"a":1,}',
    "",
    "   ",
    "1" * 5000,
    '"' + "é" * 100 + '"',
    "\t\n\r [1]",
    "\u00a0[1]",
    '{"a": "\u2028"}',
    "[" * 3000 + "]" * 3000,
]


@pytest.mark.parametrize("text", CASES)
def test_the_quick_reading_agrees_with_the_strict_rules(text: str) -> None:
    mine, theirs = ours(text), reference(text)
    assert mine[0] == theirs[0]
    assert same(mine[1], theirs[1])


def test_every_repeated_key_is_refused_however_it_is_spelled() -> None:
    for text in CASES[1:7]:
        with pytest.raises(NotStrictJSON, match="repeated"):
            loads_strict(text)


def _mutations(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    base = json.dumps(
        {
            "model": "m",
            "messages": [{"role": "user", "content": 'a: b \\ " c'}, {"role": "tool"}],
            "params": {"temperature": 0.7, "n": 1, "stop": [":", "::"]},
        }
    )
    alphabet = [*'{}[]":,\\ u0123abcNaI-.eE\n', "\\u003a", "\\u0022", '"a":1,']
    out = []
    for _ in range(count):
        text = list(base)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(text) + 1)
            op = rng.random()
            if op < 0.4:
                text.insert(i, rng.choice(alphabet))
            elif op < 0.7 and i < len(text):
                del text[i]
            elif i < len(text):
                text[i] = rng.choice(alphabet)
        out.append("".join(text))
    # Duplicates made on purpose: a key copied into its own object.
    for _ in range(count // 4):
        obj = json.loads(base)
        key = rng.choice(list(obj))
        spelled = json.dumps(obj)
        out.append(spelled[:-1] + f", {json.dumps(key)}: {json.dumps(obj[key])}" + "}")
    return out


@pytest.mark.parametrize("seed", range(4))
def test_mutated_bodies_read_alike_both_ways(seed: int) -> None:
    texts = _mutations(seed, 1500)
    values = 0
    for text in texts:
        mine, theirs = ours(text), reference(text)
        assert mine[0] == theirs[0], text
        assert same(mine[1], theirs[1]), text
        values += mine[0] == "value"
    # Both kinds occur: the corpus tests values and refusals, not only one of them.
    assert 0 < values < len(texts)


@pytest.mark.parametrize(
    "data",
    [b'"\xff"', b'{"a": "\xed\xa0\x80"}', b'["\xc0\xaf"]', b'{"\xe9": 1}', b'"\xf4\x90\x80\x80"'],
)
def test_bytes_that_are_not_utf8_are_refused_as_such(data: bytes) -> None:
    with pytest.raises(UnicodeDecodeError):
        loads_strict_utf8(data, max_depth=MAX_BODY_DEPTH)


def test_a_plain_body_is_read_quickly_and_a_repeat_is_not() -> None:
    from replay_actor._strict_json import _UNSURE, _quick

    body = json.dumps({"messages": [{"role": "user", "content": "a: b"}], "n": 1})
    assert same(_quick(body), json.loads(body))
    assert _quick('{"a": 1, "a": 2}') is _UNSURE
    assert _quick('{"a": "\\u003a"}') is _UNSURE  # an escape: the slow reading decides
    # The same for a body as it arrived (bytes), which is searched for escapes apart.
    assert same(_quick(body.encode()), json.loads(body))
    assert _quick(b'{"a": 1, "a": 2}') is _UNSURE
    # A key dropped, and its colon made up by an escaped one: counted alone, the colons
    # would agree; the escape is what sends it to the slow reading.
    assert _quick(b'{"a": 1, "a": "\\u003a"}') is _UNSURE


def deep(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.timeout(120)
def test_the_body_depth_is_measured_without_recursion() -> None:
    assert nesting_depth(b'{"a":[1,{"b":"]]]}}"}],"c":"\\"["}') == 3
    assert nesting_depth(deep(300_000).encode()) == 300_000
    assert loads_strict(deep(MAX_BODY_DEPTH), max_depth=MAX_BODY_DEPTH) is not None
    too_deep = deep(MAX_BODY_DEPTH + 1).encode()
    with pytest.raises(NotStrictJSON, match="nested more than"):
        loads_strict_utf8(too_deep, max_depth=MAX_BODY_DEPTH)
    assert isinstance(
        loads_strict_utf8(deep(MAX_BODY_DEPTH).encode(), max_depth=MAX_BODY_DEPTH), list
    )
    # A body of plain requests, deeper than 512 only in its count of brackets, passes.
    wide = "[" + ",".join(["[]"] * 2000) + "]"
    assert len(loads_strict(wide, max_depth=MAX_BODY_DEPTH)) == 2000
