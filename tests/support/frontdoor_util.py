"""Helpers for the front-door tests: fixtures from neutral requests, a ``serve`` process,
``run`` with a child, and a counting record of misses (docs/front-door.md)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from replay_actor import request_hash

CLI = [sys.executable, "-m", "replay_actor"]
#: Where the environment's commands are (replay-actor among them).
BIN = Path(sys.executable).parent
#: How long a pasted command may take.
TIMEOUT = 120


def write_fixture(path: Path, entries: Mapping[str, Any]) -> Path:
    """``entries``: request hash -> a response, or a list (a sequence)."""
    lines = []
    for digest, answer in entries.items():
        key = "responses" if isinstance(answer, list) else "response"
        lines.append(json.dumps({"schema_version": 1, "request_hash": digest, key: answer}))
    path.write_text("".join(line + "\n" for line in lines))
    return path


def neutral(question: str) -> dict[str, object]:
    """A one-question neutral request."""
    return {"messages": [{"role": "user", "content": question}]}


def neutral_hash(messages: list[dict[str, Any]], **rest: Any) -> str:
    return request_hash({"messages": messages, **rest})


def replay_manifest(
    folder: Path, fixture: Path, *, private: bool = False, inspection: bool = True
) -> Path:
    lines = ["[provider]", 'kind = "replay"', f"fixture = {json.dumps(str(fixture))}"]
    if private:
        lines.append('data = "private"')
    if inspection:
        lines.append(f"inspection = {json.dumps(str(folder / 'misses.jsonl'))}")
    path = folder / "replay.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _live_table(base_url: str, adapter: str, model: str, more: Mapping[str, str | int]) -> str:
    lines = [f"adapter = {json.dumps(adapter)}", f"model = {json.dumps(model)}"]
    lines.append(f"base_url = {json.dumps(base_url)}")
    lines += [f"{key} = {json.dumps(value)}" for key, value in more.items()]
    return "\n".join(lines) + "\n"


def live_manifest(
    folder: Path,
    base_url: str,
    *,
    adapter: str = "openai",
    model: str = "gpt-live",
    **more: str | int,
) -> Path:
    """``folder/live.toml``: a live manifest on ``base_url`` (``more``: further keys)."""
    path = folder / "live.toml"
    path.write_text('[provider]\nkind = "live"\n' + _live_table(base_url, adapter, model, more))
    return path


def record_manifest(
    folder: Path,
    base_url: str,
    *,
    adapter: str = "openai",
    model: str = "gpt-live",
    **more: str | int,
) -> Path:
    """``folder/record.toml``: recording into ``folder/recorded.jsonl`` through a live
    adapter on ``base_url``."""
    path = folder / "record.toml"
    path.write_text(
        '[provider]\nkind = "record"\nfixture = "recorded.jsonl"\n[provider.live]\n'
        + _live_table(base_url, adapter, model, more)
    )
    return path


def misses(folder: Path) -> list[dict[str, Any]]:
    """The inspection record's events (one per miss or exhaustion: a retry would add one)."""
    path = folder / "misses.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


@contextmanager
def serving(
    manifest: Path, *extra: str, env: Mapping[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[str], dict[str, str]]]:
    """``replay-actor serve MANIFEST``: the process and its ready line; stopped with
    SIGTERM on exit if still running."""
    proc = subprocess.Popen(
        [*CLI, "serve", str(manifest), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=None if env is None else dict(env),
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            assert proc.stderr is not None
            raise AssertionError(f"serve did not start: {proc.stderr.read()}")
        yield proc, json.loads(line)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)


def run_cli(
    manifest: Path,
    command: list[str],
    *,
    flags: tuple[str, ...] = (),
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``replay-actor run [FLAGS] MANIFEST -- COMMAND``, to completion."""
    return subprocess.run(
        [*CLI, "run", *flags, str(manifest), "--", *command],
        check=False,
        capture_output=True,
        text=True,
        env=dict(os.environ if env is None else env),
        cwd=cwd,
        timeout=timeout,
    )


def summary(stderr: str) -> str:
    """``run``'s summary line (the last line of its stderr that is one)."""
    lines = [line for line in stderr.splitlines() if line.startswith("replay-actor: ")]
    assert lines, f"no summary line in: {stderr}"
    return lines[-1]


def quiet_env(**more: str) -> dict[str, str]:
    """The test's environment with every framework's telemetry and price-list fetch off,
    so nothing in a child tries the internet."""
    env = dict(os.environ)
    env.update(
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        LITELLM_TELEMETRY="False",
        OPENAI_AGENTS_DISABLE_TRACING="1",
        LANGCHAIN_TRACING_V2="false",
        LANGSMITH_TRACING="false",
        DSPY_DISABLE_TELEMETRY="1",
        ANONYMIZED_TELEMETRY="False",
        DO_NOT_TRACK="1",
        HF_HUB_OFFLINE="1",
    )
    env.update(more)
    return env


def shell(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``command`` as a user pastes it into bash, the venv's commands on PATH."""
    env = quiet_env(PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
