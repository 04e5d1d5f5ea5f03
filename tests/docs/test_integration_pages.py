"""Every code sample of the integration pages runs as written from the repository root.

Python blocks run as scripts; shell lines run with the virtual environment's ``bin``
first on ``PATH`` (what "with .venv active" means). ``pip install`` lines and TOML/ini
blocks are not run (no network in tests; the TOML is shown, not executed).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

PAGES = ["docs/inspect.md", "docs/pydantic-ai.md", "docs/pytest.md"]
FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def blocks(page: str, language: str) -> list[str]:
    text = (ROOT / page).read_text(encoding="utf-8")
    return [body for lang, body in FENCE.findall(text) if lang == language]


def shell_lines(page: str) -> list[str]:
    lines = []
    for body in blocks(page, "sh"):
        for line in body.splitlines():
            command = line.split("  #")[0].strip()
            if command and not command.startswith(("#", "pip ")):
                lines.append(command)
    return lines


PYTHON = [(page, i) for page in PAGES for i in range(len(blocks(page, "python")))]
SHELL = [(page, line) for page in PAGES for line in shell_lines(page)]
README_INSPECT = [
    line.strip()
    for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    if line.startswith("    inspect eval ")
]


def environment(tmp_path: Path) -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    return {
        **os.environ,
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
        "INSPECT_LOG_DIR": str(tmp_path / "logs"),
        "INSPECT_DISPLAY": "plain",
    }


def run(command: list[str] | str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command,
        cwd=ROOT,
        env=environment(tmp_path),
        shell=isinstance(command, str),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_the_pages_have_samples() -> None:
    assert len(PYTHON) >= 4
    assert len(SHELL) >= 4
    assert len(README_INSPECT) == 1


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("page", "index"), PYTHON)
def test_python_sample_runs(page: str, index: int, tmp_path: Path, no_leaks: None) -> None:
    code = blocks(page, "python")[index]
    result = run([sys.executable, "-c", code], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("page", "line"), SHELL + [("README.md", c) for c in README_INSPECT])
def test_shell_sample_runs(page: str, line: str, tmp_path: Path, no_leaks: None) -> None:
    result = run(line, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    if line.startswith("inspect eval"):
        assert "accuracy  1.000" in result.stdout, result.stdout
