"""An agent whose web-search tool calls an HTTPS API (docs/tools.md): openai-agents, its
model reached through the Responses API of a loopback fake vendor, its tool through
``httpx`` to a search API on 127.0.0.2 with a certificate of the test's own CA. Recorded
under ``replay-actor run``, then replayed twice sealed, the search API and the vendor
gone: identical transcripts. When the search API's answer changes, the model's next call
is a new request: a miss at that call, said with the ``add`` command that answers it.

The application is ordinary: it knows nothing of replay-actor; ``run`` trusts the search
API's CA through its own ``SSL_CERT_FILE``, as a machine trusts the web's roots."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.frontdoor_util import (
    quiet_env,
    record_manifest,
    replay_manifest,
    run_cli,
    summary,
)
from tests.support.responses_server import ResponsesServer
from tests.support.tool_server import SearchAPI, TestAuthority

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(300)]

PY = sys.executable

AGENT = textwrap.dedent(
    """
    import json, sys
    import httpx
    from agents import Agent, Runner, function_tool

    SEARCH = sys.argv[1]


    @function_tool
    async def web_search(query: str) -> str:
        \"\"\"Search the web; the results' first lines.\"\"\"
        async with httpx.AsyncClient(timeout=30) as client:
            got = await client.get(SEARCH + "/search", params={"q": query})
            got.raise_for_status()
            return "; ".join(got.json()["results"])


    agent = Agent(name="searcher", instructions="Use web_search, then answer.", tools=[web_search])
    result = Runner.run_sync(agent, "What is the weather in Paris today?")
    shown = {"final": result.final_output, "transcript": result.to_input_list()}
    print(json.dumps(shown, sort_keys=True))
    """
)


def _change_the_search_answer(fixture: Path) -> None:
    """The world moved on: the recorded search answer says something else now."""
    lines = []
    for line in fixture.read_text().splitlines():
        entry = json.loads(line)
        response = entry.get("response", {})
        if "status" in response:  # the search API's exchange, not the model's
            response["text"] = response["text"].replace("sunny", "stormy")
        lines.append(json.dumps(entry))
    fixture.write_text("\n".join(lines) + "\n")


def test_an_agents_web_search_replays_identically_and_a_changed_answer_misses(
    tmp_path: Path,
    search_api: SearchAPI,
    tool_authority: TestAuthority,
    responses_server: ResponsesServer,
) -> None:
    search_api.answers["weather in Paris"] = ["Paris: sunny, 21C", "light wind"]
    env = tool_authority.environment(quiet_env())
    record = record_manifest(
        tmp_path, responses_server.base_url("search"), adapter="openai-responses"
    )
    recorded = run_cli(record, [PY, "-c", AGENT, search_api.url], env=env)
    assert recorded.returncode == 0, recorded.stderr
    live = json.loads(recorded.stdout)
    assert live["final"] == "Found: Paris: sunny, 21C; light wind"
    # Two model calls around one search.
    assert summary(recorded.stderr).startswith("replay-actor: 3 served, 0 missed")
    assert len(search_api.received) == 1
    search_api.close()
    responses_server.close()

    fixture = tmp_path / "recorded.jsonl"
    replay = replay_manifest(tmp_path, fixture, inspection=False)
    transcripts = []
    for _ in range(2):
        replayed = run_cli(replay, [PY, "-c", AGENT, search_api.url], env=env)
        assert replayed.returncode == 0, replayed.stderr
        assert summary(replayed.stderr).startswith("replay-actor: 3 served, 0 missed")
        assert summary(replayed.stderr).endswith("; sealed (namespace)")
        transcripts.append(json.loads(replayed.stdout))
    assert transcripts[0] == transcripts[1]
    assert transcripts[0]["final"] == live["final"]
    assert transcripts[0]["transcript"] == live["transcript"]

    _change_the_search_answer(fixture)
    changed = run_cli(replay, [PY, "-c", AGENT, search_api.url], env=env)
    assert changed.returncode != 0  # the agent's model call failed: the miss
    lines = changed.stderr.splitlines()
    miss = [n for n, line in enumerate(lines) if line.startswith("replay-actor: miss: ")]
    assert len(miss) == 1, changed.stderr
    digest = lines[miss[0]].rpartition("request_hash: ")[2].rstrip(")")
    # At the model's second call: its tool message (system, user, call, result) holds
    # the search's answer.
    assert "differs at: messages[3].content" in lines[miss[0] + 1]
    assert (
        f"fix:  replay-actor add recorded.jsonl {digest} --content 'THE ANSWER'"
        in changed.stderr.replace(str(tmp_path) + "/", "")
    )
    assert summary(changed.stderr).startswith("replay-actor: 2 served, 1 missed")
