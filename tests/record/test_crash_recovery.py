"""SIGKILL at random points of a 10,000-call recording: no answer a call returned is
lost, nothing is recorded twice, the fixture on disk is valid after every kill, and the
next open folds the journal.

A recording child records with 8 threads (each asking its own prompts in turn, so that
they become sequences) against the loopback chat server, whose answers are all distinct
(``"{n}: prompt"``); it prints each answer once its call has returned. The test kills it
at a random moment (during its open, its calls, or a compaction, made frequent here),
checks the fixture, and starts the next one, until 10,000 answers have been returned.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from replay_actor import load_fixture, request_hash
from replay_actor.manifest import open_provider
from replay_actor.record.provider import COMPACT_BYTES_VARIABLE
from tests.support.chat_server import ChatServer

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(600)]

THREADS = 8
ANSWERS = 10_000

CHILD = textwrap.dedent(
    """
    import json, sys, threading
    from replay_actor.manifest import open_provider

    manifest, generation, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rec = open_provider(manifest)
    lock = threading.Lock()
    print("ready", flush=True)

    def work(thread):
        j = 0
        while True:
            prompt = f"g{generation}-t{thread}-q{j % 40}"
            answer = rec.complete({"messages": [{"role": "user", "content": prompt}]})
            with lock:
                sys.stdout.write(json.dumps([prompt, answer["content"]]) + "\\n")
                sys.stdout.flush()
            j += 1

    for t in range(threads):
        threading.Thread(target=work, args=(t,), daemon=True).start()
    threading.Event().wait()
    """
)


def hi(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


class _Generation:
    """One recording child, killed at a random moment; the answers it returned."""

    def __init__(self, manifest: Path, number: int, env: dict[str, str]) -> None:
        self.answers: list[tuple[str, str]] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(manifest), str(number), str(THREADS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        self._reader = threading.Thread(target=self._read)
        self._ready = threading.Event()
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line == "ready\n":
                self._ready.set()
            elif line.endswith("\n"):  # a line cut by the kill was never printed whole
                prompt, content = json.loads(line)
                self.answers.append((prompt, content))

    def kill_after(self, delay: float) -> None:
        self._ready.wait(timeout=60)
        time.sleep(delay)
        os.kill(self.proc.pid, signal.SIGKILL)  # our child, by its PID
        self.proc.wait(timeout=30)
        self._reader.join(timeout=30)
        assert self.proc.stdout is not None
        self.proc.stdout.close()


@pytest.mark.slow  # most of a minute or more: make test-tools runs it
def test_sigkill_at_random_points_loses_no_returned_answer(
    chat: ChatServer, tmp_path: Path
) -> None:
    fixture = tmp_path / "crash.jsonl"
    manifest = tmp_path / "record.toml"
    manifest.write_text(
        "[provider]\n"
        'kind = "record"\n'
        'fixture = "crash.jsonl"\n'
        "[provider.live]\n"
        'adapter = "openai"\n'
        'model = "m"\n'
        f'base_url = "{chat.base_url()}"\n'
        "max_retries = 0\n"
    )
    # Compactions every 64 KiB of journal: kills land in them too.
    env = {**os.environ, COMPACT_BYTES_VARIABLE: str(64 * 1024)}
    rng = random.Random(19)
    returned: list[tuple[str, str]] = []
    kills = 0
    while len(returned) < ANSWERS:
        generation = _Generation(manifest, kills, env)
        # Mostly mid-recording; one kill in eight right after the open reported ready.
        generation.kill_after(rng.uniform(0.0, 0.05) if kills % 8 == 7 else rng.uniform(0.1, 2.0))
        kills += 1
        returned += generation.answers
        load_fixture(fixture)  # valid after every kill, whatever it interrupted

    with open_provider(str(manifest)) as rec:  # the next open folds the last journal
        snapshot = rec.snapshot()
    assert snapshot["recorded"] == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "crash.jsonl",
        "crash.jsonl.requests.jsonl",
        "record.toml",
    ]
    loaded = load_fixture(fixture)
    assert loaded.fixture_set_hash == snapshot["fixture_set_hash"]

    by_prompt: dict[str, list[str]] = {}
    for prompt, content in returned:
        by_prompt.setdefault(prompt, []).append(content)
    stored_contents: list[str] = []
    for prompt, contents in by_prompt.items():
        stored = loaded.responses_for(request_hash(hi(prompt)))
        assert stored is not None, "a returned answer was lost"
        texts = [response["content"] for response in stored]
        stored_contents += texts
        # A thread asks its prompts one after the other: what it was given is recorded
        # in that order; one more answer may follow (recorded, its call killed before
        # returning).
        assert texts[: len(contents)] == contents
        assert len(texts) - len(contents) <= 1
    every = [r["content"] for h in loaded.request_hashes() for r in loaded.responses_for(h) or []]
    assert len(every) == len(set(every)), "an answer was recorded twice"
    unreturned = len(every) - len(returned)
    assert 0 <= unreturned <= kills * THREADS
    assert len(returned) >= ANSWERS
    print(f"{kills} kills, {len(returned)} returned answers checked, {unreturned} unreturned kept")


def test_a_session_never_released_is_folded_at_interpreter_exit(
    chat: ChatServer, tmp_path: Path
) -> None:
    # Inspect's command line never closes its models: the answers must still reach the
    # fixture when the process ends normally, not wait in the journal for the next open.
    manifest = tmp_path / "record.toml"
    manifest.write_text(
        "[provider]\n"
        'kind = "record"\n'
        'fixture = "exit.jsonl"\n'
        "[provider.live]\n"
        'adapter = "openai"\n'
        'model = "m"\n'
        f'base_url = "{chat.base_url()}"\n'
    )
    script = (
        "import sys\n"
        "from replay_actor.manifest import open_provider\n"
        "rec = open_provider(sys.argv[1])\n"
        "rec.complete({'messages': [{'role': 'user', 'content': 'kept at exit'}]})\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(manifest)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "RuntimeWarning" not in done.stderr
    assert not (tmp_path / "exit.jsonl.journal").exists()
    assert request_hash(hi("kept at exit")) in load_fixture(tmp_path / "exit.jsonl")
