"""The CLI is a table: one ``LazyCommand`` line per subcommand in ``COMMANDS``, pointing at
the ``Command`` record its module holds, and the parser is built by looping over the table
(docs/architecture.md, "Layers"; replay_actor/cli/__init__.py). A command's module is
imported only when the command is chosen."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

import replay_actor
from replay_actor.cli import COMMANDS, Arg, Command, OneOf, build_parser, main


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


def _declared(command: Command) -> set[str]:
    members: list[Arg] = []
    for argument in command.arguments:
        members.extend(argument.args if isinstance(argument, OneOf) else (argument,))
    return {name for member in members for name in member.names}


def _parsed(parser: argparse.ArgumentParser) -> set[str]:
    return {
        name
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction)
        for name in (action.option_strings or [action.dest])
    }


def test_every_line_of_the_table_points_at_a_command_record() -> None:
    names = [line.name for line in COMMANDS]
    assert len(set(names)) == len(names)
    for line in COMMANDS:
        assert isinstance(line.load(), Command), line.target
        assert line.target.startswith("replay_actor.cli."), line.target


def test_the_subcommands_are_the_lines_in_order_and_filled_when_chosen(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = build_parser()
    subparsers = _subparsers(parser)
    assert list(subparsers) == [line.name for line in COMMANDS]
    # Not chosen yet: nothing of the record is in the parser.
    assert all(_parsed(sub) == set() for sub in subparsers.values())
    for line in COMMANDS:
        with pytest.raises(SystemExit) as exited:
            parser.parse_args([line.name, "--help"])
        assert exited.value.code == 0
        page = capsys.readouterr().out
        command = line.load()
        sub = subparsers[line.name]
        assert sub.get_default("handler") is command.handler
        assert sub.description == command.description
        assert sub.epilog == command.epilog
        assert _parsed(sub) == _declared(command), line.name
        assert command.epilog in page


def test_help_lists_every_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    listing = capsys.readouterr().out
    for line in COMMANDS:
        assert f"    {line.name}" in listing and line.help[:40] in listing


_IMPORTED = """
import sys
from replay_actor.cli import main
code = main(sys.argv[1:])
mine = sorted(m for m in sys.modules if m.startswith(("replay_actor", "msgspec")))
print(code, *mine, file=sys.stderr)
"""


def _imported_by(*argv: str) -> set[str]:
    """The replay_actor and msgspec modules a fresh interpreter imports to run the CLI."""
    # PYTHONPATH pins the subprocess to the code this test process imported.
    parent = str(Path(replay_actor.__file__).resolve().parent.parent)
    done = subprocess.run(
        [sys.executable, "-c", _IMPORTED, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=parent),
        check=False,
    )
    code, *modules = done.stderr.splitlines()[-1].split()
    assert code == "0", done.stderr
    return set(modules)


def _starting(modules: set[str], *prefixes: str) -> set[str]:
    return {m for m in modules if m.startswith(prefixes)}


@pytest.mark.usefixtures("no_leaks")
def test_help_imports_no_command_module_and_nothing_heavy() -> None:
    modules = _imported_by("--help")
    assert _starting(modules, "replay_actor.cli.") == {"replay_actor.cli._shared"}
    assert _starting(modules, "msgspec", "replay_actor.vendors", "replay_actor.fixture") == set()
    assert _starting(modules, "replay_actor.replay", "replay_actor.authoring") == set()


@pytest.mark.usefixtures("no_leaks")
def test_a_command_imports_its_own_module_only() -> None:
    modules = _imported_by("validate", "--help")
    assert _starting(modules, "replay_actor.cli.") == {
        "replay_actor.cli._shared",
        "replay_actor.cli.fixtures",
    }
    assert _starting(modules, "replay_actor.replay", "replay_actor.authoring") == set()
    modules = _imported_by("serve", "--help")
    assert _starting(modules, "replay_actor.cli.") == {
        "replay_actor.cli._shared",
        "replay_actor.cli.serving",
    }
    assert _starting(modules, "msgspec", "replay_actor.frontdoor") == set()
