"""``replay-actor run``'s command line (``cli/serving.py``): its options are read where
docs/front-door.md writes them, after MANIFEST and before ``--``, as well as before
MANIFEST; an option that would otherwise become COMMAND is a usage error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.frontdoor_util import CLI, replay_manifest, summary, write_fixture

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(120)]

#: A child that asks something the fixture does not hold, swallows the error, exits 0.
SWALLOWING_CHILD = (
    "import openai\n"
    "try:\n"
    "    openai.OpenAI().chat.completions.create(model='m', messages=[{'role': 'user', "
    "'content': 'never recorded'}])\n"
    "except openai.APIStatusError:\n"
    "    pass\n"
)


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    return replay_manifest(tmp_path, write_fixture(tmp_path / "fixture.jsonl", {}))


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "run", *argv], check=False, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("before", [False, True])
def test_run_options_after_the_manifest_are_options(manifest: Path, before: bool) -> None:
    log = manifest.parent / f"run-{before}.log"
    options = ["--seal", "off", "--allow-misses", "--log", str(log)]
    where = [*options, str(manifest)] if before else [str(manifest), *options]
    done = _run(*where, "--", sys.executable, "-c", SWALLOWING_CHILD)
    # --allow-misses: the child's 0, not 4; --seal off: said in the summary; --log: written.
    assert done.returncode == 0, done.stderr
    assert summary(done.stderr).endswith("; not sealed"), done.stderr
    assert "1 missed" in summary(done.stderr)
    (line,) = log.read_text().splitlines()
    assert json.loads(line)["outcome"] == "miss"


def test_an_option_after_the_manifest_without_the_separator_is_a_usage_error(
    manifest: Path,
) -> None:
    done = _run(str(manifest), "--allow-misses", sys.executable, "-c", "print('ran')")
    assert done.returncode == 2
    assert "ran" not in done.stdout
    assert "--allow-misses after MANIFEST needs `--` before COMMAND" in done.stderr


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--seal", "bogus"], "invalid choice: 'bogus'"),
        (["--port", "many"], "invalid int value: 'many'"),
        (["--frobnicate"], "unrecognized arguments: --frobnicate"),
    ],
)
def test_a_bad_option_after_the_manifest_says_what_is_wrong(
    manifest: Path, options: list[str], said: str
) -> None:
    done = _run(str(manifest), *options, "--", sys.executable, "-c", "print('ran')")
    assert done.returncode == 2
    assert "ran" not in done.stdout
    assert said in done.stderr
