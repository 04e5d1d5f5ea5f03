"""A small application that talks to a model through the ``openai`` SDK, unchanged.

Only the client's construction comes from replay-actor, once, from a manifest; every
call below is plain ``openai``: two chat completions and one ``stream=True``.

    .venv/bin/python examples/openai_app/app.py            # replay (the bundled fixture)
    .venv/bin/python examples/openai_app/app.py record     # ask a live model, keep its answers
    .venv/bin/python examples/openai_app/app.py live       # ask a live model

``make demo-sdk`` runs the replay. The record and live manifests point at an
OpenAI-compatible server on 127.0.0.1:8000 with the key in ``OPENAI_API_KEY``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import openai
from openai.types.chat import ChatCompletionMessageParam

from replay_actor import openai_client

HERE = Path(__file__).resolve().parent
MODEL = "gpt-4.1-mini"
SYSTEM = "You are a travel assistant. Answer in one sentence."


def plan_weekend(client: openai.OpenAI) -> None:
    """The application: nothing here knows about replay-actor."""
    messages: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Suggest one city in Portugal for a weekend."},
    ]
    city = client.chat.completions.create(model=MODEL, messages=messages, temperature=0)
    suggestion = city.choices[0].message.content or ""
    print(f"city:     {suggestion}")

    messages += [
        {"role": "assistant", "content": suggestion},
        {"role": "user", "content": "What should I eat there?"},
    ]
    food = client.chat.completions.create(model=MODEL, messages=messages, temperature=0)
    dish = food.choices[0].message.content or ""
    print(f"food:     {dish}")

    messages += [
        {"role": "assistant", "content": dish},
        {"role": "user", "content": "Write a one-line postcard home."},
    ]
    print("postcard: ", end="", flush=True)
    stream = client.chat.completions.create(
        model=MODEL,
        messages=messages,
        temperature=0,
        stream=True,
    )
    for chunk in stream:
        if chunk.choices:
            print(chunk.choices[0].delta.content or "", end="", flush=True)
    print()


def main(argv: list[str]) -> int:
    mode = argv[1] if len(argv) > 1 else "replay"
    if mode not in ("replay", "record", "live"):
        print("usage: app.py [replay|record|live]", file=sys.stderr)
        return 2
    # The one line that changes between replay, record and live: the manifest.
    with openai_client(HERE / f"{mode}.toml") as client:
        plan_weekend(client)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
