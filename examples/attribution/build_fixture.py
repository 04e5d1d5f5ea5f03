"""Write the attribution example's fixture: the baseline agent's three samples, answered
by a scripted model (the stand-in for recording a real one with a record manifest).

Each call's body is turned into the neutral request exactly as the front door does
(``Exchange.prepare``, the public serving module), so the hashes are the ones the agent's
SDK calls will have.

    python build_fixture.py fixture.jsonl
"""

from __future__ import annotations

import json
import sys
from typing import Any

from agent import MODEL, QUESTIONS, TOOLS, run_sample

from replay_actor import request_hash
from replay_actor.serving import Call, Exchange


def scripted(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The model's answer: find the city, then its weather, then answer."""
    last = messages[-1]
    if last["role"] == "user":
        city = last["content"].removeprefix("Is it warm in ").rstrip("?")
        name, arguments = "find_city", {"name": city}
    elif json.loads(last["content"]).get("city_id"):
        name, arguments = "weather", json.loads(last["content"])
    else:
        weather = json.loads(last["content"])
        warm = weather["temperature"] >= 20
        return {"role": "assistant", "content": "Yes, it is warm." if warm else "No, it is not."}
    call = {"id": f"call_{name}", "type": "function"}
    call["function"] = {"name": name, "arguments": json.dumps(arguments)}  # type: ignore[assignment]
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def neutral_response(message: dict[str, Any]) -> dict[str, Any]:
    calls = [
        {"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
        for c in message.get("tool_calls", [])
    ]
    return {
        "content": message["content"],
        "tool_calls": calls,
        "finish_reason": "tool_calls" if calls else "stop",
    }


def main(path: str) -> None:
    exchange = Exchange("openai")
    lines: list[str] = []

    def ask(messages: list[dict[str, Any]], sample: int) -> dict[str, Any]:
        body = json.dumps({"messages": messages, "model": MODEL, "tools": TOOLS}).encode()
        headers = {"x-replay-scope": json.dumps({"sample": sample})}
        prepared = exchange.prepare("POST", "/v1/chat/completions", body, headers)
        assert isinstance(prepared, Call), prepared
        reply = scripted(messages)
        entry = {
            "schema_version": 1,
            "request_hash": request_hash(prepared.request),
            "response": neutral_response(reply),
        }
        lines.append(json.dumps(entry))
        return reply

    for sample in QUESTIONS:
        run_sample(ask, sample, candidate=False)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("".join(line + "\n" for line in lines))


if __name__ == "__main__":
    main(sys.argv[1])
