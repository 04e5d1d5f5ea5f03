"""Python applications run under ``replay-actor run`` with zero code changes: the
openai SDK, LangChain, LiteLLM (``completion`` and ``responses``), DSPy on its default
engine, openai-agents and google-genai, each building its client the way its own docs say, from the
environment ``run`` sets.

Each app is taken through the authoring loop of docs/authoring.md, as a user would:
against an empty fixture it fails on the miss (asked exactly once: one event in the
owner-only record, so no retry); the missed hash is added with the answer; the rerun
replays it. Telemetry and price-list fetches are switched off (``quiet_env``), so nothing
in the child tries the internet.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.frontdoor_util import misses, quiet_env, replay_manifest, run_cli, write_fixture

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(240)]

QUESTION = "What is the capital of France?"


def author_then_replay(folder: Path, code: str, answer: str) -> str:
    """Run ``code`` against an empty fixture, add each missed hash with ``answer`` (one
    miss per failing run), and return the stdout of the run that succeeds."""
    fixture = folder / "fixture.jsonl"
    fixture.write_text("")
    manifest = replay_manifest(folder, fixture)
    env = quiet_env(DSPY_CACHEDIR=str(folder / "dspy-cache"))
    entries: dict[str, object] = {}
    for _ in range(3):
        (folder / "misses.jsonl").unlink(missing_ok=True)
        done = run_cli(manifest, [sys.executable, "-c", textwrap.dedent(code)], env=env)
        if done.returncode == 0:
            assert entries, "the first run cannot have been answered by an empty fixture"
            return done.stdout.strip()
        events = misses(folder)
        # Exactly one event: the app's framework asked once and did not retry the miss.
        assert [e["event"] for e in events] == ["miss"], done.stderr
        assert events[0]["request_hash"] in done.stderr  # the app failed with the message
        entries[events[0]["request_hash"]] = {"content": answer}
        write_fixture(fixture, entries)
    raise AssertionError("the app kept missing")


def test_the_openai_sdk_unchanged(tmp_path: Path) -> None:
    code = f"""
        import openai
        client = openai.OpenAI()
        answer = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{{"role": "user", "content": {QUESTION!r}}}]
        )
        print(answer.choices[0].message.content)
    """
    assert author_then_replay(tmp_path, code, "Paris") == "Paris"


def test_langchain_chat_openai_unchanged(tmp_path: Path) -> None:
    code = f"""
        from langchain_openai import ChatOpenAI
        print(ChatOpenAI(model="gpt-4o-mini").invoke({QUESTION!r}).content)
    """
    assert author_then_replay(tmp_path, code, "Paris") == "Paris"


def test_litellm_completion_unchanged(tmp_path: Path) -> None:
    code = f"""
        import litellm
        answer = litellm.completion(
            model="openai/gpt-4o-mini", messages=[{{"role": "user", "content": {QUESTION!r}}}]
        )
        print(answer.choices[0].message.content)
    """
    assert author_then_replay(tmp_path, code, "Paris") == "Paris"


def test_litellm_responses_unchanged(tmp_path: Path) -> None:
    code = f"""
        import litellm
        answer = litellm.responses(model="openai/gpt-4o-mini", input={QUESTION!r})
        print(answer.output[0].content[0].text)
    """
    assert author_then_replay(tmp_path, code, "Paris") == "Paris"


def test_dspy_on_its_default_engine_unchanged(tmp_path: Path) -> None:
    code = f"""
        import dspy
        dspy.configure(lm=dspy.LM("openai/gpt-4o-mini"))
        print(dspy.Predict("question -> answer")(question={QUESTION!r}).answer)
    """
    answer = "[[ ## answer ## ]]\nParis\n\n[[ ## completed ## ]]"
    assert author_then_replay(tmp_path, code, answer) == "Paris"


def test_openai_agents_unchanged(tmp_path: Path) -> None:
    code = f"""
        from agents import Agent, Runner
        agent = Agent(name="geo", instructions="Answer briefly.")
        print(Runner.run_sync(agent, {QUESTION!r}).final_output)
    """
    assert author_then_replay(tmp_path, code, "Paris") == "Paris"


def test_google_genai_unchanged(tmp_path: Path) -> None:
    code = f"""
        from google import genai
        client = genai.Client()  # kept: google-genai closes its HTTP client when it is dropped
        answer = client.models.generate_content(
            model="gemini-2.5-flash", contents={QUESTION!r}
        )
        print(answer.text)
    """
    assert author_then_replay(tmp_path, code, "Paris") == "Paris"
