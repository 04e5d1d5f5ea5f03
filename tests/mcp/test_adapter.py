"""The mcp live adapter on its own: a record provider opened by ``open_provider`` asks an
SDK server through it from another thread than the server's event loop (the recorder's
sync path), records what it answers, and the adapter refuses to block its own loop."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from replay_actor import AdapterTable, LiveProviderError, Manifest, load_fixture, open_provider
from replay_actor.mcp.adapter import McpAdapter, adapter_options
from replay_actor.mcp.link import ServerLink
from tests.support.mcp_relay import server_command, started_pids
from tests.support.procs import wait_gone

pytestmark = pytest.mark.usefixtures("no_leaks")

INITIALIZE = {
    "kind": "mcp",
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
FORECAST = {
    "kind": "mcp",
    "method": "tools/call",
    "params": {"name": "forecast", "arguments": {"city": "Kyiv"}},
}


def test_a_record_provider_asks_the_server_from_another_thread(tmp_path: Path) -> None:
    started = tmp_path / "started"
    link = ServerLink(server_command(started), lambda message: None)
    ready, done = threading.Event(), threading.Event()
    refused: list[BaseException] = []

    async def serve() -> None:
        async with link.connected(lambda: None):
            try:  # on the link's own loop the blocking path must refuse, not deadlock
                McpAdapter({"model": "w", "link": link}).complete(FORECAST)
            except LiveProviderError as exc:
                refused.append(exc)
            ready.set()
            await anyio.to_thread.run_sync(done.wait)

    loop = threading.Thread(target=anyio.run, args=(serve,))
    loop.start()
    try:
        assert ready.wait(60)
        table = AdapterTable(adapter="mcp", model="w", options=adapter_options(link))
        manifest = Manifest(kind="record", fixture=str(tmp_path / "t.jsonl"), live=table)
        with open_provider(manifest) as provider:
            answers: list[dict[str, Any]] = [provider.complete(INITIALIZE)]
            answers.append(provider.complete(FORECAST))
            assert provider.snapshot()["recorded"] == 2
    finally:
        done.set()
        loop.join(60)
    assert "cannot block its own event loop" in str(refused[0])
    assert answers[1]["result"]["structuredContent"] == {"result": "Kyiv: sunny for 1 day(s)"}
    assert load_fixture(tmp_path / "t.jsonl").snapshot()["entries"] == 2
    assert wait_gone(started_pids(started)[0])


def test_a_server_that_is_not_running_is_a_live_provider_error() -> None:
    link = ServerLink(["unused"], lambda message: None)
    adapter = McpAdapter({"model": "w", "link": link})
    with pytest.raises(LiveProviderError, match="not running"):
        adapter.complete(FORECAST)
    with pytest.raises(LiveProviderError, match="not running"):
        anyio.run(adapter.acomplete, FORECAST)
