"""Request validation, normalisation and hash (docs/request.md)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
import rfc8785

from replay_actor import Message, Request, RequestError, Tool, ToolCall, request_hash
from replay_actor._request import (
    HASHED,
    canonical_request,
    normalise_request,
    request_hash_in_turn,
)

BASE: dict[str, Any] = {
    "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "weather in Paris?"},
        {
            "role": "assistant",
            "tool_calls": [{"id": "c1", "name": "weather", "arguments": '{"city":"Paris"}'}],
        },
        {"role": "tool", "content": "sunny", "tool_call_id": "c1"},
    ],
    "tools": [
        {
            "name": "weather",
            "description": "forecast",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"maximum": 7}},
            },
        }
    ],
    "params": {"temperature": 0.7, "max_tokens": 64},
}


def test_hash_is_sha256_of_rfc8785() -> None:
    expected = "sha256:" + hashlib.sha256(rfc8785.dumps(BASE)).hexdigest()
    assert request_hash(BASE) == expected
    assert canonical_request(BASE) == rfc8785.dumps(BASE)


def test_struct_and_mapping_hash_alike() -> None:
    struct = Request(
        messages=[
            Message(role="system", content="be brief"),
            Message(role="user", content="weather in Paris?"),
            Message(
                role="assistant",
                tool_calls=[ToolCall(id="c1", name="weather", arguments='{"city":"Paris"}')],
            ),
            Message(role="tool", content="sunny", tool_call_id="c1"),
        ],
        tools=[
            Tool(name="weather", description="forecast", parameters=BASE["tools"][0]["parameters"])
        ],
        params={"temperature": 0.7, "max_tokens": 64},
    )
    assert request_hash(struct) == request_hash(BASE)


def test_defaults_hash_as_absent() -> None:
    plain = {"messages": [{"role": "user", "content": "hi"}]}
    noisy: dict[str, Any] = {
        "messages": [{"role": "user", "content": "hi", "tool_calls": [], "name": None}],
        "tools": [],
        "params": {},
        "tool_choice": None,
        "response_format": None,
    }
    assert request_hash(plain) == request_hash(noisy)
    assert request_hash({"messages": [{"role": "user"}]}) == request_hash(
        {"messages": [{"role": "user", "content": None}]}
    )


def test_one_and_one_point_zero_hash_alike() -> None:
    one = {"messages": [{"role": "user", "content": "x"}], "params": {"temperature": 1}}
    other = {"messages": [{"role": "user", "content": "x"}], "params": {"temperature": 1.0}}
    assert request_hash(one) == request_hash(other)


def test_key_order_never_matters() -> None:
    reordered = {key: BASE[key] for key in reversed(list(BASE))}
    reordered["params"] = {"max_tokens": 64, "temperature": 0.7}
    assert request_hash(reordered) == request_hash(BASE)


def test_non_bmp_keys_in_free_fields() -> None:
    request: dict[str, Any] = {
        "messages": [{"role": "user", "content": "\U0001f600"}],
        "params": {"\U0001f600": 1, "\uff61": 2},
        "tools": [{"name": "t", "parameters": {"\U00010000": {"\uffff": 1}, "a": 2}}],
    }
    assert canonical_request(request) == rfc8785.dumps(request)


@pytest.mark.parametrize(
    ("request_value", "where"),
    [
        ({"messages": [{"role": "user"}], "extra": 1}, "extra"),
        ({"messages": []}, "messages"),
        ({}, "messages"),
        ({"messages": [{"role": "robot"}]}, "$.messages[0].role"),
        ({"messages": [{"role": "user", "colour": 1}]}, "colour"),
        ({"messages": [{"role": "user"}], "params": {"a": {1, 2}}}, "$.params.a"),
        ({"messages": [{"role": "user"}], "params": {"a": 2**60}}, "$.params.a"),
        ({"messages": [{"role": "user"}], "params": {"a": float("nan")}}, "$.params.a"),
        (
            {"messages": [{"role": "user"}], "tools": [{"name": "t", "parameters": {"a": b"x"}}]},
            "$.tools[0].parameters.a",
        ),
        (
            {"messages": [{"role": "user"}], "tools": [{"name": "t", "parameters": {"a": (1,)}}]},
            None,
        ),
        ({"messages": [{"role": "user", "content": [{"t": {1: 2}}]}]}, "$.messages[0].content"),
    ],
)
def test_invalid_requests_say_where(request_value: dict[str, Any], where: str | None) -> None:
    if where is None:  # a tuple is a JSON array: accepted, hashed like a list
        listed = {**request_value, "tools": [{"name": "t", "parameters": {"a": [1]}}]}
        assert request_hash(request_value) == request_hash(listed)
        return
    with pytest.raises(RequestError) as info:
        request_hash(request_value)
    assert isinstance(info.value, ValueError)
    assert where in str(info.value)


def test_not_a_mapping() -> None:
    with pytest.raises(RequestError):
        normalise_request([1, 2])  # type: ignore[arg-type]


def test_normalise_does_not_mutate_the_caller() -> None:
    request = {"messages": [{"role": "user"}], "params": {"t": 0.5, "n": [1.0]}}
    request_hash(request)
    assert request == {"messages": [{"role": "user"}], "params": {"t": 0.5, "n": [1.0]}}


def test_several_tools_are_checked_strictly() -> None:
    def request(parameters: dict[Any, Any]) -> dict[str, Any]:
        tools = [{"name": "a", "parameters": {"x": 1}}, {"name": "b", "parameters": parameters}]
        return {"messages": [{"role": "user"}], "tools": tools}

    for bad in ({"s": {1, 2}}, {"b": b"x"}, {"n": 2**53}, {1: 2}, {"f": float("inf")}):
        with pytest.raises(RequestError, match=r"\$\.tools\[1\]\.parameters"):
            request_hash(request(bad))
    assert request_hash(request({"t": (1, 2)})) == request_hash(request({"t": [1, 2]}))
    floats = request({"min": 1.0, "k": {"\U0001f600": 0.5, "a": 1}})
    assert canonical_request(floats) == rfc8785.dumps(floats)


@pytest.mark.parametrize("size", [0, 1, 2046, 2047, 2048, 4094, 4095, 20_000])
def test_the_hash_in_turn_is_the_same_hash_at_every_length(size: int) -> None:
    # Around hashlib's GIL-release size (2,048) and the piece length (2,047): the bytes
    # fed in pieces are the canonical bytes, whole, in order.
    request = {**BASE, "messages": [*BASE["messages"], {"role": "user", "content": "x" * size}]}
    expected = "sha256:" + hashlib.sha256(rfc8785.dumps(request)).hexdigest()
    assert request_hash_in_turn(request) == expected == request_hash(request)


@pytest.mark.parametrize(
    "request_",
    [
        {"kind": "embedding", "model": "e", "texts": ["a" * 3000, "b"]},
        {"kind": "completion", "prompt": "p" * 5000},
        {"kind": "count_tokens", "messages": [{"role": "user", "content": "c" * 2100}]},
        Request(messages=[Message(role="user", content="s" * 9000)]),
    ],
)
def test_the_hash_in_turn_agrees_for_every_kind(request_: Any) -> None:
    assert request_hash_in_turn(request_) == request_hash(request_)


def test_the_hash_in_turn_refuses_what_request_hash_refuses() -> None:
    with pytest.raises(RequestError) as plain:
        request_hash({"messages": "nope"})
    with pytest.raises(RequestError) as in_turn:
        request_hash_in_turn({"messages": "nope"})
    assert str(in_turn.value) == str(plain.value)


def test_the_hash_in_turn_reads_a_hash_handed_on() -> None:
    own = request_hash(BASE)
    token = HASHED.set((BASE, "sha256:" + "0" * 64))
    try:
        assert request_hash_in_turn(BASE) == "sha256:" + "0" * 64
        assert request_hash_in_turn(dict(BASE)) == own  # matched by identity only
    finally:
        HASHED.reset(token)
