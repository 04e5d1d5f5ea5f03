"""``replay-actor mcp`` driven as an MCP client drives it (tests/mcp/).

- ``manifest(folder, kind, **keys)``: a manifest file for the fixture ``tools.jsonl``;
- ``server_command(started)``: the SDK tool server of ``mcp_server.py``, which writes its
  pid to ``started`` when it starts;
- ``relay_params(...)``: the ``StdioServerParameters`` an application's MCP configuration
  would hold: ``replay-actor mcp MANIFEST -- SERVER_COMMAND``;
- ``connect(params)``: an initialized ``ClientSession`` of the SDK over its
  ``stdio_client``, and the relay's stderr (a file the SDK writes it to);
- ``Raw``: the relay as a plain process, written JSON-RPC lines by hand, for what an SDK
  client never sends (bad lines, a lone notification) and for the exit status.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from mcp import ClientSession
from mcp.client.session import ElicitationFnT
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.support.paths import ROOT

#: The console script, as an MCP configuration names it.
REPLAY_ACTOR = str(Path(sys.executable).parent / "replay-actor")
SERVER = ROOT / "tests" / "support" / "mcp_server.py"


def manifest(folder: Path, kind: str, name: str = "", **keys: Any) -> Path:
    """``folder/NAME.toml`` (NAME: the kind, unless given): a manifest of ``kind`` for the
    fixture ``tools.jsonl`` in ``folder``, with more ``[provider]`` keys."""
    lines = ["[provider]", f'kind = "{kind}"']
    if kind != "live":
        lines.append('fixture = "tools.jsonl"')
    lines += [f"{key} = {json.dumps(value)}" for key, value in keys.items()]
    path = folder / f"{name or kind}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def server_command(started: Path) -> list[str]:
    return [sys.executable, str(SERVER), "--started", str(started)]


def started_pids(started: Path) -> list[int]:
    """The pids of the servers started so far (none: the file does not exist)."""
    if not started.exists():
        return []
    return [int(line) for line in started.read_text().split()]


def relay_params(manifest_path: Path, command: Sequence[str], *flags: str) -> StdioServerParameters:
    args = ["mcp", *flags, str(manifest_path), "--", *command]
    # The whole environment: the test session's mark reaches every process it starts.
    # Started in the manifest's folder, as an application in its project folder is.
    return StdioServerParameters(
        command=REPLAY_ACTOR, args=args, env=dict(os.environ), cwd=manifest_path.parent
    )


class Stderr:
    """The relay's stderr: ``text`` once the session ended (the relay then exited)."""

    text = ""


@contextlib.asynccontextmanager
async def connect(
    params: StdioServerParameters,
    *,
    elicitation: ElicitationFnT | None = None,
    initialize: bool = True,
) -> AsyncIterator[tuple[ClientSession, Stderr]]:
    """A session of the SDK's ``ClientSession`` with the relay (initialized unless told
    otherwise), and the relay's stderr (read ``.text`` after the block)."""
    stderr = Stderr()
    with tempfile.TemporaryFile("w+", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, elicitation_callback=elicitation) as session,
        ):
            if initialize:
                await session.initialize()
            yield session, stderr
        errlog.seek(0)
        stderr.text = errlog.read()


class Raw:
    """``replay-actor mcp MANIFEST [FLAGS] -- COMMAND`` as a plain process: JSON-RPC
    lines in, answers out."""

    def __init__(self, manifest_path: Path, command: Sequence[str], *flags: str) -> None:
        self.proc = subprocess.Popen(
            [REPLAY_ACTOR, "mcp", *flags, str(manifest_path), "--", *command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def send(self, *messages: dict[str, Any] | bytes) -> None:
        assert self.proc.stdin is not None
        for message in messages:
            data = message if isinstance(message, bytes) else json.dumps(message).encode()
            self.proc.stdin.write(data.rstrip(b"\n") + b"\n")
        self.proc.stdin.flush()

    def receive(self) -> dict[str, Any]:
        """The next message the relay writes (bounded by the test's timeout)."""
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, "the relay closed its output"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def finish(self, timeout: float = 60) -> tuple[list[dict[str, Any]], str, int]:
        """Close stdin; the answers not yet read, stderr, and the exit status."""
        out, err = self.proc.communicate(timeout=timeout)
        answers = [json.loads(line) for line in out.splitlines() if line.strip()]
        return answers, err.decode(), self.proc.returncode


def request(
    request_id: int | str, method: str, params: dict[str, Any] | None = None
) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


INITIALIZE = request(
    0,
    "initialize",
    {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "hand", "version": "1"},
    },
)
