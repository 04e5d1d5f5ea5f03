"""Tests of an application that talks to a model, replayed by the pytest plugin
(docs/pytest.md). Run from the repository root: python -m pytest examples/pytest"""

from __future__ import annotations

from typing import Any

import openai
import pytest

pytestmark = pytest.mark.replay(fixture="chat.jsonl")  # relative to this file


def greet(client: openai.OpenAI) -> str:
    """The application code under test: it takes any OpenAI client."""
    reply = client.chat.completions.create(
        model="gpt-4.1-mini", messages=[{"role": "user", "content": "Say hello"}]
    )
    return reply.choices[0].message.content or ""


def test_greeting(replay_openai: openai.OpenAI) -> None:
    assert greet(replay_openai) == "Hello!"


def test_neutral_request(replay_provider: Any) -> None:
    answer = replay_provider.complete({"messages": [{"role": "user", "content": "Say hello"}]})
    assert answer["content"] == "Hello!"
