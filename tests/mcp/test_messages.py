"""Every kind of message a client sends, written by hand: requests answered from the
fixture or the server (ping by the relay), notifications passed on or dropped, the
server's own messages passed through while recording, cancellation, and lines that are
no message at all."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from replay_actor.mcp import stdio
from tests.support.mcp_relay import (
    INITIALIZE,
    Raw,
    manifest,
    notification,
    request,
    server_command,
)

pytestmark = pytest.mark.usefixtures("no_leaks")


def _record(tmp_path: Path, *messages: dict[str, Any]) -> list[dict[str, Any]]:
    """A recording session of ``messages`` after the handshake; what the relay wrote
    after the handshake."""
    relay = Raw(manifest(tmp_path, "record"), server_command(tmp_path / "started"))
    relay.send(INITIALIZE)
    assert "result" in relay.receive()
    relay.send(notification("notifications/initialized"), *messages)
    answers, err, status = relay.finish()
    assert status == 0, err
    return answers


def test_ping_is_answered_by_the_relay_and_notifications_are_dropped_in_replay(
    tmp_path: Path,
) -> None:
    (tmp_path / "tools.jsonl").write_text("")  # nothing recorded at all
    relay = Raw(manifest(tmp_path, "replay"), ["unused"])
    relay.send(
        notification("notifications/initialized"),
        notification("notifications/cancelled", {"requestId": 3}),
        notification("notifications/roots/list_changed"),
        request("p", "ping"),
    )
    # Nothing is written for a notification: the first line is ping's answer.
    assert relay.receive() == {"jsonrpc": "2.0", "id": "p", "result": {}}
    relay.send(request(4, "custom/unknown", {"x": 1}))
    missed = relay.receive()
    assert missed["id"] == 4 and missed["error"]["data"]["type"] == "replay_miss"
    _, err, status = relay.finish()
    assert "replay-actor: 0 served, 1 missed" in err  # ping is not counted
    assert status == 4


def test_a_server_error_is_recorded_and_replayed_as_the_same_error(tmp_path: Path) -> None:
    unknown = request(1, "resources/read", {"uri": "notes://nowhere"})
    (recorded,) = _record(tmp_path, unknown)
    assert "error" in recorded
    relay = Raw(manifest(tmp_path, "replay"), ["unused"])
    relay.send(INITIALIZE, {**unknown, "id": "again"})
    answers, err, status = relay.finish()
    assert answers[1] == {**recorded, "id": "again"}
    assert status == 0, err  # the server's own error is an answer, served


def test_progress_passes_through_while_recording_and_the_result_replays(
    tmp_path: Path,
) -> None:
    call = request(2, "tools/call", {
        "name": "count", "arguments": {"n": 3}, "_meta": {"progressToken": "tok"},
    })  # fmt: skip
    progress, result = _record(tmp_path, call)
    assert progress["method"] == "notifications/progress"
    assert progress["params"]["progressToken"] == "tok"  # the client's token, unchanged
    assert result["result"]["structuredContent"] == {"result": 6}
    relay = Raw(manifest(tmp_path, "replay"), ["unused"])
    # Another token (not hashed): the same recorded answer, and no progress replayed.
    relay.send(INITIALIZE, {**call, "params": {**call["params"], "_meta": {"progressToken": 9}}})
    answers, _, status = relay.finish()
    assert [a.get("method") for a in answers] == [None, None]
    assert answers[1]["result"] == result["result"] and status == 0


def test_a_slow_call_holds_up_no_other_and_a_cancelled_one_is_never_answered(
    tmp_path: Path,
) -> None:
    relay = Raw(manifest(tmp_path, "record"), server_command(tmp_path / "started"))
    relay.send(INITIALIZE, notification("notifications/initialized"))
    relay.receive()
    relay.send(
        request(1, "tools/call", {"name": "wait", "arguments": {"seconds": 60}}),
        request(2, "tools/call", {"name": "forecast", "arguments": {"city": "Bern"}}),
    )
    assert relay.receive()["id"] == 2
    relay.send(notification("notifications/cancelled", {"requestId": 1}), request(3, "ping"))
    assert relay.receive()["id"] == 3
    answers, err, status = relay.finish()
    assert answers == [] and status == 0, err
    assert "waited" not in (tmp_path / "tools.jsonl").read_text()  # nothing recorded


@pytest.mark.parametrize(
    ("line", "code"),
    [
        (b"not json", -32700),
        (b'{"jsonrpc": "2.0"}', -32600),
        (b"[1, 2]", -32600),
        (b'{"jsonrpc": "2.0", "id": 1, "method": 7}', -32600),
    ],
)
def test_a_line_that_is_no_message_gets_an_error_with_a_null_id(
    tmp_path: Path, line: bytes, code: int
) -> None:
    (tmp_path / "tools.jsonl").write_text("")
    relay = Raw(manifest(tmp_path, "replay"), ["unused"])
    relay.send(b"", line, request(1, "ping"))
    answers, err, status = relay.finish()
    assert answers[0]["id"] is None and answers[0]["error"]["code"] == code
    assert "not json" not in answers[0]["error"]["message"]  # the line is never quoted
    assert answers[1] == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert "1 invalid" in err and status == 4


def test_a_line_too_long_is_skipped_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stdio, "MAX_LINE_BYTES", 64)
    read, write = os.pipe()  # the lines fit in its buffer: written before reading
    os.write(write, b'{"jsonrpc": "2.0", "id": 1, "method": "' + b"x" * 20_000 + b'"}\n')
    os.write(write, b'{"jsonrpc": "2.0", "id": 2, "method": "ping"}\n')
    os.close(write)

    async def main() -> list[Any]:
        return [item async for item in stdio.client_messages(read)]

    try:
        too_long, ping = anyio.run(main)
    finally:
        os.close(read)
    assert too_long == stdio.BadLine(-32600, "the line is too long")
    assert ping.method == "ping" and ping.id == 2
