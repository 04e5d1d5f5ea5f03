"""A mutation fuzz of the new endpoints' ``read_body`` (embeddings, token counting, legacy
completions, Ollama): a valid body with any one value replaced by any JSON value maps to
a request that hashes, or raises ``RequestError`` — never another exception (a
``TypeError`` would be a 500 at the front door and a retried connection error in the
SDKs).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replay_actor import RequestError, request_hash
from replay_actor.vendors import make_vendor

text = st.text(max_size=8)
json_value = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=True, allow_infinity=True)
    | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=6,
)
CHAT = [{"role": "user", "content": "hi"}]
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
GEMINI_CONTENT = {"parts": [{"text": "a"}]}

#: (shape, path, a valid body).
VALID: list[tuple[str, str, dict[str, Any]]] = [
    (
        "openai-embeddings",
        "/v1/embeddings",
        {"model": "m", "input": ["a", "b"], "encoding_format": "base64", "dimensions": 4},
    ),
    (
        "openai-completions",
        "/v1/completions",
        {"model": "m", "prompt": "x", "max_tokens": 4, "stop": "\n", "stream": True},
    ),
    ("openai-input-tokens", "/v1/responses/input_tokens", {"model": "m", "input": "hi"}),
    (
        "anthropic-count-tokens",
        "/v1/messages/count_tokens",
        {"model": "m", "system": "s", "messages": CHAT, "tools": []},
    ),
    (
        "gemini-embed",
        "/v1beta/models/e:batchEmbedContents",
        {"requests": [{"model": "models/e", "content": GEMINI_CONTENT, "taskType": "X"}]},
    ),
    (
        "gemini-embed",
        "/v1beta/models/e:embedContent",
        {"content": GEMINI_CONTENT, "outputDimensionality": 3, "title": "t"},
    ),
    ("gemini-count-tokens", "/v1beta/models/g:countTokens", {"contents": [GEMINI_CONTENT]}),
    (
        "ollama",
        "/api/chat",
        {
            "model": "m",
            "messages": [
                *CHAT,
                {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {}}}]},
                {"role": "tool", "content": "r", "tool_name": "f"},
            ],
            "tools": [TOOL],
            "format": {"type": "object"},
            "options": {"num_predict": 3, "stop": "x"},
        },
    ),
    (
        "ollama-generate",
        "/api/generate",
        {"model": "m", "prompt": "p", "system": "s", "format": "json", "options": {"seed": 1}},
    ),
    ("ollama-embed", "/api/embed", {"model": "m", "input": "a", "truncate": True}),
]


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in ``value`` a value may be replaced (the root included)."""
    found = [at]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*at, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += _paths(item, (*at, i))
    return found


def _replaced(body: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    out = copy.deepcopy(body)
    holder = out
    for step in path[:-1]:
        holder = holder[step]
    holder[path[-1]] = value
    return out


def _check(name: str, path: str, body: Any) -> None:
    try:
        call = make_vendor(name).read_body(body, path)
    except RequestError:
        return
    try:
        request_hash(call.request)
    except RequestError:
        return


@pytest.mark.parametrize(("name", "path", "body"), VALID, ids=[f"{v[0]}{v[1]}" for v in VALID])
def test_the_valid_bodies_map_and_hash(name: str, path: str, body: dict[str, Any]) -> None:
    call = make_vendor(name).read_body(body, path)
    assert request_hash(call.request).startswith("sha256:")


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_a_mutated_body_maps_or_is_a_request_error(data: st.DataObject) -> None:
    name, path, body = data.draw(st.sampled_from(VALID))
    where = data.draw(st.sampled_from(_paths(body)))
    mutated = _replaced(body, where, data.draw(json_value))
    _check(name, path, mutated)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(VALID), st.dictionaries(text, json_value, max_size=2))
def test_an_extra_key_maps_or_is_a_request_error(
    valid: tuple[str, str, dict[str, Any]], extra: dict[str, Any]
) -> None:
    name, path, body = valid
    _check(name, path, {**body, **extra})
