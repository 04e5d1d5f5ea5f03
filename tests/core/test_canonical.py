"""canonical_json is RFC 8785, byte for byte the ``rfc8785`` package, on its domain."""

from __future__ import annotations

import datetime
import math
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from replay_actor import RequestError, canonical_json
from replay_actor._canonical import jcs_float

MAX = 2**53 - 1

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-MAX, max_value=MAX)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=True, width=64)
    | st.text()
)
keys = st.text() | st.sampled_from(["a", "\U0001f600", "\uff61", "\U00010000x", "\x00", "é"])
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(keys, children, max_size=5),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_matches_rfc8785(value: Any) -> None:
    assert canonical_json(value) == rfc8785.dumps(value)


@settings(max_examples=200, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_floats_match_rfc8785(value: float) -> None:
    assert jcs_float(value) == rfc8785.dumps(value)


@pytest.mark.parametrize(
    "value",
    [
        1.0,
        -0.0,
        1e21,
        1e-7,
        5e-324,
        1e16,
        123456789012345680000.0,
        0.1,
        -1.5e-10,
        1.7976931348623157e308,
        {"\U0001f600": 1, "\uff61": 2, "a": 3},
        {"b": {"\U00010000": [1.0, 2.5]}, "a": None},
        '\x00\x1f\x7f\u2028"\\',
        {"": ""},
        [],
        {},
        MAX,
        -MAX,
        (1, 2, [3]),
    ],
)
def test_tricky_values(value: Any) -> None:
    assert canonical_json(value) == rfc8785.dumps(value)


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ({"a": {1, 2}}, "$.a"),
        ({"a": [datetime.datetime(2024, 1, 1)]}, "$.a[0]"),
        ({"a": b"x"}, "$.a"),
        ({"a": {1: "x"}}, "$.a"),
        ({"a": 2**53}, "$.a"),
        ({"a": -(2**53)}, "$.a"),
        ({"a": math.nan}, "$.a"),
        ({"a": math.inf}, "$.a"),
        ({"a": "\ud800"}, "$.a"),
        ({"a": {"\udc00": 1}}, "$.a"),
        ({"a": frozenset()}, "$.a"),
        ({"a": object()}, "$.a"),
    ],
)
def test_domain_errors_name_the_path(value: Any, where: str) -> None:
    with pytest.raises(RequestError) as info:
        canonical_json(value)
    assert isinstance(info.value, ValueError)
    assert where in str(info.value)


def test_too_deep_is_a_request_error() -> None:
    value: Any = []
    for _ in range(100_000):
        value = [value]
    with pytest.raises(RequestError, match="deep"):
        canonical_json(value)


def test_top_level_scalars() -> None:
    for value in (None, True, False, 0, "x", 2.5):
        assert canonical_json(value) == rfc8785.dumps(value)
    with pytest.raises(RequestError):
        canonical_json({1, 2})


def test_enum_and_subclass_values_hash_as_their_json_value() -> None:
    """A str Enum is its value, not ``str(member)`` ("Cls.NAME"), on every path: the
    fast typed check (no tuple around) and the patching path (a tuple forces it)."""
    import enum
    from collections import OrderedDict

    class Colour(str, enum.Enum):  # noqa: UP042 - the mixin, whose str() is "Colour.RED"
        RED = "red"

    class Level(enum.IntEnum):
        HIGH = 3

    plain: dict[str, Any] = {"c": "red", "k": {"red": 1}, "l": 3, "o": {"b": 1, "a": 2}}
    fancy = {"c": Colour.RED, "k": {Colour.RED: 1}, "l": Level.HIGH, "o": OrderedDict(b=1, a=2)}
    assert canonical_json(fancy) == canonical_json(plain) == rfc8785.dumps(plain)
    with_tuple = dict(fancy, t=(1, 2))
    assert canonical_json(with_tuple) == rfc8785.dumps(dict(plain, t=[1, 2]))
