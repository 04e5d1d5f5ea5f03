"""The CLI's ``serve`` and ``run`` commands: their arguments and handlers (docs/cli.md).

Runs in: the ``replay-actor`` process. The CLI registers them with :func:`add_parsers`;
everything they do is in :mod:`.server` and :mod:`.run`. Errors reach the CLI's
``main`` as ``ReplayError`` (a bad manifest, a rejected fixture: exit 1) or ``OSError``
(the address cannot be bound: exit 1).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["add_parsers", "cmd_run", "cmd_serve"]

_EPILOG_SERVE = (
    "prints one JSON line when ready:\n"
    '  {"url", "openai_base_url", "anthropic_base_url", "gemini_base_url", "token"}\n'
    "every request must carry the token (Authorization: Bearer, x-api-key or\n"
    "x-goog-api-key). Runs until SIGINT/SIGTERM, then releases the provider: exit 0."
)
_EPILOG_RUN = (
    "COMMAND gets OPENAI_BASE_URL, OPENAI_API_BASE, ANTHROPIC_BASE_URL and\n"
    "GOOGLE_GEMINI_BASE_URL pointing at the front door, and OPENAI_API_KEY,\n"
    "ANTHROPIC_API_KEY and GEMINI_API_KEY set to the run's token; the manifest's real\n"
    "key never reaches it.\n\n"
    "example:\n"
    "  replay-actor run eval.toml -- python my_eval.py\n\n"
    "exit: COMMAND's status (128+N if it died of signal N); 127 not found; 1 bad manifest"
)


def _address(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("manifest", metavar="MANIFEST", help="the manifest (TOML file)")
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1, loopback only)"
    )
    parser.add_argument(
        "--port", type=int, default=0, help="port to bind (default: 0, any free port)"
    )


def add_parsers(commands: Any) -> None:
    """Add ``serve`` and ``run`` to the CLI's subparsers."""
    formatter = argparse.RawDescriptionHelpFormatter
    serve = commands.add_parser(
        "serve",
        formatter_class=formatter,
        help="serve every vendor API over local HTTP from one acquisition",
        description=(
            "Serve the OpenAI (chat, Responses), Anthropic and Gemini APIs over HTTP from\n"
            "the manifest's provider (replay, live or record), owned by this process."
        ),
        epilog=_EPILOG_SERVE,
    )
    _address(serve)
    serve.set_defaults(handler=cmd_serve)

    run = commands.add_parser(
        "run",
        formatter_class=formatter,
        help="run COMMAND with every vendor SDK pointed at a front door",
        description=(
            "Start the front door for the manifest's provider in this process and run\n"
            "COMMAND with its environment pointed at it: any application, any language,\n"
            "no code changed."
        ),
        epilog=_EPILOG_RUN,
    )
    _address(run)
    run.add_argument(
        "command", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARGS...]", help="the command"
    )
    run.set_defaults(handler=cmd_run)


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
