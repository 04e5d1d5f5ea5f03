"""Regenerate the Inspect example's fixture from the task's own questions.

    .venv/bin/python examples/inspect/write_fixture.py

Each hash is the neutral request the ``replay`` provider builds for a sample (one user
message, the epoch in ``scope``), computed with the provider's own mapping, so the task
and the fixture cannot drift apart; ``tests/integrations/test_inspect_ai.py`` checks that
this script's output matches the file on disk.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Final

from inspect_ai.model import ChatMessageUser, GenerateConfig

from replay_actor._request import request_hash
from replay_actor.fixture import entry_line
from replay_actor.integrations.inspect_ai import to_request

HERE: Final = Path(__file__).resolve().parent
FIXTURE: Final = HERE / "baseline.jsonl"
EPOCHS: Final = 2


def render() -> bytes:
    sys.path.insert(0, str(HERE))
    try:
        from task import QUESTIONS
    finally:
        sys.path.remove(str(HERE))
    lines = []
    for question, answer in QUESTIONS:
        for epoch in range(1, EPOCHS + 1):
            request = to_request(
                [ChatMessageUser(content=question)], [], "none", GenerateConfig(), epoch=epoch
            )
            response = {
                "content": f"{answer}." if epoch == 1 else f"It is {answer}.",
                "tool_calls": [],
                "finish_reason": "stop",
                "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
            }
            lines.append(entry_line(request_hash(request), response) + b"\n")
    return b"".join(lines)


if __name__ == "__main__":
    FIXTURE.write_bytes(render())
    print(f"wrote {FIXTURE}")
