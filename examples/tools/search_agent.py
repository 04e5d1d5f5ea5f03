"""A small agent that knows nothing of replay-actor: it searches the web for the weather,
then asks the model to answer from the results (docs/tools.md).

    replay-actor run examples/tools/replay.toml -- python examples/tools/search_agent.py

Under ``replay-actor run`` the search (an HTTPS ``GET`` to a search API) goes through the
front door's proxy and is answered from the fixture, as the model's call is: the run is
sealed, and neither the search API nor the model is reached.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request

import openai

QUESTION = "What is the weather in Paris today?"
SEARCH = "https://api.search.example/v1/search?" + urllib.parse.urlencode({"q": "weather in Paris"})
SYSTEM = "Answer in one sentence, from the search results."


def search() -> list[str]:
    """The search API's result snippets (urllib reads the proxy and trust variables)."""
    with urllib.request.urlopen(SEARCH, timeout=30) as answer:
        results: list[str] = json.load(answer)["results"]
    return results


def messages(results: list[str]) -> list[dict[str, str]]:
    found = "\n".join(f"- {result}" for result in results)
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"{QUESTION}\n\nSearch results:\n{found}"},
    ]


def main() -> None:
    client = openai.OpenAI()
    answer = client.chat.completions.create(
        model="gpt-4.1-mini",
        messages=messages(search()),  # type: ignore[arg-type]
    )
    print(answer.choices[0].message.content)


if __name__ == "__main__":
    main()
