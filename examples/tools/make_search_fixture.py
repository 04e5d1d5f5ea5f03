"""Regenerate ``fixture.jsonl``, the search agent's recorded world (docs/tools.md).

    .venv/bin/python examples/tools/make_search_fixture.py

Two entries: the search API's answer to the agent's ``GET`` (a stored http response, its
body the API's own bytes) and the model's answer to the question with those results.
``tests/examples/test_tools.py`` checks that this output matches the file on disk.
"""

from __future__ import annotations

import sys
import urllib.parse
from pathlib import Path
from typing import Any, Final

HERE: Final = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from search_agent import SEARCH, messages  # noqa: E402

from replay_actor import entry_line, request_hash  # noqa: E402

FIXTURE: Final = HERE / "fixture.jsonl"
RESULTS: Final = ["Paris: sunny, 21C, light wind from the west", "Tonight: clear, 12C"]
ANSWER: Final = "It is sunny in Paris today, 21C with a light west wind."


def search_request() -> dict[str, Any]:
    """The http request the agent's search becomes (docs/tools.md, "What is hashed")."""
    url = urllib.parse.urlsplit(SEARCH)
    return {
        "kind": "http",
        "method": "GET",
        "scheme": "https",
        "host": url.hostname,
        "port": 443,
        "path": url.path,
        "query": urllib.parse.parse_qsl(url.query),
    }


def fixture_text() -> str:
    body = '{"query": "weather in Paris", "results": ["' + '", "'.join(RESULTS) + '"]}'
    search = {"status": 200, "headers": [["content-type", "application/json"]], "text": body}
    chat = {"messages": messages(RESULTS)}  # the model's name is not hashed
    lines = [
        entry_line(request_hash(search_request()), search),
        entry_line(request_hash(chat), {"content": ANSWER, "finish_reason": "stop"}),
    ]
    return "".join(line.decode() + "\n" for line in sorted(lines))


if __name__ == "__main__":
    FIXTURE.write_text(fixture_text())
    print(f"wrote {FIXTURE}")
