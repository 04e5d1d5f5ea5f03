"""The front door's commands: ``serve`` and ``run`` (docs/cli.md, docs/front-door.md):
their arguments and handlers. The server, the application and the child command are
``frontdoor/``'s, imported when a handler runs (they need the ``serve`` extra).

Runs in: the ``replay-actor`` process, which owns the acquisition. Errors reach ``main``
as one line naming the thing (exit 1): the manifest's resolved path for a bad manifest,
the fixture's resolved path for a rejected fixture, the address for a port in use.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Final

from ._shared import EXIT_USAGE, PROG, CLIError, Command, arg

if TYPE_CHECKING:
    from .._errors import FixtureError
    from ..manifest import Manifest

__all__ = ["RUN", "SERVE"]

_EPILOG_SERVE: Final = (
    "prints one JSON line when ready:\n"
    '  {"url", "openai_base_url", "anthropic_base_url", "gemini_base_url", "token"}\n'
    "every request must carry the token (Authorization: Bearer, x-api-key or\n"
    "x-goog-api-key). Runs until SIGINT/SIGTERM, then releases the provider: exit 0."
)
_EPILOG_RUN: Final = (
    "COMMAND gets every vendor client's base-URL variable (OPENAI_BASE_URL,\n"
    "ANTHROPIC_BASE_URL, GOOGLE_GEMINI_BASE_URL, GROQ_BASE_URL, ...) pointing at the\n"
    "front door and every key variable set to the run's token; no real key reaches it.\n"
    "A replay manifest's COMMAND is sealed: it can reach the front door and nothing else.\n"
    "Each miss is printed on stderr as it happens, with the `replay-actor add` command\n"
    "that answers it. At exit one summary line on stderr: served, missed, exhausted,\n"
    "blocked; the fixture.\n\n"
    "example:\n"
    "  replay-actor run eval.toml -- python my_eval.py\n\n"
    "exit: COMMAND's status (128+N if it died of signal N); 4 if COMMAND exited 0 but\n"
    "a call failed (a miss, ...; an ignored host is no failure); 127 not found; 126\n"
    "cannot execute; 1 bad manifest, --seal namespace where no namespace can be made,\n"
    "or a manifest clock where no usable libfaketime is found"
)

_ADDRESS: Final = (
    arg("manifest", metavar="MANIFEST", help="the manifest (TOML file)"),
    arg("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1, loopback only)"),
    arg("--port", type=int, default=0, help="port to bind (default: 0, any free port)"),
    arg(
        "--log",
        metavar="FILE",
        default=None,
        help="append one JSON line per call to FILE (the run log, for `compare`); "
        "overrides the manifest's log key",
    ),
)


@contextlib.contextmanager
def _named_errors(
    path: str,
    host: str = "127.0.0.1",
    port: int = 0,
    read: Callable[[str], Manifest] | None = None,
) -> Iterator[Manifest]:
    """Read the manifest (the one reading of its file: everything after takes the
    ``Manifest`` yielded; ``read`` reads it, ``read_manifest`` by default) and turn what
    starting the front door (or ``mcp``) can raise into one line that names the thing:
    the manifest's resolved path, the fixture's resolved path (and where relative paths
    resolve), the address in use."""
    from .._errors import FixtureError, ManifestError
    from ..manifest import read_manifest

    where = os.path.abspath(path)
    manifest: Manifest | None = None
    try:
        manifest = (read_manifest if read is None else read)(path)
        yield manifest
    except ManifestError as exc:
        raise CLIError(f"{where}: {exc}") from None
    except FixtureError as exc:
        if manifest is None:  # pragma: no cover - reading raises ManifestError only
            raise
        raise CLIError(_fixture_problem(where, manifest, exc)) from None
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        raise CLIError(
            f"cannot listen on {host}:{port}: the address is already in use; choose "
            "another --port (or --port 0, the default, for any free port)"
        ) from None


def _fixture_problem(where: str, manifest: Manifest, exc: FixtureError) -> str:
    line = "" if exc.line is None else f" at line {exc.line}"
    text = f"{manifest.fixture}: fixture rejected: {exc.reason}{line}"
    if exc.reason == "file_missing":
        folder = os.path.dirname(where)
        text += (
            f" (a relative fixture path resolves against the manifest's folder, {folder}; "
            "`replay-actor init` starts an empty fixture)"
        )
    return text


def _cmd_serve(args: argparse.Namespace) -> int:
    from ..frontdoor.server import serve_forever

    with _named_errors(args.manifest, args.host, args.port) as manifest:
        return serve_forever(manifest, args.host, args.port, log=args.log)


def _options_after_manifest(args: argparse.Namespace, command: list[str]) -> list[str] | int:
    """COMMAND, with ``run``'s options written after MANIFEST (``run eval.toml --seal
    off -- python app.py``, the order docs/front-door.md shows) read into ``args``:
    argparse hands everything after the manifest to COMMAND. Options go before ``--``;
    without one, a leading option is a usage error (COMMAND would be the option)."""
    if not command or not command[0].startswith("-") or command[0] == "--":
        return command[1:] if command[:1] == ["--"] else command
    if "--" not in command:
        print(
            f"{PROG} run: error: {command[0]} after MANIFEST needs `--` before COMMAND "
            f"(run MANIFEST {command[0]} ... -- COMMAND)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    end = command.index("--")
    parser = argparse.ArgumentParser(prog=f"{PROG} run MANIFEST", add_help=False)
    for option in _RUN_OPTIONS:
        parser.add_argument(*option.names, **{**option.options, "default": argparse.SUPPRESS})
    try:
        parser.parse_args(command[:end], namespace=args)
    except SystemExit:  # argparse has said what is wrong
        return EXIT_USAGE
    return command[end + 1 :]


def _cmd_run(args: argparse.Namespace) -> int:
    from ..frontdoor.run import RunOptions, run_command

    command = _options_after_manifest(args, list(args.command))
    if isinstance(command, int):
        return command
    if not command:
        print(f"{PROG} run: error: a COMMAND is required after --", file=sys.stderr)
        return EXIT_USAGE
    with _named_errors(args.manifest, args.host, args.port) as manifest:
        options = RunOptions((args.host, args.port), args.seal, args.allow_misses, args.log)
        return run_command(manifest, command, options)


SERVE: Final = Command(
    description=(
        "Serve the OpenAI (chat, Responses), Anthropic and Gemini APIs over HTTP from\n"
        "the manifest's provider (replay, live or record), owned by this process."
    ),
    epilog=_EPILOG_SERVE,
    arguments=_ADDRESS,
    handler=_cmd_serve,
)
#: ``run``'s options but MANIFEST and COMMAND, accepted before MANIFEST or after it.
_RUN_OPTIONS: Final = (
    *_ADDRESS[1:],
    arg(
        "--seal",
        choices=("namespace", "proxy", "off"),
        default=None,
        help="how COMMAND is kept from other endpoints (default: namespace, else proxy, "
        "for a replay manifest; off for live and record)",
    ),
    arg(
        "--allow-misses",
        action="store_true",
        help="exit with COMMAND's status even if a call failed (a miss, ...)",
    ),
)
RUN: Final = Command(
    description=(
        "Start the front door for the manifest's provider in this process and run\n"
        "COMMAND with its environment pointed at it: any application, any language,\n"
        "no code changed."
    ),
    epilog=_EPILOG_RUN,
    arguments=(
        _ADDRESS[0],
        *_RUN_OPTIONS,
        arg(
            "command", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARGS...]", help="the command"
        ),
    ),
    handler=_cmd_run,
)
