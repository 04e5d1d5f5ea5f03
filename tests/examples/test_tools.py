"""The search-agent example (docs/tools.md): its fixture is derived from the agent, and
under ``replay-actor run`` the agent's HTTPS search and its model call both replay from
it, sealed, with neither the search API nor the model reached."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from tests.support.paths import ROOT

HERE = ROOT / "examples" / "tools"

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(120)]


def test_the_fixture_is_what_the_agent_asks() -> None:
    spec = importlib.util.spec_from_file_location(
        "make_search_fixture", HERE / "make_search_fixture.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.fixture_text() == (HERE / "fixture.jsonl").read_text()


def test_the_agent_replays_its_search_and_its_answer_sealed() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "replay_actor", "run", "examples/tools/replay.toml", "--",
         sys.executable, "examples/tools/search_agent.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=100, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "It is sunny in Paris today, 21C with a light west wind.\n"
    assert done.stderr.startswith("replay-actor: 2 served, 0 missed, 0 exhausted, 0 blocked; ")
    assert done.stderr.rstrip().endswith("; sealed (namespace)")
