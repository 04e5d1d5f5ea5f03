"""The ``replay-actor`` command line (docs/cli.md): ``main`` and the command table.

Every command but ``serve`` and ``run`` works in this process, without a cursor actor:
the CLI is the authoring tool around a fixture, not a replay provider. ``main(argv)``
returns the exit code instead of exiting, so tests (and other tools) can call it
in-process.

Exit codes: 0 success, 1 a rejected fixture or an invalid input, 2 a usage error
(argparse's convention), 3 a ``lookup`` or ``explain`` miss.

Boundaries, the same as the library's. A rejected fixture is reported by reason code and
line number only: those are all the loader hands over, and nothing here reads a
fixture's bytes itself. ``lookup --private`` prints no request hash anywhere. An input
the user passes that is not valid JSON is described by position, never quoted. Expected
failures print one ``replay-actor: error: ...`` line to stderr, never a traceback.

The package, one module per command group:

- ``fixtures``: validate, hash, inspect, lookup (read a fixture or a request, change nothing);
- ``starting``: init (a replay manifest and an empty fixture);
- ``authoring``: stub, explain, add, remove, coverage (``authoring/`` does the work);
- ``serving``: serve, run (``frontdoor/`` does the work);
- ``mcp``: mcp, a stand-in for a stdio MCP server (``mcp/`` does the work);
- ``comparing``: compare (``attribution/`` does the work);
- ``_shared``: the table's records, the arguments several commands share, reading inputs,
  writing outputs, exit codes.

``COMMANDS`` below is the table. Each line names a command, gives the help that
``replay-actor --help`` lists, and points at the command's ``Command`` record as
``"module:ATTRIBUTE"``; the module is imported only when the command is chosen, so
``--help`` imports no command module and each command imports only its own.

To add a command: write its handler and its ``Command`` record (description, epilog,
arguments, handler) in the module of its group, or in a new module of this package, and
add its ``LazyCommand`` line to ``COMMANDS`` where ``--help`` should list it. Nothing
else knows the list of commands (a new module also gets its line in the map of
docs/architecture.md). An argument several commands take goes in ``_shared`` as a
function that imports what it needs when it is called, so ``--help`` never pays for it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, Final

from .._errors import ReplayError
from .._version import __version__
from ._shared import (
    EXIT_INVALID,
    EXIT_MISS,
    EXIT_OK,
    EXIT_USAGE,
    PROG,
    Arg,
    CLIError,
    Command,
    LazyCommand,
    OneOf,
    error,
    read_request_arg,
)

__all__ = [
    "COMMANDS",
    "EXIT_INVALID",
    "EXIT_MISS",
    "EXIT_OK",
    "EXIT_USAGE",
    "Arg",
    "Command",
    "LazyCommand",
    "OneOf",
    "build_parser",
    "main",
    "read_request_arg",
]

#: Every subcommand, in the order ``--help`` lists them.
COMMANDS: Final = (
    LazyCommand(
        "init",
        "start from nothing: a replay manifest and an empty fixture",
        "replay_actor.cli.starting:INIT",
    ),
    LazyCommand(
        "validate",
        "check fixture files and list every rejection",
        "replay_actor.cli.fixtures:VALIDATE",
    ),
    LazyCommand(
        "hash",
        "print a request's hash",
        "replay_actor.cli.fixtures:HASH",
    ),
    LazyCommand(
        "inspect",
        "print a fixture's safe snapshot",
        "replay_actor.cli.fixtures:INSPECT",
    ),
    LazyCommand(
        "lookup",
        "print the response a fixture holds for a request",
        "replay_actor.cli.fixtures:LOOKUP",
    ),
    LazyCommand(
        "stub", "print a fixture line for a request hash", "replay_actor.cli.authoring:STUB"
    ),
    LazyCommand(
        "explain",
        "say why a request misses: its nearest recorded request and what differs",
        "replay_actor.cli.authoring:EXPLAIN",
    ),
    LazyCommand(
        "add",
        "add a response to a fixture (a new entry, --next of a sequence, --replace)",
        "replay_actor.cli.authoring:ADD",
    ),
    LazyCommand(
        "remove",
        "remove an entry from a fixture",
        "replay_actor.cli.authoring:REMOVE",
    ),
    LazyCommand(
        "coverage",
        "which entries runs never used, sequences not consumed, requests that missed",
        "replay_actor.cli.authoring:COVERAGE",
    ),
    LazyCommand(
        "compare",
        "compare two run logs: which samples diverged, at which call, and why",
        "replay_actor.cli.comparing:COMPARE",
    ),
    LazyCommand(
        "serve",
        "serve every vendor API over local HTTP from one acquisition",
        "replay_actor.cli.serving:SERVE",
    ),
    LazyCommand(
        "run",
        "run COMMAND with every vendor SDK pointed at a front door",
        "replay_actor.cli.serving:RUN",
    ),
    LazyCommand(
        "mcp",
        "stand in for a stdio MCP server: its answers replayed, recorded or passed through",
        "replay_actor.cli.mcp:MCP",
    ),
)


# -- parser ------------------------------------------------------------------------------


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Keep the hand-wrapped descriptions and examples as written."""


class _CommandParser(argparse.ArgumentParser):
    """A subcommand's parser, filled from its ``Command`` record when it first parses: the
    subcommands ``argparse`` does not choose are never imported."""

    def __init__(self, *, lazy: LazyCommand, **options: Any) -> None:
        super().__init__(**options)
        self.lazy = lazy
        self.loaded: Command | None = None

    def load(self) -> Command:
        """The record, its description, epilog, arguments and handler added (once)."""
        if self.loaded is None:
            command = self.lazy.load()
            self.description = command.description
            self.epilog = command.epilog
            _add_arguments(self, command.arguments)
            self.set_defaults(handler=command.handler)
            self.loaded = command
        return self.loaded

    def parse_known_args(self, *args: Any, **kwargs: Any) -> Any:
        self.load()
        return super().parse_known_args(*args, **kwargs)


def _add_arguments(parser: argparse.ArgumentParser, arguments: tuple[Arg | OneOf, ...]) -> None:
    for argument in arguments:
        if isinstance(argument, OneOf):
            group = parser.add_mutually_exclusive_group(required=argument.required)
            for member in argument.args:
                group.add_argument(*member.names, **member.options)
        else:
            parser.add_argument(*argument.names, **argument.options)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser: one subparser per line of ``COMMANDS``, each filled from its
    record only when it is chosen."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        formatter_class=_Formatter,
        description=(
            "Serve language-model answers from a frozen fixture (run, serve) and author\n"
            "and check fixtures (init, validate, hash, lookup, explain, add, ...). Only\n"
            "run and serve with a live or record manifest contact a network (the\n"
            "model's endpoint); every other command works on local files."
        ),
        epilog=(
            "exit codes: 0 success, 1 rejected fixture or invalid input, 2 usage error,\n"
            "            3 lookup or explain miss; run: COMMAND's, 4 if a call missed\n\n"
            "the first hour:\n"
            "  replay-actor init                                # replay.toml + fixture.jsonl\n"
            "  replay-actor run replay.toml -- python app.py    # each miss: its add command\n"
            "  replay-actor add fixture.jsonl sha256:... --content 'hello'   # as printed\n"
            "  replay-actor run replay.toml -- python app.py    # served"
        ),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=_CommandParser
    )
    for lazy in COMMANDS:
        commands.add_parser(lazy.name, formatter_class=_Formatter, help=lazy.help, lazy=lazy)
    return parser


# -- entry point -------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code (the console script exits with it)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error (code 2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    return _handled(args.handler, args)


def _handled(handler: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a command's handler: its exit code, or the one its error means (the error
    said in one line, never a traceback)."""
    try:
        return handler(args)
    except CLIError as exc:
        error(str(exc))
        return exc.code
    except ReplayError as exc:
        # The library's messages name no payload and (in private mode) no hash; they
        # may name a path the user gave, as errors about files should.
        error(str(exc))
        return EXIT_INVALID
    except OSError as exc:
        return _os_error(exc)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        # A bug: one line naming its type, never a traceback (nor what it says: the
        # message could quote a request or a line).
        error(f"internal error ({type(exc).__name__}); please report it")
        return EXIT_INVALID


def _os_error(exc: OSError) -> int:
    """An OS error's exit code: a closed pipe's quietly, any other's with its cause."""
    if isinstance(exc, BrokenPipeError):
        return _broken_pipe()
    error(exc.strerror or type(exc).__name__)
    return EXIT_INVALID


def _broken_pipe() -> int:
    # The reader went away (`| head`): point stdout at /dev/null so the interpreter's
    # final flush does not raise again, and exit quietly as other Unix tools do.
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    finally:
        os.close(devnull)
    return EXIT_INVALID
