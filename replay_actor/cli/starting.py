"""``replay-actor init``: start from nothing, a replay manifest and an empty fixture that
``run`` accepts (docs/cli.md, docs/authoring.md).

Runs in: the ``replay-actor`` process, without a cursor actor. Writes two small files and
prints the next command; never overwrites a file (an existing fixture is kept and used,
an existing manifest refuses).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
from typing import Final

from ._shared import EXIT_OK, CLIError, Command, arg, write

__all__ = ["INIT"]

_MANIFEST_TEXT: Final = """\
# A replay manifest (docs/manifest.md): `replay-actor run` answers every model call
# from the fixture; a call it cannot answer is printed with the command that adds it.
[provider]
kind = "replay"
fixture = {fixture}   # relative to this file's folder
"""


def _create(path: str, data: bytes) -> None:
    """Write a new file; refuse (``FileExistsError``) if one is there, even a link."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with open(fd, "wb", closefd=True) as handle:
        handle.write(data)


def _cmd_init(args: argparse.Namespace) -> int:
    folder: str = args.folder
    if not os.path.isdir(folder):
        raise CLIError(f"{folder}: no such folder (create it first)")
    manifest = os.path.join(folder, args.manifest)
    fixture = os.path.join(folder, args.fixture)
    if os.path.lexists(manifest):
        raise CLIError(
            f"{manifest} already exists; nothing was changed (give --manifest another name)"
        )
    fixture_created = not os.path.lexists(fixture)
    try:
        if fixture_created:
            _create(fixture, b"")
        _create(manifest, _MANIFEST_TEXT.format(fixture=json.dumps(args.fixture)).encode())
    except OSError as exc:
        raise CLIError(f"{folder}: cannot write: {exc.strerror or exc}") from None
    made = "an empty fixture" if fixture_created else "kept, it existed"
    shown = shlex.quote(os.path.normpath(manifest))
    write(
        (
            f"created {os.path.normpath(manifest)} (a replay manifest) for "
            f"{os.path.normpath(fixture)} ({made})\n"
            f"next: replay-actor run {shown} -- python your_app.py\n"
            "  each call the fixture cannot answer is printed on stderr with the\n"
            "  `replay-actor add` command that answers it; paste it, then run again\n"
        ).encode("utf-8", "surrogateescape")
    )
    return EXIT_OK


INIT: Final = Command(
    description=(
        "Start a fixture from nothing: write FOLDER/replay.toml, a replay manifest, and\n"
        "FOLDER/fixture.jsonl, an empty fixture (kept if it exists). Then run your\n"
        "application under `replay-actor run`: every miss is printed with the\n"
        "`replay-actor add` command that answers it."
    ),
    epilog=(
        "example:\n"
        "  replay-actor init\n"
        "  replay-actor run replay.toml -- python app.py\n\n"
        "exit: 0 created, 1 the manifest exists or the folder cannot be written"
    ),
    arguments=(
        arg("folder", nargs="?", default=".", metavar="FOLDER", help="where (default: .)"),
        arg("--manifest", default="replay.toml", help="the manifest's name (default: replay.toml)"),
        arg(
            "--fixture", default="fixture.jsonl", help="the fixture's name (default: fixture.jsonl)"
        ),
    ),
    handler=_cmd_init,
)
