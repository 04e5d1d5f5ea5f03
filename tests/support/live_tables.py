"""Live-adapter tables aimed at the loopback servers (support/chat_server.py,
support/anthropic_server.py), their API key read from ``KEY_VAR``, where the tests plant
``SECRET_KEY`` to prove it never reaches a fixture, a journal, an error or a log."""

from __future__ import annotations

from typing import Any

from tests.support.anthropic_server import AnthropicServer
from tests.support.chat_server import ChatServer

SECRET_KEY = "sk-ant-PLANTED-7c1e55d0a9b3"
KEY_VAR = "REPLAY_ACTOR_SDK_TEST_KEY"


def openai_table(chat: ChatServer, scenario: str = "echo") -> dict[str, Any]:
    return {
        "adapter": "openai",
        "model": "test-model",
        "base_url": chat.base_url(scenario),
        "api_key_env": KEY_VAR,
        "retry_backoff": 0.0,
    }


def anthropic_table(server: AnthropicServer, scenario: str = "echo") -> dict[str, Any]:
    return {
        "adapter": "anthropic",
        "model": "claude-test",
        "base_url": server.base_url(scenario),
        "api_key_env": KEY_VAR,
        "retry_backoff": 0.0,
    }


def live(table: dict[str, Any]) -> dict[str, Any]:
    return {"provider": {"kind": "live", **table}}
