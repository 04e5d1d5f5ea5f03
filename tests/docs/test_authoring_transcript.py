"""docs/authoring.md's transcript is real: run its commands again, compare every line.

Each ```console block holds ``$ command`` lines, each followed by that command's output
(stdout and stderr together). All blocks run in order in one bash session started at the
repository root, as a reader would type them; the temporary folder they create is under
this test's own ``TMPDIR``. ``python -m tests.docs.test_authoring_transcript --write``,
from the repository root, reruns them and writes the outputs into the page (what
produced the transcript in the first place).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.paths import ROOT

PAGE = ROOT / "docs" / "authoring.md"
_BLOCK = re.compile(r"```console\n(.*?)```", re.DOTALL)

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(120)]


def transcript(text: str) -> list[tuple[str, str]]:
    """(command, expected output) for every ``$`` line of the page's console blocks."""
    pairs: list[tuple[str, str]] = []
    for block in _BLOCK.findall(text):
        for line in block.splitlines():
            if line.startswith("$ "):
                pairs.append((line[2:], ""))
            elif pairs:
                command, output = pairs[-1]
                pairs[-1] = (command, output + line + "\n")
    return pairs


def replay(commands: list[str], tmpdir: Path) -> list[str]:
    """Run ``commands`` in one bash session from the repository root; their outputs."""
    lines = ["__rc=0"]
    for number, command in enumerate(commands):
        # The marker first, then restore the previous command's status for `echo $?`.
        lines.append(f'printf "\\n@@{number}@@\\n"; (exit $__rc); {{ {command} ; }} 2>&1; __rc=$?')
    env = {**os.environ, "TMPDIR": str(tmpdir), "COLUMNS": "100"}
    env.pop("VIRTUAL_ENV", None)
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-c", "\n".join(lines)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    assert done.stderr == ""
    parts = re.split(r"\n@@(\d+)@@\n", done.stdout)
    outputs = [""] * len(commands)
    for index in range(1, len(parts), 2):
        outputs[int(parts[index])] = parts[index + 1]
    return outputs


def test_the_authoring_transcript_is_what_the_commands_print(tmp_path: Path) -> None:
    pairs = transcript(PAGE.read_text(encoding="utf-8"))
    assert len(pairs) > 10
    outputs = replay([command for command, _ in pairs], tmp_path)
    for (command, expected), got in zip(pairs, outputs, strict=True):
        assert got == expected, f"$ {command}"


def _write() -> None:
    text = PAGE.read_text(encoding="utf-8")
    commands = [command for command, _ in transcript(text)]
    with tempfile.TemporaryDirectory() as tmp:
        outputs = iter(replay(commands, Path(tmp)))

    def fill(match: re.Match[str]) -> str:
        body = ""
        for line in match.group(1).splitlines():
            if line.startswith("$ "):
                body += line + "\n" + next(outputs)
        return "```console\n" + body + "```"

    PAGE.write_text(_BLOCK.sub(fill, text), encoding="utf-8")


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    _write()
