"""The remembered configuration bytes of ``request_hash`` (replay_actor/_memo.Memo).

A request's configuration (tools, their schemas, params, response_format, tool_choice)
is canonicalised once and then remembered by its exact marshal image. These tests hash
each value several times (first sight, second sight when it is kept, then hits) and
check every time against the ``rfc8785`` package, so that a hit can never give other
bytes than the walk, and a refused value is refused on every call.
"""

from __future__ import annotations

import enum
import hashlib
import os
import signal
import threading
import time
from collections import UserDict
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from replay_actor import RequestError, request_hash
from replay_actor._memo import Memo
from replay_actor._request import canonical_request

MAX = 2**53 - 1
SIGHTS = 4  # first sight, second (kept), then hits


def request(params: Any = None, schema: Any = None, content: Any = None) -> dict[str, Any]:
    req: dict[str, Any] = {"messages": [{"role": "user", "content": content or "hello"}]}
    if params is not None:
        req["params"] = params
    if schema is not None:
        req["tools"] = [
            {"name": "a", "parameters": {"type": "object"}},
            {"name": "b", "parameters": schema},
        ]
    return req


def expected(req: dict[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(rfc8785.dumps(req)).hexdigest()


def assert_always_rfc8785(req: dict[str, Any]) -> None:
    for _ in range(SIGHTS):
        assert canonical_request(req) == rfc8785.dumps(req)
        assert request_hash(req) == expected(req)


def assert_always_refused(req: dict[str, Any], where: str) -> None:
    for _ in range(SIGHTS):  # errors are never remembered
        with pytest.raises(RequestError) as info:
            request_hash(req)
        assert where in str(info.value)


scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-MAX, max_value=MAX)
    | st.sampled_from([MAX, -MAX, 0, 1])
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([1.0, -0.0, 0.0, 1e21, 1e-7, 0.7, 5e-324])
    | st.text()
)
keys = st.text() | st.sampled_from(["a", "\U0001f600", "\uff61", "\U00010000x", "é"])
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4),
    max_leaves=20,
)
json_objects = st.dictionaries(keys, json_values, min_size=1, max_size=4)


@settings(max_examples=150, deadline=None)
@given(json_objects, json_objects)
def test_remembered_bytes_are_always_rfc8785(first: dict[str, Any], second: dict[str, Any]) -> None:
    """Whatever was seen before, a value's bytes are its own: params, a tool's schema
    and content parts, each hashed on every sight, interleaved with another value."""
    for one, other in ((first, second), (second, first)):
        assert_always_rfc8785(request(params=one))
        assert_always_rfc8785(request(schema=one))
        assert_always_rfc8785(request(params=other, schema=one, content=[one]))
        assert_always_rfc8785(request(params=one, schema=other))


@pytest.mark.parametrize(
    ("remembered", "then", "same_hash"),
    [
        ({"x": 1}, {"x": 1.0}, True),  # one JSON number: remembered or not
        ({"x": 1}, {"x": True}, False),  # True == 1 in Python, not in JSON
        ({"x": 0}, {"x": False}, False),
        ({"x": 0.0}, {"x": -0.0}, True),  # both print as 0
        ({"x": "1"}, {"x": 1}, False),
        ({"x": [1, 2]}, {"x": (1, 2)}, True),  # a tuple is a JSON array
        ({"x": [1]}, {"x": [[1]]}, False),
        ({"x": MAX}, {"x": MAX - 1}, False),
    ],
)
def test_a_remembered_value_never_answers_for_another(
    remembered: dict[str, Any], then: dict[str, Any], same_hash: bool
) -> None:
    def as_params(value: Any) -> dict[str, Any]:
        return request(params=value)

    def as_schema(value: Any) -> dict[str, Any]:
        return request(schema=value)

    for make in (as_params, as_schema):
        assert_always_rfc8785(make(remembered))
        assert_always_rfc8785(make(then))
        assert (request_hash(make(remembered)) == request_hash(make(then))) is same_hash


def test_subclasses_hash_as_their_json_value_on_every_sight() -> None:
    """marshal refuses subclasses, so they take the walk each time, and hash as the
    plain value (which may itself be remembered)."""

    class Colour(str, enum.Enum):  # noqa: UP042 - the mixin, whose str() is "Colour.RED"
        RED = "red"

    class Level(enum.IntEnum):
        HIGH = 3

    plain = {"c": "red", "l": 3, "k": {"red": 1}}
    fancy = {"c": Colour.RED, "l": Level.HIGH, "k": {Colour.RED: 1}}
    for _ in range(SIGHTS):
        assert request_hash(request(params=fancy)) == expected(request(params=plain))
        assert request_hash(request(schema=fancy)) == expected(request(schema=plain))


@pytest.mark.parametrize(
    ("remembered", "refused", "where"),
    [
        ({"n": MAX}, {"n": MAX + 1}, ".n"),  # 2**53: beyond the exact doubles
        ({"n": -MAX}, {"n": -(2**53)}, ".n"),
        ({"f": 1.5}, {"f": float("nan")}, ".f"),
        ({"f": 1.5}, {"f": float("inf")}, ".f"),
        ({"s": "\ud7ff"}, {"s": "\ud800"}, ".s"),  # a lone surrogate
        ({"k": {"a": 1}}, {"k": {"\udc00": 1}}, ".k"),
        ({"s": [1, 2]}, {"s": {1, 2}}, ".s"),  # a set is no JSON array
        ({"s": [1]}, {"s": frozenset([1])}, ".s"),
        ({"b": "x"}, {"b": b"x"}, ".b"),
        ({"m": {"a": 1}}, {"m": UserDict(a=1)}, ".m"),  # equal to its dict, not a dict
        ({"k": {"1": "x"}}, {"k": {1: "x"}}, ".k"),
    ],
)
def test_refused_values_are_refused_on_every_call_even_after_a_lookalike(
    remembered: dict[str, Any], refused: dict[str, Any], where: str
) -> None:
    assert_always_rfc8785(request(params=remembered))
    assert_always_refused(request(params=refused), "$.params" + where)
    assert_always_rfc8785(request(schema=remembered))
    assert_always_refused(request(schema=refused), "$.tools[1].parameters" + where)
    assert_always_refused(request(content=[refused]), "$.messages[0].content")


def test_a_lone_surrogate_in_a_message_is_refused_with_its_path() -> None:
    req = request(params={"t": 0.5})
    req["messages"].append({"role": "assistant", "content": "bad \ud800"})
    assert_always_refused(req, "$.messages[1].content")


def test_floats_are_patched_on_every_sight() -> None:
    params = {"a": 1.0, "b": 1e21, "c": 1e-7, "d": -0.0, "e": 0.7, "f": 123456789012345680000.0}
    assert_always_rfc8785(request(params=params, schema={"min": 2.0, "max": [0.5, 1e16]}))


def test_keys_outside_the_bmp_are_ordered_as_utf16_on_every_sight() -> None:
    """The astral check is a byte scan: a non-BMP character in a value is a false alarm
    (same bytes either way), one in a key reorders; one schema of several may need it."""
    astral_key = {"\U0001f600": 1, "\uff61": 2, "a": {"\U00010000": [1.0], "\uffff": 0}}
    astral_value = {"z": "\U0001f600", "a": "\uff61"}
    for value in (astral_key, astral_value):
        assert_always_rfc8785(request(params=value))
        assert_always_rfc8785(request(schema=value))
        assert_always_rfc8785(request(params={"t": 0.5}, schema=value, content=[value]))


def test_changing_a_remembered_schema_in_place_changes_the_hash() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"n": {"maximum": 10}}}
    req = request(params={"t": 0.5}, schema=schema)
    assert_always_rfc8785(req)
    schema["properties"]["n"]["maximum"] = 10.5
    assert_always_rfc8785(req)
    schema["properties"]["n"]["maximum"] = True
    assert_always_rfc8785(req)
    schema["properties"]["n"]["enum"] = {1, 2}
    assert_always_refused(req, "$.tools[1].parameters.properties.n.enum")
    del schema["properties"]["n"]["enum"]
    assert_always_rfc8785(req)


def test_fresh_dicts_with_the_same_content_hash_alike() -> None:
    """Requests built anew for every call (as frameworks do) find the remembered bytes."""
    hashes = {request_hash(request(params={"t": 0.5, "n": [1]}, schema={"x": 1})) for _ in range(5)}
    assert hashes == {expected(request(params={"t": 0.5, "n": [1]}, schema={"x": 1}))}


def test_threads_hashing_the_same_configuration_agree() -> None:
    schemas = [{"k": i, "f": i / 2, "\U0001f600": [i]} for i in range(8)]
    reqs = [request(params={"seed": i, "t": 0.7}, schema=schemas[i % 4]) for i in range(8)]
    want = [expected(req) for req in reqs]
    failures: list[str] = []

    def work() -> None:
        for _ in range(50):
            for req, hashed in zip(reqs, want, strict=True):
                if request_hash(req) != hashed:
                    failures.append(hashed)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    assert failures == []


# The memo itself.


def test_a_result_is_kept_from_the_second_sight() -> None:
    memo: Memo[bytes] = Memo(len, max_value=1000, max_bytes=10_000)
    calls: list[Any] = []

    def compute(value: Any) -> bytes:
        calls.append(value)
        return b"result"

    value = {"a": [1, 2.5, "x"]}
    assert memo(value, compute) == b"result"
    assert len(memo) == 0  # seen once: not kept
    assert memo(value, compute) == b"result"
    assert len(memo) == 1
    assert memo({"a": [1, 2.5, "x"]}, compute) == b"result"  # an equal, fresh value: a hit
    assert len(calls) == 2


def test_a_value_changed_while_computing_is_not_kept() -> None:
    """Another thread may change the caller's value while the walk reads it: the result
    must not be stored under the image of the value as it was before."""
    memo: Memo[bytes] = Memo(len, max_value=1000, max_bytes=10_000)
    value: dict[str, Any] = {"a": [1]}

    def compute(seen: Any) -> bytes:
        result = repr(seen).encode()
        seen["a"].append(len(seen["a"]))  # changed after it was read
        return result

    for _ in range(3):
        memo(value, compute)
    assert len(memo) == 0


def test_values_marshal_refuses_are_computed_each_time() -> None:
    memo: Memo[bytes] = Memo(len, max_value=1000, max_bytes=10_000)
    calls = 0

    def compute(value: Any) -> bytes:
        nonlocal calls
        calls += 1
        return b"x"

    for _ in range(3):
        memo({"a": UserDict()}, compute)
    assert calls == 3 and len(memo) == 0


def test_the_memo_is_bounded() -> None:
    memo: Memo[bytes] = Memo(len, max_value=200, max_bytes=2_000)
    for i in range(100):
        for _ in range(2):
            memo({"i": i, "pad": "x" * 50}, lambda v: b"r" * 20)
    assert 0 < len(memo) < 100
    big = {"pad": "x" * 500}  # over max_value: never kept
    for _ in range(3):
        memo(big, lambda v: b"r")
    assert len(memo) < 100
    memo.clear()
    assert len(memo) == 0


@pytest.mark.timeout(30)
@pytest.mark.usefixtures("no_leaks")
def test_a_child_forked_while_the_memo_is_locked_can_still_remember() -> None:
    """The memo's lock is new in a forked child, so a fork during another thread's
    update does not leave the child waiting forever."""
    memo: Memo[bytes] = Memo(len, max_value=1000, max_bytes=10_000)
    with memo._lock:  # held, as another thread would hold it at the moment of the fork
        pid = os.fork()
        if pid == 0:  # the child: keeping a result takes the lock
            code = 1
            try:
                for _ in range(2):
                    memo({"a": 1}, lambda value: b"r")
                code = 0 if len(memo) == 1 else 3
            finally:
                os._exit(code)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.02)
    else:
        os.kill(pid, signal.SIGKILL)  # ours, by PID
        os.waitpid(pid, 0)
        pytest.fail("the forked child blocked on the memo's lock")
    assert os.waitstatus_to_exitcode(status) == 0


def test_messages_with_and_without_content_parts_hash_as_rfc8785() -> None:
    """Most requests have only string contents (one conversion); one list of parts
    anywhere sends the request through the conversion that allows them."""
    parts = [{"type": "text", "text": "\U0001f600 look", "weight": 1.0}, {"type": "image"}]
    req: dict[str, Any] = {
        "messages": [
            {"role": "system", "content": "be brief \U0001f600"},
            {"role": "user", "content": parts},
            {"role": "assistant", "content": None, "name": "bot"},
            {"role": "user", "content": []},
        ],
        "params": {"t": 0.5},
    }
    normalised = dict(req, messages=list(req["messages"]))
    normalised["messages"][2] = {"role": "assistant", "name": "bot"}
    for _ in range(SIGHTS):
        assert canonical_request(req) == rfc8785.dumps(normalised)
    req["messages"][3]["content"] = [{"bad": {1: 2}}]
    assert_always_refused(req, "$.messages[3].content")
    req["messages"][3]["content"] = 7
    assert_always_refused(req, "$.messages[3].content")
