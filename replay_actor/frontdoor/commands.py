"""The CLI's ``serve`` and ``run`` commands: their arguments and handlers (docs/cli.md).

Runs in: the ``replay-actor`` process. The CLI's command table (``cli.SERVE``, ``cli.RUN``)
holds their arguments and calls these handlers;
everything they do is in :mod:`.server` and :mod:`.run`. Errors reach the CLI's
``main`` as ``ReplayError`` (a bad manifest, a rejected fixture: exit 1) or ``OSError``
(the address cannot be bound: exit 1).
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["cmd_run", "cmd_serve"]


def cmd_serve(args: argparse.Namespace) -> int:
    from .server import serve_forever

    return serve_forever(args.manifest, args.host, args.port)


def cmd_run(args: argparse.Namespace) -> int:
    from .run import run_command

    command: list[str] = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        print("replay-actor run: error: a COMMAND is required after --", file=sys.stderr)
        return 2
    return run_command(args.manifest, command, host=args.host, port=args.port)
