"""Clients whose base URL only a variable of their own redirects, run under
``replay-actor run`` with no code changed (docs/front-door.md, "Clients"): groq
(``GROQ_BASE_URL``, posting ``/openai/v1/chat/completions``), together
(``TOGETHER_BASE_URL``, ``/v1/chat/completions``) and LiteLLM's ``gemini/`` models
(``GEMINI_API_BASE``, ``/v1beta/models/{model}:generateContent``); and mistralai 3.x,
which reads no base-URL variable, given ``REPLAY_ACTOR_URL`` as its ``server_url`` in the
way docs/front-door.md and docs/eval-tools.md show (``/v1/chat/completions``).

Each is recorded through a fake vendor on loopback (a record manifest whose live
adapter points at tests/support/chat_server.py or tests/support/gemini_server.py; the
child sealed on request), then replayed under the default seal: the same answer, the
fake vendor asked nothing more, and the summary says so."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.chat_server import ChatServer
from tests.support.frontdoor_util import (
    quiet_env,
    record_manifest,
    replay_manifest,
    run_cli,
    summary,
)
from tests.support.gemini_server import GeminiServer

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(240)]

GROQ = """
    from groq import Groq
    answer = Groq().chat.completions.create(
        model="llama-3.3-70b-versatile", messages=[{"role": "user", "content": "hi"}]
    )
    print(answer.choices[0].message.content)
"""
TOGETHER = """
    from together import Together
    answer = Together().chat.completions.create(
        model="meta-llama/Llama-3.3-70B-Instruct-Turbo",
        messages=[{"role": "user", "content": "hi"}],
    )
    print(answer.choices[0].message.content)
"""
LITELLM_GEMINI = """
    import litellm
    answer = litellm.completion(
        model="gemini/gemini-2.5-flash", messages=[{"role": "user", "content": "hi"}]
    )
    print(answer.choices[0].message.content)
"""
MISTRAL = """
    import os
    from mistralai.client import Mistral
    client = Mistral(
        api_key=os.environ["MISTRAL_API_KEY"], server_url=os.environ["REPLAY_ACTOR_URL"]
    )
    answer = client.chat.complete(
        model="mistral-small-latest", messages=[{"role": "user", "content": "hi"}]
    )
    print(answer.choices[0].message.content)
"""


def _record_then_replay(folder: Path, record: Path, code: str) -> str:
    """Run ``code`` under ``record``, then under the recorded fixture, sealed; both
    must print the same answer. Returns it."""
    app = [sys.executable, "-c", textwrap.dedent(code)]
    env = quiet_env(FAKE_VENDOR_KEY="fake-vendor-key-0123456789")
    # Recording is sealed too (the live adapter stays outside): a client that ignored its
    # variable would fail here, not reach the real vendor.
    recorded = run_cli(record, app, env=env, flags=("--seal", "namespace"))
    assert recorded.returncode == 0, recorded.stderr
    assert summary(recorded.stderr).endswith("(1 recorded); sealed (namespace)")
    replayed = run_cli(replay_manifest(folder, folder / "recorded.jsonl"), app, env=env)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.stdout
    assert summary(replayed.stderr).startswith("replay-actor: 1 served, 0 missed,")
    assert summary(replayed.stderr).endswith("; sealed (namespace)")
    return recorded.stdout.strip()


def test_groq_unchanged(chat: ChatServer, tmp_path: Path) -> None:
    record = record_manifest(tmp_path, chat.base_url("echo"))
    assert _record_then_replay(tmp_path, record, GROQ) == "1: hi"
    assert chat.count("echo") == 1  # the replay asked the vendor nothing


def test_together_unchanged(chat: ChatServer, tmp_path: Path) -> None:
    record = record_manifest(tmp_path, chat.base_url("echo"))
    assert _record_then_replay(tmp_path, record, TOGETHER) == "1: hi"
    assert chat.count("echo") == 1


def test_litellm_gemini_unchanged(gemini_server: GeminiServer, tmp_path: Path) -> None:
    record = record_manifest(
        tmp_path,
        gemini_server.base_url("echo"),
        adapter="gemini",
        model="gemini-live",
        api_key_env="FAKE_VENDOR_KEY",
    )
    assert _record_then_replay(tmp_path, record, LITELLM_GEMINI) == "1: hi"
    assert gemini_server.count("echo") == 1


def test_mistralai_given_the_front_door(chat: ChatServer, tmp_path: Path) -> None:
    pytest.importorskip("mistralai.client")
    record = record_manifest(tmp_path, chat.base_url("echo"))
    assert _record_then_replay(tmp_path, record, MISTRAL) == "1: hi"
    assert chat.count("echo") == 1
