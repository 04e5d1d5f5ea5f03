"""Property tests of the vendor mappings: stable hashes, and only documented errors.

Random conversations in each vendor's shape map to a neutral request whose hash does not
depend on key order or on a JSON round trip; arbitrary JSON bodies either map or raise
``RequestError`` (never another exception).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from replay_actor import RequestError, request_hash
from replay_actor.vendors.anthropic import messages as vendor_anthropic
from replay_actor.vendors.openai import chat as vendor_openai
from replay_actor.vendors.openai.responses import remembering as OpenAIResponses
from replay_actor.vendors.openai.responses import to_body as responses_to_body

text = st.text(max_size=20)
json_leaf = st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | text
json_value = st.recursive(
    json_leaf | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
arguments = st.dictionaries(st.sampled_from(["city", "days", "unit"]), json_leaf, max_size=3)
# Non-empty part lists: an empty one after tool results has no Anthropic form of its own.
content = text | st.lists(
    st.fixed_dictionaries({"type": st.just("text"), "text": text}), min_size=1, max_size=2
)


@st.composite
def openai_body(draw: st.DrawFn) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    if draw(st.booleans()):
        messages.append(
            {"role": draw(st.sampled_from(["system", "developer"])), "content": draw(content)}
        )
    for i in range(draw(st.integers(1, 4))):
        messages.append({"role": "user", "content": draw(content)})
        if draw(st.booleans()):
            call = {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": "get_weather", "arguments": json.dumps(draw(arguments))},
            }
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": draw(text)})
    body: dict[str, Any] = {"model": draw(text), "messages": messages}
    if draw(st.booleans()):
        body["tools"] = [
            {
                "type": "function",
                "function": {"name": "get_weather", "parameters": {"type": "object"}},
            }
        ]
        body["tool_choice"] = draw(st.sampled_from(["auto", "none", "required"]))
    for key in draw(st.sets(st.sampled_from(["temperature", "seed", "top_p", "stop"]))):
        body[key] = draw(text if key == "stop" else st.integers(0, 10))
    return body


def _shuffled(value: Any, draw: Callable[[Any], Any]) -> Any:
    if isinstance(value, dict):
        keys = draw(st.permutations(list(value)))
        return {k: _shuffled(value[k], draw) for k in keys}
    if isinstance(value, list):
        return [_shuffled(v, draw) for v in value]
    return value


@settings(max_examples=150, deadline=None)
@given(openai_body(), st.data())
def test_openai_mapping_is_stable(body: dict[str, Any], data: st.DataObject) -> None:
    first = request_hash(vendor_openai.read_body(body).request)
    again = request_hash(vendor_openai.read_body(json.loads(json.dumps(body))).request)
    shuffled = _shuffled(body, data.draw)
    assert first == again == request_hash(vendor_openai.read_body(shuffled).request)
    # The body is not changed by being read.
    assert json.dumps(body, sort_keys=True) == json.dumps(shuffled, sort_keys=True)


@settings(max_examples=150, deadline=None)
@given(openai_body())
def test_the_anthropic_form_of_a_conversation_hashes_alike(body: dict[str, Any]) -> None:
    """Every generated conversation said through the Anthropic shape (written with the
    live adapter's mapping) hashes as the OpenAI body does."""
    neutral = vendor_openai.read_body(body).request
    anthropic_body = vendor_anthropic.to_body(neutral, "claude")
    if "max_tokens" not in neutral.get("params", {}):
        neutral = {**neutral, "params": {**neutral.get("params", {}), "max_tokens": 4096}}
    assert request_hash(vendor_anthropic.read_body(anthropic_body).request) == request_hash(neutral)


@settings(max_examples=150, deadline=None)
@given(openai_body())
def test_the_responses_form_of_a_conversation_hashes_alike(body: dict[str, Any]) -> None:
    """Every generated conversation said as Responses input items (written with the live
    adapter's mapping) hashes as the OpenAI chat body does (``stop`` aside: the
    Responses API has none)."""
    neutral = vendor_openai.read_body(body).request
    assume("stop" not in neutral.get("params", {}))
    responses_body = responses_to_body(neutral, "gpt-5")
    read = OpenAIResponses().read_body(responses_body).request
    assert request_hash(read) == request_hash(neutral)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "input",
                "instructions",
                "text",
                "reasoning",
                "max_output_tokens",
                "previous_response_id",
                "messages",
                "tools",
                "tool_choice",
                "system",
                "stop",
                "n",
                "model",
                "max_tokens",
                "stream",
            ]
        ),
        json_value,
        max_size=5,
    )
)
def test_arbitrary_bodies_raise_only_request_error(body: dict[str, Any]) -> None:
    for vendor in (vendor_openai, vendor_anthropic, OpenAIResponses()):
        try:
            request_hash(vendor.read_body(body).request)
        except RequestError:
            pass


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(["role", "content", "tool_calls", "tool_call_id", "name"]),
            json_value,
            max_size=4,
        ),
        min_size=1,
        max_size=3,
    )
)
def test_arbitrary_messages_raise_only_request_error(messages: list[Any]) -> None:
    for vendor in (vendor_openai, vendor_anthropic):
        try:
            request_hash(vendor.read_body({"messages": messages}).request)
        except RequestError:
            pass


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(
                ["type", "role", "content", "call_id", "name", "arguments", "output", "id"]
            ),
            json_value | st.sampled_from(["message", "function_call", "function_call_output"]),
            max_size=5,
        ),
        min_size=1,
        max_size=3,
    )
)
def test_arbitrary_responses_items_raise_only_request_error(items: list[Any]) -> None:
    try:
        request_hash(OpenAIResponses().read_body({"input": items}).request)
    except RequestError:
        pass
