"""A tiny tool-using agent for the attribution example (docs/attribution.md).

Three samples, each a question answered in three model calls: the model asks for the
city's id (``find_city``), then its weather (``weather``), then answers. The agent is an
ordinary openai SDK application: under ``replay-actor run`` its client reaches the front
door with no line changed. Each sample's calls carry ``x-replay-scope: {"sample": N}``,
so ``compare`` groups them by sample.

``--candidate`` is the change under evaluation: its ``weather`` tool reports the
temperature in Fahrenheit for Oslo only, so sample 2's third call asks the model
something the baseline never asked.

    python agent.py [--candidate]
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

MODEL = "gpt-4.1-mini"
QUESTIONS = {1: "Is it warm in Lisbon?", 2: "Is it warm in Oslo?", 3: "Is it warm in Rome?"}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {key: {"type": "string"}},
                "required": [key],
            },
        },
    }
    for name, description, key in (
        ("find_city", "The id of a city", "name"),
        ("weather", "The weather in a city, by id", "city_id"),
    )
]
TEMPERATURES = {"lisbon": 24, "oslo": 8, "rome": 27}

#: One model call: (messages, sample) -> the assistant's message, in the SDK's shape.
Ask = Callable[[list[dict[str, Any]], int], dict[str, Any]]


def tool(name: str, arguments: dict[str, str], *, candidate: bool) -> str:
    """The agent's tools; the candidate's ``weather`` differs for Oslo."""
    if name == "find_city":
        return json.dumps({"city_id": arguments["name"].lower()})
    degrees = TEMPERATURES[arguments["city_id"]]
    if candidate and arguments["city_id"] == "oslo":
        return json.dumps({"temperature": round(degrees * 9 / 5 + 32), "unit": "F"})
    return json.dumps({"temperature": degrees, "unit": "C"})


def run_sample(ask: Ask, sample: int, *, candidate: bool) -> str:
    """One sample's conversation: call the model until it answers without a tool."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You answer weather questions with the tools."},
        {"role": "user", "content": QUESTIONS[sample]},
    ]
    while True:
        reply = ask(messages, sample)
        messages.append(reply)
        if not reply.get("tool_calls"):
            return str(reply["content"])
        for call in reply["tool_calls"]:
            function = call["function"]
            output = tool(function["name"], json.loads(function["arguments"]), candidate=candidate)
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": output})


def sdk_ask() -> Ask:
    """The model, through the openai SDK (its base URL and key from the environment)."""
    import openai

    client = openai.OpenAI(max_retries=0)

    def ask(messages: list[dict[str, Any]], sample: int) -> dict[str, Any]:
        completion = client.chat.completions.create(
            model=MODEL,
            messages=messages,  # type: ignore[arg-type]
            tools=TOOLS,  # type: ignore[arg-type]
            extra_headers={"x-replay-scope": json.dumps({"sample": sample})},
        )
        message = completion.choices[0].message
        out: dict[str, Any] = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            out["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.function.name, "arguments": call.function.arguments},
                }
                for call in message.tool_calls
                if call.type == "function"
            ]
        return out

    return ask


def main(argv: list[str]) -> int:
    candidate = "--candidate" in argv
    ask = sdk_ask()
    failed = 0
    for sample in QUESTIONS:
        try:
            print(f"sample {sample}: {run_sample(ask, sample, candidate=candidate)}")
        except Exception as exc:  # a miss is an SDK error: the sample fails, the run goes on
            failed += 1
            print(f"sample {sample}: failed ({type(exc).__name__})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
