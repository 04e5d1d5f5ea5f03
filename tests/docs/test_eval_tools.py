"""docs/eval-tools.md's commands run as pasted, with each tool's latest release: every
``shell`` block of a section, in bash (``-e``: each line must exit 0), from a scratch copy
of ``examples/``, with ``record.toml`` pointed at a loopback stand-in for the model
(tests/support/arith_vendor.py) instead of the vendor. Then the logs must say what the
page says: the baseline asked the model, the replay asked nothing and missed nothing,
and the candidate missed (the calls the baseline never made).

The sections of tools installed elsewhere (promptfoo, lm-evaluation-harness) have no
``shell`` block: their own tests run them. CrewAI runs from its own environment
(``make crewai``), ragas and AutoGen from theirs (``make evaltools``); the Node tools
(OpenAI Agents JS, Mastra) from ``.cache/node-tools`` (``make node-tools``), as a
``node_modules`` in a folder above the scratch copy, where a user's ``npm install`` puts
them."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.arith_vendor import ArithVendor
from tests.support.frontdoor_util import BIN, quiet_env
from tests.support.paths import ROOT

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(900)]

PAGE = ROOT / "docs" / "eval-tools.md"
SHELL = re.compile(r"^```shell\n(.*?)^```$", re.S | re.M)
CREWAI_BIN = ROOT / ".venv" / "crewai" / "bin"
NODE_TOOLS = ROOT / ".cache" / "node-tools" / "node_modules"
EVALTOOLS_BIN = ROOT / ".venv" / "evaltools" / "bin"


def sections() -> dict[str, str]:
    """Each ``## `` section's ``shell`` block, by heading."""
    found = {}
    for part in PAGE.read_text(encoding="utf-8").split("\n## ")[1:]:
        heading, _, body = part.partition("\n")
        blocks = SHELL.findall(body)
        if blocks:
            (found[heading],) = blocks
    return found


def test_the_page_has_a_block_per_tool_it_runs() -> None:
    assert sorted(sections()) == [
        "AutoGen",
        "CrewAI",
        "DeepEval",
        "Inspect AI",
        "LangGraph",
        "Mastra",
        "OpenAI Agents JS",
        "ragas",
    ]


def test_the_manifests_shown_are_the_examples() -> None:
    shown = re.findall(r"^```toml\n# (\S+)\n(.*?)^```$", PAGE.read_text(), re.S | re.M)
    assert [name for name, _ in shown] == ["record.toml", "replay.toml"]
    for name, text in shown:
        assert (ROOT / "examples" / "eval_tools" / name).read_text() == text


def _outcomes(log: Path) -> list[str]:
    return [json.loads(line)["outcome"] for line in log.read_text().splitlines()]


def _pasted(tmp_path: Path, heading: str, path: list[Path], unset: tuple[str, ...] = ()) -> Path:
    """Run the section's block as pasted (without the variables ``unset``, which the
    test's environment would otherwise hand it); the example folder it ran in."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    folder = tmp_path / "examples" / "eval_tools"
    vendor = ArithVendor()
    try:
        record = folder / "record.toml"
        text = record.read_text().replace('"OPENAI_API_KEY"', '"ARITH_KEY"')
        record.write_text(text + f'base_url = "{vendor.base_url}"\n')
        env = quiet_env(
            PATH=os.pathsep.join([*map(str, path), os.environ.get("PATH", "")]),
            ARITH_KEY="stand-in-key-0123456789",
        )
        for name in unset:
            env.pop(name, None)
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", sections()[heading]],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=800,
            check=False,
        )
        assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
        # Only the recording asked the model: one request per call the baseline logged.
        assert len(vendor.bodies) == len(_outcomes(folder / "base.log"))
    finally:
        vendor.close()
    assert set(_outcomes(folder / "base.log")) == {"served"}
    assert set(_outcomes(folder / "again.log")) == {"served"}
    assert "miss" in _outcomes(folder / "cand.log")
    return folder


@pytest.mark.tools  # minutes of a whole tool: make test-tools runs it
def test_langgraph(tmp_path: Path) -> None:
    pytest.importorskip("langgraph")
    _pasted(tmp_path, "LangGraph", [BIN])


@pytest.mark.tools  # minutes of a whole tool: make test-tools runs it
def test_crewai(tmp_path: Path) -> None:
    if not (CREWAI_BIN / "replay-actor").exists():
        pytest.skip("CrewAI's environment is missing: make crewai")
    _pasted(tmp_path, "CrewAI", [CREWAI_BIN])


@pytest.mark.tools  # minutes of a whole tool: make test-tools runs it
def test_inspect_with_and_without_batch(tmp_path: Path) -> None:
    pytest.importorskip("inspect_ai")
    folder = _pasted(tmp_path, "Inspect AI", [BIN])
    assert set(_outcomes(folder / "batch.log")) == {"served"}


@pytest.mark.tools  # minutes of a whole tool: make test-tools runs it
def test_deepeval(tmp_path: Path) -> None:
    pytest.importorskip("deepeval")
    folder = _pasted(tmp_path, "DeepEval", [BIN])
    # The judge's calls were recorded and replayed as the answers' were: three of each.
    assert len(_outcomes(folder / "base.log")) == 6


@pytest.mark.tools  # minutes of a whole tool: make test-tools runs it
def test_ragas(tmp_path: Path) -> None:
    if not (EVALTOOLS_BIN / "replay-actor").exists():
        pytest.skip("ragas's environment is missing: make evaltools")
    folder = _pasted(tmp_path, "ragas", [EVALTOOLS_BIN])
    # Three answers and two judge calls for each.
    assert len(_outcomes(folder / "base.log")) == 9


@pytest.mark.tools  # minutes of a whole tool: make test-tools runs it
def test_autogen(tmp_path: Path) -> None:
    if not (EVALTOOLS_BIN / "replay-actor").exists():
        pytest.skip("AutoGen's environment is missing: make evaltools")
    _pasted(tmp_path, "AutoGen", [EVALTOOLS_BIN])


def _node_tools(tmp_path: Path, *packages: str) -> None:
    """The packages as ``npm install`` in a folder above the example puts them."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    if not all((NODE_TOOLS / package).is_dir() for package in packages):
        pytest.skip(f"{' '.join(packages)} missing from {NODE_TOOLS}: make node-tools")
    (tmp_path / "node_modules").symlink_to(NODE_TOOLS, target_is_directory=True)


@pytest.mark.tools  # a whole tool: make test-tools runs it
def test_openai_agents_js(tmp_path: Path) -> None:
    _node_tools(tmp_path, "@openai/agents")
    # The section sets no tracing switch: run's own OPENAI_AGENTS_DISABLE_TRACING must do.
    folder = _pasted(tmp_path, "OpenAI Agents JS", [BIN], unset=("OPENAI_AGENTS_DISABLE_TRACING",))
    assert len(_outcomes(folder / "base.log")) == 6  # three samples of two turns


@pytest.mark.tools  # a whole tool: make test-tools runs it
def test_mastra(tmp_path: Path) -> None:
    _node_tools(tmp_path, "@mastra/core", "@ai-sdk/openai")
    folder = _pasted(tmp_path, "Mastra", [BIN])
    assert len(_outcomes(folder / "base.log")) == 6  # three samples of two turns
