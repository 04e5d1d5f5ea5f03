"""``replay-actor mcp`` as a process: the server started only to record, and never
outliving the relay however the session ends (the client closes stdin, a signal,
SIGKILL, the server dying mid-call); the exit statuses; the manifests it takes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from replay_actor import ManifestError, open_provider
from replay_actor.mcp import read_mcp_manifest
from tests.support.mcp_relay import (
    INITIALIZE,
    REPLAY_ACTOR,
    Raw,
    manifest,
    notification,
    request,
    server_command,
    started_pids,
)
from tests.support.procs import wait_gone

pytestmark = pytest.mark.usefixtures("no_leaks")

FORECAST = {"name": "forecast", "arguments": {"city": "Paris"}}


def _started(path: Path) -> int:
    """The pid of the one server started so far (waits for it, bounded)."""
    deadline = time.monotonic() + 30
    while not started_pids(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    (pid,) = started_pids(path)
    return pid


def _handshake(relay: Raw) -> None:
    relay.send(INITIALIZE)
    assert relay.receive()["result"]["serverInfo"]["name"] == "weather"
    relay.send(notification("notifications/initialized"))


def test_the_client_closing_stdin_ends_the_relay_and_the_server(tmp_path: Path) -> None:
    started = tmp_path / "started"
    relay = Raw(manifest(tmp_path, "record"), server_command(started))
    _handshake(relay)
    relay.send(request(1, "tools/call", FORECAST))
    # The last request is still answered after stdin closes.
    answers, err, status = relay.finish()
    assert answers[0]["result"]["structuredContent"] == {"result": "Paris: sunny for 1 day(s)"}
    assert status == 0, err
    assert "replay-actor: 2 served, 0 missed, 0 exhausted, 0 blocked; fixture" in err
    assert wait_gone(_started(started))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_ends_the_relay_and_the_server(tmp_path: Path, signum: int) -> None:
    started = tmp_path / "started"
    relay = Raw(manifest(tmp_path, "record"), server_command(started))
    _handshake(relay)
    server = _started(started)
    relay.proc.send_signal(signum)  # stdin stays open: the client did not go
    _, err, status = relay.finish()
    assert status == 128 + signum, err
    assert "1 served" in err
    assert wait_gone(server)


def test_sigkill_of_the_relay_closes_the_servers_stdin_and_it_exits(tmp_path: Path) -> None:
    started = tmp_path / "started"
    relay = Raw(manifest(tmp_path, "record"), server_command(started))
    _handshake(relay)
    server = _started(started)
    relay.proc.kill()
    relay.finish()
    assert wait_gone(server)


def test_a_server_that_dies_mid_call_fails_the_call_and_ends_the_session(
    tmp_path: Path,
) -> None:
    started = tmp_path / "started"
    relay = Raw(manifest(tmp_path, "record"), server_command(started))
    _handshake(relay)
    relay.send(request(5, "tools/call", {"name": "crash", "arguments": {}}))
    answer = relay.receive()
    assert answer["id"] == 5 and answer["error"]["code"] == -32603
    assert "the MCP server stopped answering" in answer["error"]["message"]
    # The relay ends by itself, as the server it stands in for did.
    _, err, status = relay.finish()
    assert status == 4, err
    assert "replay-actor mcp: the MCP server stopped answering" in err
    assert "failed" in err
    assert wait_gone(_started(started))
    assert "crash" not in (tmp_path / "tools.jsonl").read_text()  # nothing recorded


def test_a_server_command_that_cannot_run_exits_as_a_shell_does(tmp_path: Path) -> None:
    missing = Raw(manifest(tmp_path, "record"), ["no-such-mcp-server-here"])
    _, err, status = missing.finish()
    assert status == 127
    assert "replay-actor mcp: no-such-mcp-server-here: command not found" in err
    script = tmp_path / "server.sh"
    script.write_text("#!/bin/sh\n")  # not executable
    denied = Raw(manifest(tmp_path, "record"), [str(script)])
    _, err, status = denied.finish()
    assert status == 126
    assert "cannot execute" in err


def test_a_replay_starts_no_server_and_exits_4_on_a_miss(tmp_path: Path) -> None:
    trace = tmp_path / "ran"
    (tmp_path / "tools.jsonl").write_text("")
    relay = Raw(manifest(tmp_path, "replay"), ["touch", str(trace)])
    relay.send(INITIALIZE)
    answers, err, status = relay.finish()
    assert answers[0]["error"]["code"] == -32010
    assert status == 4, err
    assert not trace.exists()
    allowed = Raw(manifest(tmp_path, "replay"), ["touch", str(trace)], "--allow-misses")
    allowed.send(INITIALIZE)
    assert allowed.finish()[2] == 0
    assert not trace.exists()


def test_usage_errors_say_how_to_call_it(tmp_path: Path) -> None:
    replay = manifest(tmp_path, "replay")
    for argv, says in (
        ([str(replay)], "a SERVER_COMMAND is required after --"),
        ([str(replay), "--name", "w", "--", "python"], "--name: options go before MANIFEST"),
    ):
        done = subprocess.run(
            [REPLAY_ACTOR, "mcp", *argv], capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 2
        assert says in done.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text('[provider]\nkind = "replay"\nfixture = "missing.jsonl"\n')
    done = subprocess.run(
        [REPLAY_ACTOR, "mcp", str(bad), "--", "python"],
        capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 1
    assert "missing.jsonl: fixture rejected: file_missing" in done.stderr


def test_a_live_manifest_passes_through_and_records_nothing(tmp_path: Path) -> None:
    secret = "--token=sk-planted-9f8e7d"  # a server's argument may be a secret
    relay = Raw(manifest(tmp_path, "live"), [*server_command(tmp_path / "started"), secret])
    _handshake(relay)
    relay.send(request(1, "tools/call", {"name": "tick", "arguments": {}}))
    relay.send(request(2, "tools/call", {"name": "tick", "arguments": {}}))
    answers, err, status = relay.finish()
    ticks = sorted(a["result"]["structuredContent"]["result"] for a in answers)
    assert ticks == [1, 2] and status == 0
    assert "live mcp python" in err  # the program's name, never its arguments
    assert "planted" not in err
    assert not list(tmp_path.glob("*.jsonl"))


def test_a_record_or_live_manifest_needs_no_live_table_of_its_own(tmp_path: Path) -> None:
    record = manifest(tmp_path, "record", log="run.log")
    assert read_mcp_manifest(record).fixture == str(tmp_path / "tools.jsonl")
    assert read_mcp_manifest(record).log == str(tmp_path / "run.log")
    assert read_mcp_manifest(manifest(tmp_path, "live")).kind == "live"
    # The model's record manifest, with its live table, is read as it is.
    model = tmp_path / "model.toml"
    model.write_text(
        '[provider]\nkind = "record"\nfixture = "tools.jsonl"\n'
        '[provider.live]\nadapter = "openai"\nmodel = "m"\n'
    )
    assert read_mcp_manifest(model).live is not None
    broken = tmp_path / "broken.toml"
    broken.write_text('[provider]\nkind = "record"\nfixture = "tools.jsonl"\nlive = 3\n')
    with pytest.raises(ManifestError) as caught:
        read_mcp_manifest(broken)
    assert caught.value.key == "provider.live"


def test_the_mcp_adapter_cannot_be_named_in_a_manifest(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as caught:
        open_provider({"provider": {"kind": "live", "adapter": "mcp", "model": "x"}})
    assert caught.value.key == "provider.adapter"
    assert "replay-actor mcp MANIFEST -- SERVER_COMMAND" in str(caught.value)


def test_the_server_gets_the_relays_whole_environment(tmp_path: Path) -> None:
    env = {**os.environ, "REPLAY_ACTOR_MCP_TEST": "seen"}
    probe = tmp_path / "env.json"
    code = (
        f"import json, os; json.dump(dict(os.environ), open({str(probe)!r}, 'w'));"
        "import sys; sys.stdin.read()"
    )
    proc = subprocess.Popen(
        [REPLAY_ACTOR, "mcp", str(manifest(tmp_path, "live")), "--", "python", "-c", code],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not probe.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.communicate(timeout=60)
    assert json.loads(probe.read_text())["REPLAY_ACTOR_MCP_TEST"] == "seen"
