"""MCP over streamable HTTP, frozen as HTTP exchanges (docs/tools.md, "MCP over HTTP"):
the official MCP Python SDK's client talks to its ``MCPServer`` over HTTPS on 127.0.0.2
under ``replay-actor run``, recorded, then replayed twice sealed with the server gone.

Both of the SDK's eras: the 2026 protocol (``server/discover``, JSON answers, no session)
and the initialize handshake (``mode="legacy"``: event-stream answers, an
``mcp-session-id`` header the server makes up, the standalone ``GET`` stream and the
closing ``DELETE``). The session id is not hashed (it is the server's own random value)
and is replayed as recorded, so the client sends back the recorded one."""

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
from tests.support.mcp_http_server import MCPHTTPServer
from tests.support.tool_server import TestAuthority

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(240)]

PY = sys.executable

CLIENT = textwrap.dedent(
    """
    import asyncio, json, sys
    from mcp import Client

    async def main(url, mode):
        async with Client(url, mode=mode) as client:
            tools = await client.list_tools()
            paris = await client.call_tool("forecast", {"city": "Paris"})
            total = await client.call_tool("add", {"a": 2, "b": 3})
        return {
            "tools": sorted(tool.name for tool in tools.tools),
            "paris": [part.text for part in paris.content],
            "total": [part.text for part in total.content],
        }

    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2]))))
    """
)


@pytest.mark.parametrize(("mode", "exchanges"), [("auto", 4), ("legacy", 7)])
def test_mcp_over_streamable_http_records_then_replays_with_the_server_gone(
    tmp_path: Path,
    mcp_http_server: MCPHTTPServer,
    tool_authority: TestAuthority,
    mode: str,
    exchanges: int,
) -> None:
    env = tool_authority.environment(quiet_env())
    command = [PY, "-c", CLIENT, mcp_http_server.url, mode]
    recorded = run_cli(record_manifest(tmp_path, "http://127.0.0.1:9/v1"), command, env=env)
    assert recorded.returncode == 0, recorded.stderr
    live = json.loads(recorded.stdout)
    assert live == {
        "tools": ["add", "forecast"],
        "paris": ["Paris: sunny, 21C (edition 1)"],
        "total": ["5"],
    }
    assert f"({exchanges} recorded)" in summary(recorded.stderr)
    fixture = tmp_path / "recorded.jsonl"
    stored = [json.loads(line)["response"] for line in fixture.read_text().splitlines()]
    session_ids = {v for s in stored for n, v in s["headers"] if n == "mcp-session-id"}
    if mode == "legacy":
        assert len(session_ids) == 1  # returned with every answer, as the server sent it
        assert any("text/event-stream" in v for s in stored for n, v in s["headers"])
    mcp_http_server.close()
    replay = replay_manifest(tmp_path, fixture, inspection=False)
    for _ in range(2):
        replayed = run_cli(replay, command, env=env)
        assert replayed.returncode == 0, replayed.stderr
        assert json.loads(replayed.stdout) == live
        assert summary(replayed.stderr).startswith(f"replay-actor: {exchanges} served, 0 missed")
        assert summary(replayed.stderr).endswith("; sealed (namespace)")
