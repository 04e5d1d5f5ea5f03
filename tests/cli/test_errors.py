"""Every CLI error names its thing and the next step, with no traceback (issue 26): each
command is fed broken manifests, fixtures and arguments through the real console
script, and says one clear line, with the documented exit status (docs/cli.md)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("no_leaks")

CLI = str(Path(sys.executable).parent / "replay-actor")
HASH = "sha256:" + "a" * 64
SDK_BODY = {"model": "gpt-4.1-mini", "messages": [{"role": "user", "content": "hi"}]}
#: Planted in every input: it must never come back in an error.
SECRET = "sk-planted-7f3a9c"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "sdk.json").write_text(json.dumps({**SDK_BODY, "user": SECRET}))
    (tmp_path / "fixture.jsonl").write_text("")
    (tmp_path / "bad.toml").write_text(f'[provider\nkind = "{SECRET}"\n')
    (tmp_path / "latin1.toml").write_bytes(b'[provider]\nkind = "replay"\n# caf\xe9\n')
    (tmp_path / "nofixture.toml").write_text(
        '[provider]\nkind = "replay"\nfixture = "gone.jsonl"\n'
    )
    (tmp_path / "unknown.toml").write_text(
        f'[provider]\nkind = "replay"\nfixture = "fixture.jsonl"\nmodel = "{SECRET}"\n'
    )
    (tmp_path / "ok.toml").write_text('[provider]\nkind = "replay"\nfixture = "fixture.jsonl"\n')
    (tmp_path / "notutf8.jsonl").write_bytes(b'\xff{"secret": "' + SECRET.encode() + b'"}\n')
    return tmp_path


def cli(folder: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CLI, *argv], cwd=folder, capture_output=True, text=True, timeout=60, check=False
    )


def check(done: subprocess.CompletedProcess[str], status: int, *said: str) -> None:
    text = done.stdout + done.stderr
    assert done.returncode == status, text
    assert "Traceback" not in text
    assert SECRET not in text
    for words in said:
        assert words in done.stderr, done.stderr


@pytest.mark.parametrize("command", ["run", "serve"])
def test_broken_manifests_name_the_resolved_path(folder: Path, command: str) -> None:
    tail = ["--", "true"] if command == "run" else []
    for name, words in [
        ("bad.toml", "the manifest is not valid TOML at line 1, column 10"),
        ("latin1.toml", "the manifest is not valid UTF-8"),
        ("missing.toml", "the manifest file does not exist"),
        ("unknown.toml", "unknown key provider.model"),
    ]:
        done = cli(folder, command, name, *tail)
        check(done, 1, f"replay-actor: error: {folder / name}: {words}")


@pytest.mark.parametrize("command", ["run", "serve"])
def test_a_missing_fixture_names_its_resolved_path_and_where_paths_resolve(
    folder: Path, command: str
) -> None:
    tail = ["--", "true"] if command == "run" else []
    done = cli(folder, command, "nofixture.toml", *tail)
    check(
        done,
        1,
        f"{folder / 'gone.jsonl'}: fixture rejected: file_missing",
        f"resolves against the manifest's folder, {folder}",
        "replay-actor init",
    )


@pytest.fixture
def taken_port() -> Iterator[int]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    yield sock.getsockname()[1]
    sock.close()


@pytest.mark.parametrize("command", ["run", "serve"])
def test_a_port_in_use_is_named(folder: Path, command: str, taken_port: int) -> None:
    tail = ["--", "true"] if command == "run" else []
    done = cli(folder, command, "--port", str(taken_port), "ok.toml", *tail)
    check(done, 1, f"cannot listen on 127.0.0.1:{taken_port}: the address is already in use")


@pytest.mark.parametrize("command", ["hash", "lookup fixture.jsonl", "explain fixture.jsonl"])
def test_an_sdk_body_read_as_a_neutral_request_says_from(folder: Path, command: str) -> None:
    done = cli(folder, *command.split(), "sdk.json")
    check(done, 1, "sdk.json: this looks like a vendor SDK's request body", "--from openai")
    # and with --from it is read (explain then needs a sidecar, and says so)
    fixed = cli(folder, *command.split(), "sdk.json", "--from", "openai")
    assert "this looks like" not in fixed.stderr
    assert fixed.returncode in ((1,) if "explain" in command else (0, 3)), fixed.stderr


@pytest.mark.parametrize(
    ("argv", "status", "said"),
    [
        (["validate", "gone.jsonl"], 1, ""),
        (["inspect", "notutf8.jsonl"], 1, "notutf8.jsonl: rejected: invalid_utf8 at line 1"),
        (["lookup", "gone.jsonl", "sdk.json", "--from", "openai"], 1, "gone.jsonl: rejected"),
        (["hash", "gone.json"], 1, "gone.json: cannot read request"),
        (["explain", "fixture.jsonl", HASH], 1, f"holds no request for {HASH}"),
        (["explain", "fixture.jsonl", "sha256:zz"], 2, "a request hash is 'sha256:'"),
        (["add", "nodir/f.jsonl", HASH, "--content", "x"], 1, "the folder nodir does not exist"),
        (["add", "fixture.jsonl", HASH, "--content", "x", "--next", "--replace"], 2, "not allowed"),
        (["add", "notutf8.jsonl", HASH, "--content", "x"], 1, "notutf8.jsonl: rejected"),
        (["remove", "gone.jsonl", HASH], 1, "gone.jsonl: the fixture does not exist"),
        (["remove", "fixture.jsonl", HASH], 1, f"holds no entry for {HASH}"),
        (["stub", "sha256:12", "--content", "x"], 2, "a request hash is 'sha256:'"),
        (["coverage", "fixture.jsonl", "gone.jsonl"], 1, "gone.jsonl: cannot read"),
        (["init", "nodir"], 1, "nodir: no such folder"),
        (["run", "ok.toml"], 2, "a COMMAND is required after --"),
        (["run", "--seal", "bogus", "ok.toml", "--", "true"], 2, "invalid choice"),
        (["serve"], 2, "required: MANIFEST"),
        (["frobnicate"], 2, "invalid choice"),
    ],
)
def test_every_command_fails_with_one_clear_line(
    folder: Path, argv: list[str], status: int, said: str
) -> None:
    done = cli(folder, *argv)
    check(done, status, said)


def test_the_top_level_help_tells_no_network_lie(folder: Path) -> None:
    done = cli(folder, "--help")
    check(done, 0)
    assert "Nothing here contacts a network" not in done.stdout
    assert "live or record manifest contact a network" in " ".join(done.stdout.split())
    for command in ("init", "remove", "run", "serve", "add"):
        assert f"    {command} " in done.stdout


def test_a_bug_is_one_line_naming_its_type_never_a_traceback(folder: Path) -> None:
    # A handler that raises what no branch of main expects (here: a RuntimeError from a
    # command object planted through the documented extension point, the table).
    program = (
        "import sys, replay_actor.cli as cli\n"
        "from replay_actor.cli._shared import Command, LazyCommand\n"
        "def boom(args):\n"
        f"    raise RuntimeError({SECRET!r})\n"
        "BOOM = Command('boom', '', (), boom)\n"
        "sys.modules['__main__'].BOOM = BOOM\n"
        "cli.COMMANDS = (*cli.COMMANDS, LazyCommand('boom', 'x', '__main__:BOOM'))\n"
        "sys.exit(cli.main(['boom']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=dict(os.environ),
    )
    check(done, 1, "replay-actor: error: internal error (RuntimeError); please report it")
