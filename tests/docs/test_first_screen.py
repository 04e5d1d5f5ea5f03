"""The README's first screen works pasted into a fresh shell, and its authoring loop as
pasted at the root of a clone (issue 26).

The first screen's block (the one after the ``first-screen`` marker) runs in ``bash``
with a clean environment (``HOME``, a ``PATH`` holding only the base interpreter and
the system's commands), in a copy of the repository's files, exactly as written but for
one documented substitution, so the test needs no network: ``pip install`` becomes
``pip install --no-index --no-build-isolation``, with ``PYTHONPATH`` naming this test
environment's packages (the wheels ``pip`` would have downloaded: uvicorn, openai and
their dependencies, and the build backend). The block still makes its own virtual
environment, activates it, installs the copy into it (``replay-actor`` then comes from
that environment's ``bin``), and runs the example application with that environment's
``python``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.support.paths import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
FIRST_SCREEN = re.compile(r"<!-- first-screen[^>]*-->\n```shell\n(.*?)^```", re.S | re.M)
#: The one substitution the test makes (see the module docstring).
OFFLINE = ("pip install ", "pip install --no-index --no-build-isolation ")


def first_screen() -> str:
    found = FIRST_SCREEN.search(README)
    assert found is not None, "README.md has no first-screen block"
    return found[1]


def authoring_loop() -> list[str]:
    """The README's authoring loop: the indented commands after its introduction."""
    start = README.index("authoring loop starts from a miss")
    lines = []
    for line in README[start:].splitlines()[1:]:
        if line.startswith("    replay-actor "):
            lines.append(line.strip())
        elif lines and not line.strip():
            break
    return lines


def copy_of_the_repository(target: Path) -> None:
    """The files a clone has (tracked, and new ones not ignored), copied to ``target``."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        source = ROOT / os.fsdecode(name)
        if not source.is_file():
            continue  # deleted in the working tree
        destination = target / os.fsdecode(name)
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_bytes(source.read_bytes())


def test_the_first_screen_block_is_what_the_issue_asks() -> None:
    block = first_screen()
    assert ". .venv/bin/activate" in block  # the commands after it use the venv's python
    assert "pip install -e '.[serve]' openai" in block  # the smallest install for run
    assert "replay-actor run " in block and "-- python " in block
    assert block.count(OFFLINE[0]) == 1


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.timeout(600)
def test_the_first_screen_runs_in_a_fresh_shell(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    copy_of_the_repository(clone)
    base = Path(os.path.realpath(getattr(sys, "_base_executable", sys.executable))).parent
    env = {
        "HOME": str(tmp_path),
        "PATH": os.pathsep.join([str(base), "/usr/bin", "/bin"]),
        "PYTHONPATH": sysconfig.get_paths()["purelib"],
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "LANG": "C.UTF-8",
    }
    block = first_screen().replace(*OFFLINE)
    done = subprocess.run(
        ["bash", "-c", block],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=500,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "city: Porto" in done.stdout
    assert "food: " in done.stdout
    assert "replay-actor: 2 served, 0 missed, 0 exhausted" in done.stderr
    # the command came from the block's own environment, installed from the copy
    assert (clone / ".venv" / "bin" / "replay-actor").exists()


@pytest.mark.usefixtures("no_leaks")
def test_the_authoring_loop_runs_as_pasted(tmp_path: Path) -> None:
    commands = authoring_loop()
    assert [c.split()[1] for c in commands] == ["explain", "add", "validate", "lookup"]
    copy_of_the_repository(tmp_path)
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    statuses = []
    outputs = []
    for command in commands:
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert "Traceback" not in done.stderr
        statuses.append(done.returncode)
        outputs.append(done.stdout)
    assert statuses == [3, 0, 0, 0], outputs  # explain: a miss, as its comment says
    assert "params.temperature: 0.2 → 0.7" in outputs[0]
    assert '"content": "Pack a light jacket."' in outputs[3]
