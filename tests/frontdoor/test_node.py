"""Clients no one here wrote: the npm ``openai`` and ``@anthropic-ai/sdk`` packages, in
an unchanged Node application (tests/frontdoor/node/frontdoor_app.cjs) run under ``replay-actor
run``: chat, Responses, messages, streaming, tools, a miss that fails the app with the
exact message and no retry, and a fixture recorded through Node replayed through the
Python SDKs (and the reverse).

Skipped only where ``node`` is missing; ``make test`` installs the npm packages into
``.cache/node`` (the Makefile's ``node-deps``)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.support.chat_server import ChatServer
from tests.support.endpoints_server import EndpointsServer, endpoints_server, vector
from tests.support.frontdoor_util import (
    misses,
    neutral_hash,
    record_manifest,
    replay_manifest,
    run_cli,
    summary,
    write_fixture,
)
from tests.support.gemini_server import GeminiServer
from tests.support.paths import ROOT

__all__ = ["endpoints_server"]

NODE = shutil.which("node")
NODE_MODULES = ROOT / ".cache" / "node" / "node_modules"
APP = ROOT / "tests" / "frontdoor" / "node" / "frontdoor_app.cjs"
AI_APP = ROOT / "tests" / "frontdoor" / "node" / "ai_sdk_app.cjs"
EMBED_APP = ROOT / "tests" / "frontdoor" / "node" / "ai_sdk_embed_app.cjs"
GOOGLE_APP = ROOT / "tests" / "frontdoor" / "node" / "ai_sdk_google_app.cjs"

pytestmark = [
    pytest.mark.skipif(NODE is None, reason="node is not installed"),
    pytest.mark.usefixtures("no_leaks"),
    pytest.mark.timeout(180),
]

HI = [{"role": "user", "content": "hi"}]
ASK = [{"role": "user", "content": "weather in Paris?"}]
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = [{"name": "get_weather", "description": "Weather for a city", "parameters": SCHEMA}]
CALL = {"id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'}
TURN2: list[dict[str, Any]] = [
    *ASK,
    {"role": "assistant", "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
]
UNKNOWN = [{"role": "user", "content": "unknown"}]


def node_env(**more: str) -> dict[str, str]:
    packages = ("openai", "@anthropic-ai/sdk", "ai", "@ai-sdk/openai", "@ai-sdk/google")
    if not all((NODE_MODULES / package).is_dir() for package in packages):
        pytest.fail(
            f"the npm packages are not in {NODE_MODULES}: `make test` installs them "
            f"(npm install --prefix .cache/node {' '.join(packages)})"
        )
    env = dict(os.environ)
    env["NODE_PATH"] = str(NODE_MODULES)
    env.update(more)
    return env


def node(manifest: Path, parts: str) -> tuple[int, dict[str, Any], str]:
    assert NODE is not None
    done = run_cli(manifest, [NODE, str(APP), parts], env=node_env())
    out = json.loads(done.stdout) if done.stdout.strip() else {}
    return done.returncode, out, done.stderr


@pytest.fixture
def conversation(tmp_path: Path) -> Path:
    """One neutral fixture for both vendors' Node SDKs: a greeting and a tool loop."""
    fixture = write_fixture(
        tmp_path / "fixture.jsonl",
        {
            neutral_hash(HI, params={"max_tokens": 50}): {"content": "hello"},
            neutral_hash(ASK, tools=TOOLS, params={"max_tokens": 100}): {
                "content": None,
                "tool_calls": [CALL],
                "finish_reason": "tool_calls",
            },
            neutral_hash(TURN2, tools=TOOLS, params={"max_tokens": 100}): {
                "content": "It is sunny in Paris."
            },
        },
    )
    return replay_manifest(tmp_path, fixture)


def test_node_openai_and_anthropic_chat_messages_streams_tools_and_misses(
    conversation: Path, tmp_path: Path
) -> None:
    status, out, stderr = node(conversation, "chat,messages")
    # The app caught both misses and exited 0: run says so, and exits 4.
    assert status == 4, stderr
    assert summary(stderr).startswith("replay-actor: 8 served, 2 missed, 0 exhausted, 0 blocked;")
    assert out["chat"] == out["chat_stream"] == "hello"
    assert out["messages"] == out["messages_stream"] == "hello"
    assert out["chat_tool"] == out["messages_tool"] == ["get_weather", {"city": "Paris"}]
    assert out["chat_final"] == out["messages_final"] == "It is sunny in Paris."
    digest = neutral_hash(UNKNOWN, params={"max_tokens": 50})
    miss = (
        f"no replay fixture matches this request (request_hash: {digest}); to answer it: "
        f'replay-actor add {tmp_path / "fixture.jsonl"} {digest} --content "THE ANSWER"'
    )
    assert out["chat_miss"] == {"status": 422, "message": miss}
    assert out["messages_miss"] == {"status": 422, "message": miss}
    # Each SDK asked once (both retry twice by default, unless told not to).
    assert [e["event"] for e in misses(tmp_path)] == ["miss", "miss"]


def test_a_miss_fails_the_node_app_with_the_exact_message_and_no_retry(
    conversation: Path, tmp_path: Path
) -> None:
    status, _, stderr = node(conversation, "fail-on-miss")
    assert status == 1
    digest = neutral_hash(UNKNOWN, params={"max_tokens": 50})
    assert f"no replay fixture matches this request (request_hash: {digest})" in stderr
    assert len(misses(tmp_path)) == 1


def test_node_openai_responses(conversation: Path) -> None:
    status, out, stderr = node(conversation, "responses")
    assert status == 0, stderr
    assert out["responses"] == out["responses_stream"] == "hello"


PYTHON_APP = textwrap.dedent(
    """
    import json
    import anthropic, openai
    chat = openai.OpenAI().chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "hi"}], max_tokens=50
    )
    message = anthropic.Anthropic().messages.create(
        model="claude-test", max_tokens=50, messages=[{"role": "user", "content": "bye"}]
    )
    print(json.dumps({"simple_chat": chat.choices[0].message.content,
                      "simple_messages": message.content[0].text}))
    """
)


def test_record_through_node_replay_through_python(chat: ChatServer, tmp_path: Path) -> None:
    status, recorded, stderr = node(record_manifest(tmp_path, chat.base_url("echo")), "simple")
    assert status == 0, stderr
    assert recorded == {"simple_chat": "1: hi", "simple_messages": "2: bye"}
    replay = replay_manifest(tmp_path, tmp_path / "recorded.jsonl")
    done = run_cli(replay, [sys.executable, "-c", PYTHON_APP])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == recorded
    assert chat.count("echo") == 2  # the replay asked nothing live


def test_record_through_python_replay_through_node(chat: ChatServer, tmp_path: Path) -> None:
    done = run_cli(
        record_manifest(tmp_path, chat.base_url("echo")), [sys.executable, "-c", PYTHON_APP]
    )
    assert done.returncode == 0, done.stderr
    recorded = json.loads(done.stdout)
    assert recorded == {"simple_chat": "1: hi", "simple_messages": "2: bye"}
    status, out, stderr = node(replay_manifest(tmp_path, tmp_path / "recorded.jsonl"), "simple")
    assert status == 0, stderr
    assert out == recorded
    assert chat.count("echo") == 2


def test_a_miss_the_vercel_ai_sdk_swallows_makes_run_exit_4(tmp_path: Path) -> None:
    assert NODE is not None
    fixture = write_fixture(tmp_path / "fixture.jsonl", {})
    manifest = replay_manifest(tmp_path, fixture)
    app = [NODE, str(AI_APP), "hi"]
    done = run_cli(manifest, app, env=node_env())
    # The measured failure: the app printed nothing and would have exited 0.
    assert json.loads(done.stdout) == {"text": ""}
    assert done.returncode == 4, done.stderr
    assert summary(done.stderr).startswith("replay-actor: 0 served, 1 missed, 0 exhausted,")
    allowed = run_cli(manifest, app, env=node_env(), flags=("--allow-misses",))
    assert allowed.returncode == 0, allowed.stderr  # the child's own status
    assert summary(allowed.stderr).startswith("replay-actor: 0 served, 1 missed,")
    # Authored (docs/authoring.md), the same app replays, and run exits 0.
    missed = {event["request_hash"] for event in misses(tmp_path)}
    assert len(missed) == 1
    write_fixture(fixture, {missed.pop(): {"content": "hello"}})
    done = run_cli(manifest, app, env=node_env())
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"text": "hello"}
    assert summary(done.stderr).startswith("replay-actor: 1 served, 0 missed, 0 exhausted,")


def test_vercel_ai_sdk_embed_and_embed_many_record_then_replay_under_run(
    tmp_path: Path, endpoints_server: EndpointsServer
) -> None:
    """The AI SDK's ``embed``/``embedMany``, recorded through the loopback fake vendor
    under ``run``, then replayed twice: identical output, every vector float32-exact."""
    assert NODE is not None
    key = "REPLAY_ACTOR_TEST_EMBED_KEY"
    record = record_manifest(
        tmp_path, endpoints_server.url + "/v1", model="m-live", api_key_env=key
    )
    app = [NODE, str(EMBED_APP)]
    recorded = run_cli(record, app, env=node_env(**{key: "sk-test-embed"}))
    assert recorded.returncode == 0, recorded.stderr
    assert summary(recorded.stderr).startswith("replay-actor: 3 served, 0 missed,")
    lines = (tmp_path / "recorded.jsonl").read_text().splitlines()
    assert len(lines) == 3  # query, documents, the 4-dimension one: three requests
    expected = {
        "query": vector("where is the cat?"),
        "documents": [vector("the cat sat"), vector("on the mat")],
        "short": vector("the cat sat", 4),
    }
    assert {k: v for k, v in json.loads(recorded.stdout).items() if k != "tokens"} == expected
    replay = replay_manifest(tmp_path, tmp_path / "recorded.jsonl")
    outputs = []
    for _ in range(2):
        done = run_cli(replay, app, env=node_env())
        assert done.returncode == 0, done.stderr
        assert summary(done.stderr).startswith("replay-actor: 3 served, 0 missed, 0 exhausted,")
        outputs.append(json.loads(done.stdout))
    assert outputs[0] == outputs[1] == json.loads(recorded.stdout)
    assert outputs[0]["tokens"] == 6  # the fake vendor's usage, replayed


def test_vercel_ai_sdk_google_given_the_front_door(
    tmp_path: Path, gemini_server: GeminiServer
) -> None:
    """``@ai-sdk/google`` with ``baseURL`` from ``REPLAY_ACTOR_URL`` (docs/front-door.md,
    "Clients"): recorded through the loopback Gemini server (sealed, so a provider that
    ignored its ``baseURL`` would fail), then replayed sealed with the same text."""
    assert NODE is not None
    record = record_manifest(
        tmp_path,
        gemini_server.base_url("echo"),
        adapter="gemini",
        model="gemini-live",
        api_key_env="FAKE_VENDOR_KEY",
    )
    env = node_env(FAKE_VENDOR_KEY="fake-vendor-key-0123456789")
    app = [NODE, str(GOOGLE_APP)]
    recorded = run_cli(record, app, env=env, flags=("--seal", "namespace"))
    assert recorded.returncode == 0, recorded.stderr
    assert json.loads(recorded.stdout) == {"text": "1: hi"}
    assert summary(recorded.stderr).endswith("(1 recorded); sealed (namespace)")
    replayed = run_cli(replay_manifest(tmp_path, tmp_path / "recorded.jsonl"), app, env=env)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.stdout
    assert summary(replayed.stderr).startswith("replay-actor: 1 served, 0 missed,")
    assert gemini_server.count("echo") == 1  # the replay asked the vendor nothing
