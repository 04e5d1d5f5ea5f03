"""The ``mcp`` command: a stand-in for a stdio MCP server (docs/mcp.md, docs/cli.md).

Runs in: the ``replay-actor mcp`` process, started by the application's MCP client in
place of the server. The relay is ``replay_actor/mcp/``'s, imported when the handler
runs (it needs the ``mcp`` extra, the MCP Python SDK). Errors reach ``main`` as one line
naming the thing, as ``run``'s do: the manifest's resolved path for a bad manifest, the
fixture's for a rejected one (exit 1).
"""

from __future__ import annotations

import argparse
import sys
from typing import Final

from ._shared import EXIT_USAGE, PROG, CLIError, Command, arg
from .serving import _named_errors

__all__ = ["MCP"]

_EPILOG: Final = (
    "put it in the application's MCP configuration where the server's command was:\n"
    '  "command": "replay-actor", "args": ["mcp", "eval.toml", "--", "python", "server.py"]\n\n'
    "replay: answers initialize, tools/list, tools/call, resources/read, prompts/get\n"
    "and every other request from the fixture; SERVER_COMMAND is never started.\n"
    "record: starts SERVER_COMMAND and records each answer the fixture lacks.\n"
    "live: starts SERVER_COMMAND and passes everything through, recording nothing.\n"
    "ping is answered here. The request's id and its _meta are never hashed.\n"
    "A miss is a JSON-RPC error the client shows (the miss and its add command), and\n"
    "a line on stderr. At exit one summary line on stderr.\n\n"
    "exit: 0; 4 if a request failed (a miss, ...); 127 not found, 126 cannot execute\n"
    "SERVER_COMMAND; 128+N after signal N; 1 bad manifest or rejected fixture"
)


def _cmd_mcp(args: argparse.Namespace) -> int:
    command: list[str] = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    elif command[:1] and command[0].startswith("-"):  # no command starts so: an option
        print(
            f"{PROG} mcp: error: {command[0]}: options go before MANIFEST "
            "(replay-actor mcp [--name NAME] [--log FILE] MANIFEST -- SERVER_COMMAND)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if not command:
        print(f"{PROG} mcp: error: a SERVER_COMMAND is required after --", file=sys.stderr)
        return EXIT_USAGE
    try:
        from ..mcp.command import read_mcp_manifest, run_mcp
    except ImportError as exc:  # the [mcp] extra is missing
        raise CLIError(
            f"replay-actor mcp needs the MCP Python SDK ({exc.name}): "
            "pip install 'replay-actor[mcp]'"
        ) from None
    with _named_errors(args.manifest, read=read_mcp_manifest) as manifest:
        return run_mcp(
            manifest, command, name=args.name, log=args.log, allow_misses=args.allow_misses
        )


MCP: Final = Command(
    description=(
        "Stand in for a stdio MCP server: answer its client from the manifest's fixture\n"
        "(replay), or start SERVER_COMMAND and record its answers (record) or pass\n"
        "them through (live)."
    ),
    epilog=_EPILOG,
    arguments=(
        arg("manifest", metavar="MANIFEST", help="the manifest (TOML file)"),
        arg(
            "--name",
            default=None,
            help="the server's name, hashed with each request: gives each of several "
            "servers that share a fixture its own answers",
        ),
        arg(
            "--log",
            metavar="FILE",
            default=None,
            help="append one JSON line per request to FILE (the run log, for `compare`); "
            "overrides the manifest's log key",
        ),
        arg(
            "--allow-misses",
            action="store_true",
            help="exit 0 even if a request failed (a miss, ...)",
        ),
        arg(
            "command",
            nargs=argparse.REMAINDER,
            metavar="-- SERVER_COMMAND [ARGS...]",
            help="the MCP server's command (record, live)",
        ),
    ),
    handler=_cmd_mcp,
)
