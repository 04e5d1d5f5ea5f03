"""An evaluation that knows nothing about replay-actor: a plain ``openai.OpenAI()``,
configured from the environment as every deployment is.

    replay-actor run examples/frontdoor/replay.toml -- python examples/frontdoor/my_eval.py

``run`` points ``OPENAI_BASE_URL`` at its front door and sets ``OPENAI_API_KEY`` to the
run's token, so these calls replay from examples/openai_app/fixture.jsonl.
"""

from __future__ import annotations

import openai
from openai.types.chat import ChatCompletionMessageParam

MODEL = "gpt-4.1-mini"


def main() -> None:
    client = openai.OpenAI()
    messages: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": "You are a travel assistant. Answer in one sentence."},
        {"role": "user", "content": "Suggest one city in Portugal for a weekend."},
    ]
    city = client.chat.completions.create(model=MODEL, messages=messages, temperature=0)
    suggestion = city.choices[0].message.content or ""
    print(f"city: {suggestion}")
    messages += [
        {"role": "assistant", "content": suggestion},
        {"role": "user", "content": "What should I eat there?"},
    ]
    food = client.chat.completions.create(model=MODEL, messages=messages, temperature=0)
    print(f"food: {food.choices[0].message.content}")
    # Scoring would go here: the answers are the fixture's, on every run.
    assert "Porto" in suggestion


if __name__ == "__main__":
    main()
