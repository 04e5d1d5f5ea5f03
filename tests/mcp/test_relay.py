"""``replay-actor mcp`` under the MCP Python SDK's own client: an SDK tool server recorded
through the relay replays with the server gone, identically; a changed argument is a
miss the client sees, with its fix; private data shows no hash; explain, add and coverage
work on an mcp miss; sequences, the run log, elicitation and the stateless protocol."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.types import ElicitRequestParams, ElicitResult

from replay_actor import load_fixture
from tests.support.mcp_relay import (
    REPLAY_ACTOR,
    connect,
    manifest,
    relay_params,
    server_command,
    started_pids,
)
from tests.support.procs import wait_gone

pytestmark = pytest.mark.usefixtures("no_leaks")


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True)


async def _session_calls(session: ClientSession, city: str) -> dict[str, Any]:
    """What the application asks: every request kind the issue names, and a sequence."""
    return {
        "tools": _dump(await session.list_tools()),
        "forecast": _dump(await session.call_tool("forecast", {"city": city})),
        "tick": [_dump(await session.call_tool("tick", {})) for _ in range(2)],
        "now": _dump(await session.call_tool("now", {})),
        "note": _dump(await session.read_resource("notes://today")),
        "prompt": _dump(await session.get_prompt("greet", {"name": "Ada"})),
        "ping": _dump(await session.send_ping()),
    }


def _app(
    manifest_path: Path, command: list[str], city: str = "Paris"
) -> tuple[dict[str, Any], str]:
    """One run of the application: its initialize and its calls, and the relay's stderr."""

    async def main() -> tuple[dict[str, Any], str]:
        params = relay_params(manifest_path, command)
        async with connect(params, initialize=False) as (session, stderr):
            answers = {"initialize": _dump(await session.initialize())}
            answers.update(await _session_calls(session, city))
        return answers, stderr.text

    return anyio.run(main)


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """One recording of the application, for the module: its folder and the answers."""
    folder = tmp_path_factory.mktemp("recording")
    started = folder / "started"
    recorded, err = _app(manifest(folder, "record"), server_command(started))
    # Eight answers (ping is answered by the relay, never recorded, never counted).
    assert "8 served, 0 missed, 0 exhausted, 0 blocked" in err and "(8 recorded)" in err, err
    (pid,) = started_pids(started)
    assert wait_gone(pid)
    return folder, recorded


def _record(tmp_path: Path, recording: tuple[Path, dict[str, Any]]) -> dict[str, Any]:
    """The module's recording, copied into ``tmp_path`` (fixture and request sidecar)."""
    folder, recorded = recording
    for name in ("tools.jsonl", "tools.jsonl.requests.jsonl"):
        shutil.copyfile(folder / name, tmp_path / name)
    return recorded


def test_a_recorded_server_replays_identically_with_the_server_gone(
    tmp_path: Path, recording: tuple[Path, dict[str, Any]]
) -> None:
    recorded = _record(tmp_path, recording)
    assert recorded["tick"][0]["structuredContent"] == {"result": 1}
    assert recorded["tick"][1]["structuredContent"] == {"result": 2}
    # A SERVER_COMMAND that would leave a trace if it ever ran.
    trace = tmp_path / "ran"
    never = [sys.executable, "-c", f"open({str(trace)!r}, 'w')"]
    replayed, err = _app(manifest(tmp_path, "replay"), never)
    assert replayed == recorded
    assert not trace.exists()
    assert "replay-actor: 8 served, 0 missed, 0 exhausted, 0 blocked; fixture sha256:" in err
    # The two tick answers are one entry, a sequence, in the order they were given.
    fixture = load_fixture(tmp_path / "tools.jsonl").snapshot()
    assert (fixture["entries"], fixture["sequence_entries"]) == (7, 1)


def test_a_changed_argument_is_a_miss_the_client_sees_with_its_fix(
    tmp_path: Path, recording: tuple[Path, dict[str, Any]]
) -> None:
    _record(tmp_path, recording)

    async def main() -> tuple[MCPError, str]:
        params = relay_params(manifest(tmp_path, "replay"), ["unused"])
        async with connect(params) as (session, stderr):
            with pytest.raises(MCPError) as caught:
                await session.call_tool("forecast", {"city": "London"})
            # The session goes on: a request the fixture holds is still served.
            served = await session.call_tool("forecast", {"city": "Paris"})
            assert served.structured_content == {"result": "Paris: sunny for 1 day(s)"}
        return caught.value, stderr.text

    error, err = anyio.run(main)
    message = error.error.message
    digest = error.error.data["request_hash"]
    assert message.startswith(f"no replay fixture matches this request (request_hash: {digest})")
    assert "differs at: params.arguments.city" in message
    assert f"fix:  replay-actor add tools.jsonl {digest} --response ANSWER.json" in message
    assert error.error.data["type"] == "replay_miss"
    assert (
        f"replay-actor: miss: no replay fixture matches this request (request_hash: {digest})"
        in err
    )
    # Served: initialize, the tools/list the SDK asks before a call, Paris.
    assert "replay-actor: 3 served, 1 missed, 0 exhausted" in err


def test_a_private_miss_shows_no_hash_anywhere(
    tmp_path: Path, recording: tuple[Path, dict[str, Any]]
) -> None:
    _record(tmp_path, recording)
    private = manifest(tmp_path, "replay", "private", data="private", inspection="misses.jsonl")

    async def main() -> tuple[MCPError, str]:
        async with connect(relay_params(private, ["unused"])) as (session, stderr):
            with pytest.raises(MCPError) as caught:
                await session.call_tool("forecast", {"city": "London"})
        return caught.value, stderr.text

    error, err = anyio.run(main)
    shown = json.dumps(error.error.model_dump(mode="json")) + err
    # The fixture's set hash names the file, not a request: it is no secret.
    fixture = load_fixture(tmp_path / "tools.jsonl").snapshot()["fixture_set_hash"]
    assert "sha256:" not in shown.replace(f"fixture {fixture}", "")
    assert error.error.message.startswith("no replay fixture matches this request")
    assert "inspection record misses.jsonl" in error.error.message
    assert error.error.data == {"type": "replay_miss"}
    # The hash and the explanation are in the owner-only record.
    record = [json.loads(line) for line in (tmp_path / "misses.jsonl").read_text().splitlines()]
    assert [line["event"] for line in record] == ["miss", "nearest"]
    assert record[1]["nearest"]["paths"] == ["params.arguments.city"]


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [REPLAY_ACTOR, *map(str, args)], capture_output=True, text=True, timeout=60, check=False
    )


def test_explain_add_and_coverage_work_on_an_mcp_miss(
    tmp_path: Path, recording: tuple[Path, dict[str, Any]]
) -> None:
    _record(tmp_path, recording)
    replay = manifest(tmp_path, "replay", inspection="runs.jsonl", inspection_served=True)

    async def ask(city: str) -> Any:
        async with connect(relay_params(replay, ["unused"])) as (session, _):
            try:
                return _dump(await session.call_tool("forecast", {"city": city}))
            except MCPError as exc:
                return exc.error.data["request_hash"]

    digest = anyio.run(ask, "London")
    fixture = tmp_path / "tools.jsonl"
    explained = _cli("explain", fixture, digest)  # the relay saved the missed request
    assert explained.returncode == 3, explained.stderr
    assert 'params.arguments.city: "Paris" → "London"' in explained.stdout
    answer = tmp_path / "answer.json"
    rain = {
        "content": [{"type": "text", "text": "London: rain"}],
        "structuredContent": {"result": "London: rain"},
        "isError": False,
    }
    answer.write_text(json.dumps({"result": rain}))
    added = _cli("add", fixture, digest, "--response", answer)
    assert added.returncode == 0, added.stderr
    assert anyio.run(ask, "London")["content"][0]["text"] == "London: rain"
    covered = _cli("coverage", fixture, tmp_path / "runs.jsonl", "--json")
    report = json.loads(covered.stdout)
    assert report["misses"] == [{"request_hash": digest, "count": 1}]
    # Eight entries now; the runs asked initialize, tools/list and London of them.
    assert digest not in report["unused"] and len(report["unused"]) == 5


def test_a_sequence_used_up_is_exhausted_with_its_next_command(
    tmp_path: Path, recording: tuple[Path, dict[str, Any]]
) -> None:
    _record(tmp_path, recording)

    async def main() -> tuple[list[Any], MCPError]:
        async with connect(relay_params(manifest(tmp_path, "replay"), ["unused"])) as (s, _):
            ticks = [(await s.call_tool("tick", {})).structured_content for _ in range(2)]
            with pytest.raises(MCPError) as caught:
                await s.call_tool("tick", {})
        return ticks, caught.value

    ticks, error = anyio.run(main)
    assert ticks == [{"result": 1}, {"result": 2}]
    assert error.error.data["type"] == "replay_exhausted"
    assert "replay sequence exhausted for this request" in error.error.message
    assert " --next --response ANSWER.json" in error.error.message


def test_the_run_log_holds_mcp_calls_and_compare_reads_them(
    tmp_path: Path, recording: tuple[Path, dict[str, Any]]
) -> None:
    _record(tmp_path, recording)
    replay = manifest(tmp_path, "replay")
    for log, city in (("base.log", "Paris"), ("cand.log", "London")):

        async def main(city: str = city, log: str = log) -> None:
            params = relay_params(replay, ["unused"], "--log", str(tmp_path / log))
            async with connect(params) as (session, _):
                await session.list_tools()
                with contextlib.suppress(MCPError):  # the candidate's London misses
                    await session.call_tool("forecast", {"city": city})

        anyio.run(main)
    lines = [json.loads(x) for x in (tmp_path / "cand.log").read_text().splitlines()]
    assert [(x["kind"], x["vendor"], x["path"], x["outcome"]) for x in lines] == [
        ("mcp", "mcp", "initialize", "served"),
        ("mcp", "mcp", "tools/list", "served"),
        ("mcp", "mcp", "tools/call", "miss"),
    ]
    compared = _cli("compare", tmp_path / "base.log", tmp_path / "cand.log")
    assert compared.returncode == 1, compared.stdout + compared.stderr
    assert "params.arguments.city" in compared.stdout


def test_a_server_request_passes_through_while_recording_and_is_not_asked_on_replay(
    tmp_path: Path,
) -> None:
    asked: list[str] = []

    async def elicit(context: Any, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"name": "Ada"})

    async def main(manifest_path: Path) -> Any:
        params = relay_params(manifest_path, server_command(tmp_path / "started"))
        async with connect(params, elicitation=elicit) as (session, _):
            return (await session.call_tool("ask", {})).structured_content

    assert anyio.run(main, manifest(tmp_path, "record")) == {"result": "Hello Ada"}
    assert asked == ["Whom shall I greet?"]
    assert anyio.run(main, manifest(tmp_path, "replay")) == {"result": "Hello Ada"}
    assert asked == ["Whom shall I greet?"]  # the recorded result, nobody asked again
    assert len(started_pids(tmp_path / "started")) == 1


def test_recording_onto_a_fixture_that_holds_initialize_still_initializes_the_server(
    tmp_path: Path,
) -> None:
    record = manifest(tmp_path, "record")
    started = tmp_path / "started"

    async def main(tool: str) -> Any:
        async with connect(relay_params(record, server_command(started))) as (session, stderr):
            result = (await session.call_tool(tool, {"city": "Oslo"})).structured_content
        return result, stderr.text

    assert anyio.run(main, "forecast")[0] == {"result": "Oslo: sunny for 1 day(s)"}
    # initialize is answered from the fixture now; the server must be initialized anyway
    # before it is asked the new call.
    result, err = anyio.run(main, "tick")
    assert result == {"result": 1}
    # initialize and the tools/list the SDK asks before a call came from the fixture.
    assert "3 served" in err and "(1 recorded)" in err


def test_the_stateless_protocol_replays_whoever_the_client_says_it_is(tmp_path: Path) -> None:
    from mcp.client import Client
    from mcp.types import Implementation

    async def main(manifest_path: Path, command: list[str], name: str) -> Any:
        client = Client(relay_params(manifest_path, command), client_info=Implementation(
            name=name, version="1"
        ))  # fmt: skip
        async with client:
            tools = await client.list_tools()
            call = await client.call_tool("forecast", {"city": "Rome"})
        return [tool.name for tool in tools.tools], call.structured_content

    recorded = anyio.run(main, manifest(tmp_path, "record"), server_command(tmp_path / "s"), "a")
    assert recorded == (["forecast", "tick", "now", "count", "ask", "wait", "crash"],
                        {"result": "Rome: sunny for 1 day(s)"})  # fmt: skip
    entries = load_fixture(tmp_path / "tools.jsonl").snapshot()["entries"]
    assert entries == 3  # server/discover, tools/list, tools/call
    assert anyio.run(main, manifest(tmp_path, "replay"), ["unused"], "b") == recorded


def test_an_agent_frameworks_mcp_client_replays(tmp_path: Path) -> None:
    agents_mcp = pytest.importorskip("agents.mcp")

    async def main(manifest_path: Path, command: list[str]) -> Any:
        relay = relay_params(manifest_path, command)
        server = agents_mcp.MCPServerStdio(
            params={"command": relay.command, "args": relay.args, "env": relay.env},
            name="weather",
        )
        async with server:
            tools = await server.list_tools()
            result = await server.call_tool("forecast", {"city": "Lima", "days": 2})
        return [tool.name for tool in tools], result.model_dump(mode="json")["content"]

    recorded = anyio.run(main, manifest(tmp_path, "record"), server_command(tmp_path / "s"))
    assert recorded[1][0]["text"] == "Lima: sunny for 2 day(s)"
    trace = tmp_path / "ran"
    assert anyio.run(main, manifest(tmp_path, "replay"), ["touch", str(trace)]) == recorded
    assert not trace.exists()
