"""Every fenced code sample in README.md and docs/ runs as written from the repository root.

A ```python block runs with this interpreter; a ```sh block runs in bash with the
environment's ``replay-actor`` on PATH. Each runs in a scratch copy of the repository's
``examples/`` folder (so a sample's relative paths mean what they mean at the root, and
a sample that appends to a file leaves the repository untouched), with a timeout, and
must exit 0. Indented transcripts (``$ replay-actor ...`` with their output) and
``make``/``pip`` commands are prose, not samples.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^( *)```(python|sh|bash)\n(.*?)^\1```", re.S | re.M)


def _samples() -> list[tuple[str, str, str]]:
    found = []
    for page in PAGES:
        for n, match in enumerate(FENCE.finditer(page.read_text(encoding="utf-8"))):
            indent = len(match.group(1))
            code = "\n".join(line[indent:] for line in match.group(3).splitlines())
            found.append((f"{page.relative_to(ROOT)}#{n}", match.group(2), code))
    return found


SAMPLES = _samples()


def test_the_pages_have_samples() -> None:
    assert any(name.startswith("README.md") for name, _, _ in SAMPLES)
    assert any(name.startswith("docs/sdk.md") for name, _, _ in SAMPLES)


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.timeout(120)
@pytest.mark.parametrize(("name", "language", "code"), SAMPLES, ids=[s[0] for s in SAMPLES])
def test_sample_runs(name: str, language: str, code: str, tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("OPENAI_API_KEY", None)
    env.pop("ANTHROPIC_API_KEY", None)
    if language == "python":
        argv = [sys.executable, "-c", code]
    else:
        argv = ["bash", "-euo", "pipefail", "-c", code]
    done = subprocess.run(
        argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=100, check=False
    )
    assert done.returncode == 0, f"{name} failed:\n{done.stdout}\n{done.stderr}"
