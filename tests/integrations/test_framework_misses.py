"""A miss reads as a miss through the frameworks (docs/sdk.md, "Failures"): LangChain,
CrewAI, LlamaIndex, Inspect (with and without ``--batch``) and the Vercel AI SDK, each in
an unchanged application under ``replay-actor run``, ask what the fixture does not hold.
The error the framework shows its user (what the application prints of the exception it
caught, or Inspect's sample error) must say that no recorded answer matched and give the
``replay-actor add`` command that answers it; in private mode it holds no hash (the
command says where the hash went). That command, pasted, must make the next run pass.

CrewAI and LlamaIndex's OpenAI LLM need openai<3: they run from their own environment
(``make crewai``); the AI SDK needs node and the npm packages ``make test`` installs."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.frontdoor_util import (
    BIN,
    misses,
    quiet_env,
    replay_manifest,
    run_cli,
    write_fixture,
)
from tests.support.paths import ROOT

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(400)]

OTHER_ENV = ROOT / ".venv" / "crewai" / "bin" / "python"
NODE = shutil.which("node")
NODE_MODULES = ROOT / ".cache" / "node" / "node_modules"
MISS = "no replay fixture matches this request"
#: The add command a normal-mode miss's error holds.
ADD = re.compile(r'replay-actor add (fixture\.jsonl) (sha256:[0-9a-f]{64}) --content "THE ANSWER"')
PRIVATE_ADD = (
    'replay-actor add fixture.jsonl HASH --content "THE ANSWER", HASH withheld (private '
    "data) but written to the owner-only inspection record misses.jsonl"
)

#: Each application prints, as its last line, the exception its framework raised.
SHOW = textwrap.dedent(
    """
    import json, sys
    def show(exc):
        print(json.dumps({"type": type(exc).__name__, "message": str(exc)}))
    """
)
LANGCHAIN = SHOW + textwrap.dedent(
    """
    from langchain_openai import ChatOpenAI
    try:
        print(ChatOpenAI(model="gpt-4.1-mini").invoke("What is 2 + 2?").content)
    except Exception as exc:
        show(exc)
    """
)
CREWAI = SHOW + textwrap.dedent(
    """
    from crewai import LLM, Agent, Crew, Task
    llm = LLM(model="openai/gpt-4.1-mini")
    agent = Agent(role="Calculator", goal="Answer arithmetic", backstory="Exact.", llm=llm)
    task = Task(description="What is 2 + 2?", expected_output="The number.", agent=agent)
    try:
        print(Crew(agents=[agent], tasks=[task]).kickoff())
    except Exception as exc:
        show(exc)
    """
)
LLAMAINDEX = SHOW + textwrap.dedent(
    """
    from llama_index.llms.openai import OpenAI
    try:
        print(OpenAI(model="gpt-4o-mini").complete("What is 2 + 2?").text)
    except Exception as exc:
        show(exc)
    """
)
AI_SDK = textwrap.dedent(
    """
    const { generateText } = require("ai");
    const { openai } = require("@ai-sdk/openai");
    generateText({ model: openai("gpt-4.1-mini"), prompt: "What is 2 + 2?" }).then(
      (done) => console.log(done.text),
      (exc) => console.log(JSON.stringify({ type: exc.name, message: exc.message })),
    );
    """
)


def _env() -> dict[str, str]:
    return quiet_env(
        PATH=f"{BIN}:{quiet_env()['PATH']}",
        NODE_PATH=str(NODE_MODULES),
        CREWAI_DISABLE_TELEMETRY="true",
        CREWAI_TRACING_ENABLED="false",
        OTEL_SDK_DISABLED="true",
        INSPECT_DISPLAY="none",
    )


def _shown(tmp_path: Path, command: list[str], *, private: bool) -> dict[str, Any]:
    """Run ``command`` under ``run`` on ``tmp_path/fixture.jsonl``: what the application
    printed of the framework's exception (its last line), once asked (no retry)."""
    if not (tmp_path / "fixture.jsonl").exists():
        write_fixture(tmp_path / "fixture.jsonl", {})
    manifest = replay_manifest(tmp_path, tmp_path / "fixture.jsonl", private=private)
    done = run_cli(manifest, command, env=_env(), cwd=tmp_path, timeout=300)
    assert done.returncode == 4, done.stdout[-2000:] + done.stderr[-3000:]  # run: it missed
    shown: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return shown


def _reads_as_miss(message: str, *, private: bool) -> str | None:
    """Assert ``message`` names the miss and its add command; the command (normal mode)."""
    assert MISS in message, message
    if private:
        assert PRIVATE_ADD in message, message
        assert "sha256" not in message, message
        return None
    found = ADD.search(message)
    assert found is not None, message
    assert f"(request_hash: {found.group(2)})" in message
    return found.group(0)


def _answered_by_pasting(tmp_path: Path, add: str, rerun: Callable[[], str]) -> None:
    """The add command, pasted with the answer in place of THE ANSWER, makes the rerun
    answer it."""
    pasted = add.replace('"THE ANSWER"', '"The answer is 4."')
    done = subprocess.run(
        shlex.split(pasted),
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert rerun() == "The answer is 4."


def _python_app(
    tmp_path: Path, python: Path | str, source: str, private: bool, attempts: int = 1
) -> None:
    """``attempts``: how often the framework itself asks again after an error (the SDK
    never retries a miss)."""
    (tmp_path / "app.py").write_text(source)
    command = [str(python), "app.py"]
    shown = _shown(tmp_path, command, private=private)
    add = _reads_as_miss(shown["message"], private=private)
    assert len(misses(tmp_path)) == attempts
    if add is not None:
        manifest = replay_manifest(tmp_path, tmp_path / "fixture.jsonl")

        def rerun() -> str:
            done = run_cli(manifest, command, env=_env(), cwd=tmp_path, timeout=300)
            assert done.returncode == 0, done.stderr[-3000:]
            return done.stdout.strip().splitlines()[-1]

        _answered_by_pasting(tmp_path, add, rerun)


def _other_env() -> Path:
    if not OTHER_ENV.exists():
        pytest.skip("CrewAI's and LlamaIndex's environment is missing: make crewai")
    return OTHER_ENV


@pytest.mark.parametrize("private", [False, True], ids=["normal", "private"])
def test_langchain_shows_the_miss_not_a_missing_model(tmp_path: Path, private: bool) -> None:
    pytest.importorskip("langchain_openai")
    _python_app(tmp_path, sys.executable, LANGCHAIN, private)


@pytest.mark.parametrize("private", [False, True], ids=["normal", "private"])
def test_crewai_shows_the_miss_not_a_missing_model(tmp_path: Path, private: bool) -> None:
    # A CrewAI agent tries a failed task three times (max_retry_limit); each is one ask.
    _python_app(tmp_path, _other_env(), CREWAI, private, attempts=3)


@pytest.mark.parametrize("private", [False, True], ids=["normal", "private"])
def test_llamaindex_shows_the_miss(tmp_path: Path, private: bool) -> None:
    _python_app(tmp_path, _other_env(), LLAMAINDEX, private)


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@pytest.mark.parametrize("private", [False, True], ids=["normal", "private"])
def test_vercel_ai_sdk_shows_the_miss(tmp_path: Path, private: bool) -> None:
    if not (NODE_MODULES / "@ai-sdk" / "openai").is_dir():
        pytest.fail(f"the npm packages are not in {NODE_MODULES}: `make test` installs them")
    assert NODE is not None
    (tmp_path / "app.cjs").write_text(AI_SDK)
    shown = _shown(tmp_path, [NODE, "app.cjs"], private=private)
    assert shown["type"] == "AI_APICallError"
    _reads_as_miss(shown["message"], private=private)
    assert len(misses(tmp_path)) == 1


# -- Inspect -------------------------------------------------------------------------------

TASK = textwrap.dedent(
    """
    from inspect_ai import Task, task
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import includes
    from inspect_ai.solver import generate

    QUESTIONS = {"a": "What is 2 + 2?", "b": "What is 3 + 3?"}


    @task
    def arithmetic(ids="a"):  # the samples' ids, one letter each
        samples = [Sample(id=i, input=QUESTIONS[i], target="4") for i in ids]
        return Task(dataset=samples, solver=generate(), scorer=includes())
    """
)


def _inspect(tmp_path: Path, ids: str, batch: bool, private: bool = False) -> dict[str, Any]:
    """``inspect eval`` through its OpenAI provider under ``run``: each sample's error
    message (None where it was answered) and its answer."""
    pytest.importorskip("inspect_ai")
    from inspect_ai.log import read_eval_log

    (tmp_path / "task.py").write_text(TASK)
    (tmp_path / "batch.yaml").write_text("size: 10\nsend_delay: 0.3\ntick: 0.1\n")
    logs = tmp_path / "logs"
    shutil.rmtree(logs, ignore_errors=True)
    command = [str(BIN / "inspect"), "eval", "task.py", "-T", f"ids={ids}"]
    command += ["--model", "openai/gpt-test", "--log-dir", "logs"]
    command += ["--batch", "batch.yaml"] if batch else []
    if not (tmp_path / "fixture.jsonl").exists():
        write_fixture(tmp_path / "fixture.jsonl", {})
    manifest = replay_manifest(tmp_path, tmp_path / "fixture.jsonl", private=private)
    done = run_cli(manifest, command, env=_env(), cwd=tmp_path, timeout=300)
    found = list(logs.glob("*.eval"))
    assert len(found) == 1, done.stderr[-3000:]
    samples = read_eval_log(str(found[0])).samples or []
    assert len(samples) == len(ids), done.stderr[-3000:]
    return {
        str(s.id): (s.error.message if s.error is not None else None, s.output.completion)
        for s in samples
    }


@pytest.mark.parametrize("private", [False, True], ids=["normal", "private"])
def test_inspect_sample_error_is_the_miss(tmp_path: Path, private: bool) -> None:
    (error, _), *_ = _inspect(tmp_path, "a", batch=False, private=private).values()
    assert error is not None
    _reads_as_miss(error, private=private)


def test_inspect_batch_sample_error_is_the_miss_and_others_keep_their_answers(
    tmp_path: Path,
) -> None:
    """Inspect's batcher used to lose a failed line's error in an internal RuntimeError
    and fail the whole batch with it (replay_actor/integrations/inspect_batch.py)."""
    (error, _), *_ = _inspect(tmp_path, "a", batch=True).values()
    assert error is not None
    assert "The request instance has not been set" not in error
    add = _reads_as_miss(error, private=False)
    assert add is not None

    def rerun() -> str:
        samples = _inspect(tmp_path, "ab", batch=True)
        # b missed in the same batch: its own error, and a keeps its answer.
        assert samples["b"][0] is not None
        _reads_as_miss(samples["b"][0], private=False)
        assert samples["a"][0] is None
        answer: str = samples["a"][1]
        return answer

    _answered_by_pasting(tmp_path, add, rerun)
