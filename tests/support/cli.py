"""The command line in-process: ``run`` calls ``replay-actor``'s ``main`` and hands back
its exit code and what it printed; ``write_json`` puts a value in a file for it to read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replay_actor.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write_json(path: Path, value: Any) -> str:
    path.write_text(json.dumps(value), encoding="utf-8")
    return str(path)
