"""``replay-actor mcp``: a stand-in for a stdio MCP server (docs/mcp.md).

An agent's tools answer differently from day to day, and a tool's answer enters the
next prompt. In the application's MCP configuration, ``replay-actor mcp MANIFEST --
SERVER_COMMAND`` takes the server's place: replaying, it answers every request from the
fixture and never starts the server; recording, it starts the server and records each
answer, in the same fixture, sidecar, run log and ``compare`` as the model's.

::

    command.py   run_mcp: the manifest's provider, the server, the signals, the summary
                 and the exit status
    relay.py     Relay: each message of the client answered, passed on or dropped
    request.py   the neutral mcp request of a JSON-RPC request (what is hashed) and the
                 JSON-RPC answers of the fixture's answers
    stdio.py     the client's side: messages read from stdin, written to stdout
    link.py      ServerLink: the server's process and connection (record, live)
    adapter.py   McpAdapter: the live adapter that asks the server, so recording goes
                 through the recorder like any other

Runs in: the ``replay-actor mcp`` process. Needs the ``mcp`` extra (the MCP Python SDK,
whose JSON-RPC models parse and validate every message and whose stdio client runs the
server).
"""

from __future__ import annotations

from .command import read_mcp_manifest, run_mcp

__all__ = ["read_mcp_manifest", "run_mcp"]
