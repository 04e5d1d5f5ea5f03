"""``compare`` of evaluations run concurrently by LangGraph and by CrewAI under ``replay-actor
run`` (docs/attribution.md): twenty samples, ten at a time, recorded through a loopback
stand-in model; a candidate that changes the prompts of three known samples, replayed.
``compare`` must name exactly those three, each paired with its own baseline sample;
CrewAI retries each missed call three times, and those are attempts of one call, not
samples of their own.

The applications are ordinary: they reach the model through the vendor's SDK and know
nothing of replay-actor. CrewAI lives in an environment of its own (``make crewai``:
its release needs openai<3), and that is what runs it here, as ``run`` runs any
command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.support.arith_vendor import ArithVendor
from tests.support.paths import ROOT

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(600)]


CREWAI_PYTHON = ROOT / ".venv" / "crewai" / "bin" / "python"

#: Twenty questions; the candidate asks to see the working for the three that multiply.
QUESTIONS = [
    f"What is {a} {'times' if n in (4, 11, 17) else '+'} {b}?"
    for n, (a, b) in enumerate(zip(range(3, 23), range(41, 21, -1), strict=True))
]
CHANGED = [QUESTIONS[n] for n in (4, 11, 17)]

_COMMON = f"""
import sys

QUESTIONS = {QUESTIONS!r}
CANDIDATE = "--candidate" in sys.argv


def asked(question):
    # The candidate's one change: ask for the working when the question multiplies.
    return question + " Show your working." if CANDIDATE and " times " in question else question
"""

LANGGRAPH_APP = _COMMON + textwrap.dedent(
    """
    import asyncio
    from typing import TypedDict

    from langchain_openai import ChatOpenAI
    from langgraph.graph import END, START, StateGraph

    llm = ChatOpenAI(model="gpt-4.1-mini", temperature=0, max_retries=0)
    SYSTEM = ("system", "Answer with the number only.")


    class State(TypedDict, total=False):
        question: str
        answer: str
        checked: str


    async def solve(state):
        reply = await llm.ainvoke([SYSTEM, ("user", asked(state["question"]))])
        return {"answer": reply.content}


    async def check(state):
        reply = await llm.ainvoke(
            [SYSTEM, ("user", asked(state["question"])), ("assistant", state["answer"]),
             ("user", "Check it once more: the number only.")]
        )
        return {"checked": reply.content}


    graph = StateGraph(State)
    graph.add_node("solve", solve)
    graph.add_node("check", check)
    graph.add_edge(START, "solve")
    graph.add_edge("solve", "check")
    graph.add_edge("check", END)
    app = graph.compile()
    results = asyncio.run(
        app.abatch(
            [{"question": q} for q in QUESTIONS],
            config={"max_concurrency": 10},
            return_exceptions=True,
        )
    )
    for question, result in zip(QUESTIONS, results):
        print(question, "->", result if isinstance(result, Exception) else result["checked"])
    """
)

CREWAI_APP = _COMMON + textwrap.dedent(
    """
    from concurrent.futures import ThreadPoolExecutor

    from crewai import LLM, Agent, Crew, Task


    def run(question):
        llm = LLM(model="openai/gpt-4.1-mini", temperature=0)
        agent = Agent(role="Calculator", goal="Answer arithmetic", backstory="Exact.", llm=llm)
        task = Task(description=asked(question), expected_output="The number only.", agent=agent)
        try:
            return str(Crew(agents=[agent], tasks=[task]).kickoff())
        except Exception as exc:  # a missed call, after CrewAI's own retries
            return f"failed: {type(exc).__name__}"


    with ThreadPoolExecutor(10) as pool:
        for question, answer in zip(QUESTIONS, pool.map(run, QUESTIONS)):
            print(question, "->", answer)
    """
)


def _run(folder: Path, manifest: str, log: str, python: str, *args: str) -> str:
    env = dict(
        os.environ,
        ARITH_KEY="stand-in-key-0123456789",
        CREWAI_DISABLE_TELEMETRY="true",
        CREWAI_TRACING_ENABLED="false",
        OTEL_SDK_DISABLED="true",
    )
    command = [sys.executable, "-m", "replay_actor", "run", "--log", log, manifest, "--"]
    done = subprocess.run(
        [*command, python, "app.py", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    return f"{done.returncode}\n{done.stdout}\n{done.stderr}"


def _compared(tmp_path: Path, app: str, python: str) -> list[dict[str, Any]]:
    """Record the baseline, replay the candidate, compare: the samples not identical."""
    (tmp_path / "app.py").write_text(app)
    vendor = ArithVendor()
    try:
        (tmp_path / "record.toml").write_text(
            '[provider]\nkind = "record"\nfixture = "fixture.jsonl"\n[provider.live]\n'
            f'adapter = "openai"\nmodel = "gpt-4.1-mini"\nbase_url = "{vendor.base_url}"\n'
            'api_key_env = "ARITH_KEY"\n'
        )
        said = _run(tmp_path, "record.toml", "base.log", python)
        assert said.startswith("0\n") and " 0 missed" in said, said[-3000:]
        recorded = len(vendor.bodies)
    finally:
        vendor.close()
    (tmp_path / "replay.toml").write_text(
        '[provider]\nkind = "replay"\nfixture = "fixture.jsonl"\n'
    )
    said = _run(tmp_path, "replay.toml", "cand.log", python, "--candidate")
    assert said.startswith("4\n"), said[-3000:]  # run's word: some calls missed
    done = subprocess.run(
        [sys.executable, "-m", "replay_actor", "compare", "base.log", "cand.log", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)
    assert document["summary"]["samples"] == 20, document["summary"]
    assert document["summary"]["identical"] == 17
    assert document["baseline"]["calls"] == recorded
    return [s for s in document["samples"] if s["status"] != "identical"]


def _own_question(sample: dict[str, Any]) -> str:
    """The baseline question the sample was paired with; the candidate's must be it with
    the sentence added (the question sits inside the framework's own prompt)."""
    mine, theirs = sample["question"]["baseline"], sample["question"]["candidate"]
    found = next(q for q in QUESTIONS if q in mine)
    assert theirs.startswith(mine.split(found)[0] + found + " Show your working."), sample
    return found


def test_langgraph_samples_pair_with_their_own_questions(tmp_path: Path) -> None:
    pytest.importorskip("langgraph")
    different = _compared(tmp_path, LANGGRAPH_APP, sys.executable)
    assert [s["status"] for s in different] == ["diverged"] * 3
    assert sorted(_own_question(s) for s in different) == sorted(CHANGED)
    for sample in different:
        assert (sample["call"], sample["baseline_calls"], sample["candidate_calls"]) == (1, 2, 1)
        assert [d["path"] for d in sample["differences"]] == ["messages[1].content"]
        assert sample["candidate"]["outcome"] == "miss"


@pytest.mark.slow  # most of a minute or more: make test-tools runs it
def test_crewai_retries_are_attempts_and_samples_pair_with_their_own(tmp_path: Path) -> None:
    if not CREWAI_PYTHON.exists():
        pytest.skip("CrewAI's environment is missing: make crewai")
    different = _compared(tmp_path, CREWAI_APP, str(CREWAI_PYTHON))
    assert [s["status"] for s in different] == ["diverged"] * 3
    assert sorted(_own_question(s) for s in different) == sorted(CHANGED)
    lines = [json.loads(line) for line in (tmp_path / "cand.log").open()]
    misses = [line for line in lines if line["outcome"] == "miss"]
    for sample in different:
        # Each missed call was retried by CrewAI: one call of several attempts, all misses.
        assert (sample["call"], sample["candidate_calls"]) == (1, 1)
        assert sample["candidate"]["attempts"] == 3  # CrewAI tries a failed call 3 times
        assert sample["candidate"]["outcome"] == "miss"
        assert [d["path"] for d in sample["differences"]] == ["messages[1].content"]
    assert sum(s["candidate"]["attempts"] for s in different) == len(misses)
