"""A deterministic mutation fuzz of every registered vendor's ``read_body``, and the
malformed bodies that once ended in a 500 (a ``TypeError``) instead of a 400.

Each vendor gets rich seed bodies (system prompt, tools, tool choice, tool calls and
results, generation settings); every position in a seed is mutated in turn (the key
dropped, the value swapped for each JSON type, the value nested in a list or an object).
Every mutant must map to a neutral request that hashes, or raise ``RequestError``:
nothing else. The same bodies through a transport and the front door's exchange must be
an answer (200/400/404), never an exception or a 500.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest

from replay_actor import RequestError, open_provider, request_hash
from replay_actor.integrations.transport import ProviderTransport
from replay_actor.serving import Serving
from replay_actor.vendors import make_vendor, vendor_names

TOOL = {"type": "object", "properties": {"city": {"type": "string"}}}

OPENAI = {
    "model": "gpt-test",
    "messages": [
        {"role": "developer", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "w", "arguments": '{"city": "Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ],
    "tools": [{"type": "function", "function": {"name": "w", "parameters": TOOL}}],
    "tool_choice": {"type": "function", "function": {"name": "w"}},
    "response_format": {"type": "json_object"},
    "stop": ["x"],
    "max_completion_tokens": 5,
    "stream": True,
    "stream_options": {"include_usage": True},
}

ANTHROPIC = {
    "model": "claude-test",
    "max_tokens": 5,
    "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
    "messages": [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hm", "signature": "sig"},
                {"type": "text", "text": "let me look"},
                {"type": "tool_use", "id": "tu_1", "name": "w", "input": {"city": "Oslo"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "tu_1", "content": "sunny"},
                {"type": "text", "text": "and?"},
            ],
        },
    ],
    "tools": [{"name": "w", "description": "weather", "input_schema": TOOL}],
    "tool_choice": {"type": "tool", "name": "w", "disable_parallel_tool_use": True},
    "stop_sequences": ["x"],
    "metadata": {"user_id": "u"},
}

RESPONSES = {
    "model": "gpt-test",
    "instructions": "be brief",
    "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "weather?"}]},
        {"type": "function_call", "call_id": "c1", "name": "w", "arguments": '{"city":"Oslo"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
    ],
    "tools": [{"type": "function", "name": "w", "parameters": TOOL, "strict": False}],
    "tool_choice": {"type": "function", "name": "w"},
    "text": {"format": {"type": "json_schema", "name": "s", "schema": TOOL}},
    "max_output_tokens": 5,
    "store": False,
}

GEMINI = {
    "contents": [
        {"role": "user", "parts": [{"text": "weather?"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "w", "args": {"city": "Oslo"}}}]},
        {
            "role": "user",
            "parts": [{"functionResponse": {"name": "w", "response": {"result": "sunny"}}}],
        },
    ],
    "systemInstruction": {"parts": [{"text": "be brief"}]},
    "tools": [{"functionDeclarations": [{"name": "w", "parameters": TOOL}]}],
    "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["w"]}},
    "generationConfig": {
        "temperature": 0.5,
        "maxOutputTokens": 5,
        "stopSequences": ["x"],
        "responseModalities": ["TEXT"],
        "responseMimeType": "application/json",
        "responseSchema": TOOL,
    },
}

#: Seed bodies and the path each is posted to, per registered shape. A shape with no
#: seeds of its own is fuzzed with every seed (its read_body must still only refuse).
SEEDS: dict[str, list[tuple[dict[str, Any], str]]] = {
    "openai": [(OPENAI, "/v1/chat/completions")],
    "anthropic": [(ANTHROPIC, "/v1/messages")],
    "openai-responses": [(RESPONSES, "/v1/responses")],
    "gemini": [(GEMINI, "/v1beta/models/gemini-test:generateContent")],
}
ALL_SEEDS = [seed for seeds in SEEDS.values() for seed in seeds]

REPLACEMENTS: list[Any] = [None, True, 0, -1, 1.5, "", "x", [], [1], {}, {"type": {}}, [[]]]


def _positions(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every key/index path inside ``value`` (the root excluded)."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield (*path, key)
            yield from _positions(inner, (*path, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield (*path, index)
            yield from _positions(inner, (*path, index))


def _mutants(seed: dict[str, Any]) -> Iterator[Any]:
    """The seed with one position dropped, swapped for each JSON type, or nested; then
    the whole body swapped for each type."""
    for path in list(_positions(seed)):
        *parent_path, last = path
        original = _get(seed, path)
        for change in ("drop", "list", "object", *range(len(REPLACEMENTS))):
            body = copy.deepcopy(seed)
            parent = _get(body, tuple(parent_path))
            if change == "drop":
                del parent[last]
            elif change == "list":
                parent[last] = [copy.deepcopy(original)]
            elif change == "object":
                parent[last] = {"type": copy.deepcopy(original)}
            else:
                assert isinstance(change, int)
                parent[last] = copy.deepcopy(REPLACEMENTS[change])
            yield body
    yield from REPLACEMENTS


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


def _read(name: str, body: Any, path: str) -> None:
    vendor = make_vendor(name)
    try:
        call = vendor.read_body(body, path)
    except RequestError:
        return
    # What read_body made must be a request the provider accepts or refuses clearly.
    try:
        request_hash(call.request)
    except RequestError:
        return


@pytest.mark.parametrize("name", vendor_names())
def test_every_mutant_of_every_vendors_body_maps_or_raises_request_error(name: str) -> None:
    seeds = SEEDS.get(name, ALL_SEEDS)
    mutants = 0
    for seed, path in seeds:
        _read(name, seed, path)  # the seed itself maps (or is refused) without a bug
        for body in _mutants(seed):
            mutants += 1
            try:
                _read(name, body, path)
            except RequestError:  # pragma: no cover - _read swallows it
                raise
            except Exception as exc:
                pytest.fail(f"{name}: {type(exc).__name__}: {exc} for {json.dumps(body)[:300]}")
    assert mutants > 300


# The bodies the issue found answered 500 ("internal error (TypeError)").
REGRESSIONS = [
    (
        "/v1beta/models/m:generateContent",
        {**GEMINI, "generationConfig": {"responseModalities": 1}},
        "responseModalities",
    ),
    (
        "/v1beta/models/m:generateContent",
        {**GEMINI, "toolConfig": {"functionCallingConfig": {"mode": []}}},
        "mode must be a string",
    ),
    (
        "/v1beta/models/m:generateContent",
        {**GEMINI, "toolConfig": {"functionCallingConfig": {"mode": {}}}},
        "mode must be a string",
    ),
    (
        "/v1/messages",
        {
            **ANTHROPIC,
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [{"type": {"a": 1}, "text": "x"}]},
            ],
        },
        "messages[1].content[0].type must be a string",
    ),
    (
        "/v1/messages",
        {**ANTHROPIC, "tool_choice": {"type": ["any"]}},
        "tool_choice.type must be",
    ),
]


@pytest.fixture
def empty_provider(tmp_path: Path) -> Iterator[Any]:
    fixture = tmp_path / "empty.jsonl"
    fixture.write_text("")
    provider = open_provider({"provider": {"kind": "replay", "fixture": str(fixture)}})
    try:
        yield provider
    finally:
        provider.release()


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("path", "body", "says"), REGRESSIONS)
def test_malformed_bodies_are_400_naming_the_field(
    empty_provider: Any, path: str, body: dict[str, Any], says: str
) -> None:
    serving = Serving(empty_provider, None, release_on_close=False)
    answer = serving.serve("POST", path, json.dumps(body).encode())
    assert answer.status == 400, answer.body
    assert says in json.loads(answer.body)["error"]["message"]
    assert dict(answer.headers)["x-should-retry"] == "false"


@pytest.mark.timeout(120)
def test_the_sdks_raise_a_bad_request_for_them_in_process(empty_provider: Any) -> None:
    """In-process, an exception from the transport would be a connection error the SDK
    retries; a 400 is raised at once as the SDK's own BadRequestError."""
    transport = ProviderTransport(empty_provider, "anthropic", release_on_close=False)
    client = anthropic.Anthropic(api_key="k", http_client=httpx2.Client(transport=transport))
    bad_type: Any = {"a": 1}
    messages: Any = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": bad_type, "text": "x"}]},
    ]
    with pytest.raises(anthropic.BadRequestError, match="must be a string"):
        client.messages.create(model="m", max_tokens=5, messages=messages)
    assert client.max_retries == 2  # the default: a connection error would be retried
    client.close()
    # google-genai's own types refuse these values, so the raw body goes through the
    # same transport class the client uses.
    gemini = ProviderTransport(empty_provider, "gemini", release_on_close=False)
    with httpx2.Client(transport=gemini) as http:
        for _path, body, says in REGRESSIONS[:3]:
            answer = http.post("http://g/v1beta/models/m:generateContent", json=body)
            assert answer.status_code == 400 and says in answer.json()["error"]["message"]


@pytest.mark.timeout(120)
def test_every_mutant_through_the_exchange_is_an_answer_never_500(empty_provider: Any) -> None:
    serving = Serving(empty_provider, None, release_on_close=False)
    statuses: set[int] = set()
    for seed, path in ALL_SEEDS:
        for i, body in enumerate(_mutants(seed)):
            if i % 7:  # a sample: every seventh mutant (the read_body fuzz covers all)
                continue
            answer = serving.serve("POST", path, json.dumps(body).encode())
            statuses.add(answer.status)
            assert answer.status in (200, 400, 404), (answer.status, answer.body[:300])
    assert 400 in statuses
