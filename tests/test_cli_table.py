"""The CLI is a table: one ``Command`` record per subcommand, and the parser is built by
looping over ``COMMANDS`` (docs/architecture.md, "Layers"; replay_actor/cli.py)."""

from __future__ import annotations

import argparse

import pytest

from replay_actor.cli import COMMANDS, Arg, OneOf, build_parser, main


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


def test_the_subcommands_are_the_records_in_order() -> None:
    subparsers = _subparsers(build_parser())
    assert list(subparsers) == [command.name for command in COMMANDS]
    for command in COMMANDS:
        sub = subparsers[command.name]
        assert sub.get_default("handler") is command.handler
        assert sub.description == command.description
        assert sub.epilog == command.epilog


def test_each_record_s_arguments_are_its_parser_s(capsys: pytest.CaptureFixture[str]) -> None:
    subparsers = _subparsers(build_parser())
    for command in COMMANDS:
        members: list[Arg] = []
        for argument in command.arguments:
            members.extend(argument.args if isinstance(argument, OneOf) else (argument,))
        declared = {name for member in members for name in member.names}
        parsed = {
            name
            for action in subparsers[command.name]._actions
            if not isinstance(action, argparse._HelpAction)
            for name in (action.option_strings or [action.dest])
        }
        assert parsed == declared, command.name
    assert main(["--help"]) == 0
    listing = capsys.readouterr().out
    for command in COMMANDS:
        assert f"    {command.name}" in listing and command.help[:40] in listing
