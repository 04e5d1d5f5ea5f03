"""The ``anthropic`` live adapter against a real 127.0.0.1 server speaking Anthropic's
wire (tests/support/anthropic_server.py): the whole request mapped to a messages body,
retries, parameters it cannot send named, and its registration and defaults.
"""

from __future__ import annotations

from typing import Any

import pytest

from replay_actor import RequestError, open_provider
from replay_actor.adapters.builtin import AnthropicAdapter
from tests.support.anthropic_server import AnthropicServer
from tests.support.live_tables import KEY_VAR, SECRET_KEY, anthropic_table, live

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(60)]


@pytest.fixture
def key_env(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_VAR, SECRET_KEY)
    return KEY_VAR


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"n": 2}, "params.n"),
        ({"logprobs": True}, "params.logprobs"),
        ({"top_logprobs": 2}, "params.top_logprobs"),
        ({"stream": True}, "params.stream"),
        ({"modalities": ["audio"]}, "params.modalities"),
        ({"audio": {"voice": "x"}}, "params.audio"),
    ],
)
def test_live_provider_refuses_params_naming_them(
    claude: AnthropicServer, key_env: str, params: dict[str, Any], field: str
) -> None:
    with open_provider(live(anthropic_table(claude))) as provider:
        with pytest.raises(RequestError, match=field.replace(".", r"\.")):
            provider.complete({"messages": [{"role": "user", "content": "hi"}], "params": params})
        # n = 1 is what a neutral response holds: allowed.
        provider.complete({"messages": [{"role": "user", "content": "hi"}], "params": {"n": 1}})
    assert claude.count("echo") == 1


def test_anthropic_adapter_retries_then_answers(claude: AnthropicServer, key_env: str) -> None:
    with open_provider(live(anthropic_table(claude, "429x2"))) as provider:
        answer = provider.complete({"messages": [{"role": "user", "content": "hi"}]})
    assert answer["content"] == "3: hi"
    assert claude.count("429x2") == 3


def test_anthropic_adapter_maps_the_whole_request(claude: AnthropicServer, key_env: str) -> None:
    request = {
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "tool_calls": [{"id": "c1", "name": "get_weather", "arguments": '{"city":"X"}'}],
            },
            {"role": "tool", "content": "sunny", "tool_call_id": "c1"},
            {"role": "user", "content": "and tomorrow?"},
        ],
        "tools": [
            {"name": "get_weather", "description": "w", "parameters": {"type": "object"}},
        ],
        "tool_choice": "required",
        "params": {"max_tokens": 50, "stop": ["END"], "temperature": 0.5},
    }
    with open_provider(live(anthropic_table(claude, "tools"))) as provider:
        answer = provider.complete(request)
    assert answer == {
        "content": None,
        "tool_calls": [{"id": "toolu_1", "name": "get_weather", "arguments": '{"city":"Paris"}'}],
        "finish_reason": "tool_calls",
        "usage": {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6},
    }
    assert claude.received[-1].body == {
        "model": "claude-test",
        "max_tokens": 50,
        "temperature": 0.5,
        "stop_sequences": ["END"],
        "system": "be brief",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "c1", "name": "get_weather", "input": {"city": "X"}}
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "c1", "content": "sunny"},
                    {"type": "text", "text": "and tomorrow?"},
                ],
            },
        ],
        "tools": [{"name": "get_weather", "description": "w", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "any"},
    }


def test_anthropic_is_registered_and_built_in(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    from replay_actor.adapters.base import ADAPTER_GROUP, load_adapter_factory

    names = [ep.name for ep in importlib.metadata.entry_points(group=ADAPTER_GROUP)]
    assert "anthropic" in names
    assert load_adapter_factory("anthropic") is AnthropicAdapter
    # Stale metadata (an editable install never regenerated): the built-in class still.
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [])
    assert load_adapter_factory("anthropic") is AnthropicAdapter


def test_anthropic_adapter_defaults_and_unknown_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = AnthropicAdapter({"model": "m"})
    try:
        assert adapter._config.url == "https://api.anthropic.com/v1/messages"
    finally:
        adapter.close()
    from replay_actor import ManifestError

    with pytest.raises(ManifestError) as caught:
        AnthropicAdapter({"model": "m", "organization": "x"})
    assert caught.value.key == "organization"
