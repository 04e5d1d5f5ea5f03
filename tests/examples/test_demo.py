"""``make demo`` works: it finishes, shows what it promises, and leaves no process behind."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import psutil
import pytest

from replay_actor import load_fixture, request_hash
from tests.support.paths import ROOT

DEMO = ROOT / "examples" / "demo.py"
FIXTURE = ROOT / "examples" / "demo" / "fixture.jsonl"
REQUESTS = ROOT / "examples" / "demo" / "requests.json"
HASH = r"sha256:[0-9a-f]{64}"
MARK = "REPLAY_ACTOR_DEMO_TEST_MARK"


def _marked(token: str) -> list[psutil.Process]:
    """Live processes that inherited this run's marker (the demo, its runs, its actors)."""
    found = []
    for proc in psutil.process_iter(["status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue  # dead: only waiting for its parent (or init) to collect it
            if proc.environ().get(MARK) == token:
                found.append(proc)
        except psutil.Error:
            continue  # gone meanwhile, or not ours to read
    return found


@pytest.fixture(scope="module")
def demo() -> tuple[subprocess.CompletedProcess[str], str]:
    token = uuid.uuid4().hex
    env = {**os.environ, MARK: token}
    result = subprocess.run(
        [sys.executable, str(DEMO)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return result, token


@pytest.mark.timeout(90)
def test_demo_exits_zero(demo: tuple[subprocess.CompletedProcess[str], str]) -> None:
    result, _ = demo
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr == ""


@pytest.mark.timeout(90)
def test_demo_shows_identical_answers(demo: tuple[subprocess.CompletedProcess[str], str]) -> None:
    out = demo[0].stdout
    assert "identical answers: yes" in out
    for step in ("triage", "lookup", "draft"):
        assert re.search(rf"^  {step}\s.*\sidentical$", out, re.MULTILINE), step
    assert "(attempt 3)" in out  # the retry loop walked the whole sequence


@pytest.mark.timeout(90)
def test_demo_shows_the_miss_and_its_fix(
    demo: tuple[subprocess.CompletedProcess[str], str], tmp_path: Path
) -> None:
    out = demo[0].stdout
    miss = re.search(
        rf"message    no replay fixture matches this request \(request_hash: ({HASH})\)$",
        out,
        re.MULTILINE,
    )
    assert miss is not None, out
    assert "exception  ReplayMiss" in out
    digest = miss.group(1)
    workflow = json.loads(REQUESTS.read_text(encoding="utf-8"))
    assert digest == request_hash(workflow["candidate_only"]["request"])
    # The fix is add's, as everywhere else: never a shell append to the tracked fixture.
    fix = re.search(
        rf"^    (\.venv/bin/replay-actor add examples/demo/fixture\.jsonl {digest} .+)$", out, re.M
    )
    assert fix is not None, out
    assert ">>" not in out
    # Pasted (on a copy: the bundled fixture stays as it is), it answers the miss.
    copy = tmp_path / "fixture.jsonl"
    shutil.copyfile(FIXTURE, copy)
    argv = shlex.split(fix.group(1))
    argv[:3] = [sys.executable, "-m", "replay_actor", "add", str(copy)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert digest not in load_fixture(FIXTURE)
    assert digest in load_fixture(copy)


@pytest.mark.timeout(90)
def test_demo_shows_both_snapshots(demo: tuple[subprocess.CompletedProcess[str], str]) -> None:
    out = demo[0].stdout
    assert re.search(r"^  misses\s+0\s+1$", out, re.MULTILINE), out
    assert re.search(r"^  served\s+5\s+5$", out, re.MULTILINE), out
    snapshot = load_fixture(FIXTURE).snapshot()
    assert f"{snapshot['fixture_set_hash']}  (same for both runs)" in out


@pytest.mark.timeout(90)
def test_demo_leaves_no_process(demo: tuple[subprocess.CompletedProcess[str], str]) -> None:
    _, token = demo
    leftovers = _marked(token)
    actors = [p for p in leftovers if "replay_actor.replay" in " ".join(p.cmdline())]
    assert actors == []
    assert leftovers == []


def test_bundled_fixture_is_generated_from_the_requests() -> None:
    """The committed fixture is exactly what ``demo.py --write-fixture`` would write."""
    sys.path.insert(0, str(DEMO.parent))
    try:
        import demo as module
    finally:
        sys.path.remove(str(DEMO.parent))
    assert FIXTURE.read_bytes() == module.render_fixture(module.load_workflow())
