"""Several processes recording one fixture at once: a multiprocessing evaluation that
opens the record manifest in each worker, and pytest-xdist workers with the pytest
plugin in record mode. Each answer is recorded once, a request several recorders ask at
once becomes a sequence of their answers, and the last one out folds the journal.

The live side is the loopback chat server of the test process, whose answers are all
distinct (``"{n}: prompt"``).
"""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from replay_actor import load_fixture, request_hash
from tests.support.chat_server import ChatServer

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(300)]

WORKERS = 4
SHARED = 5


def hi(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def _manifest(folder: Path, chat: ChatServer) -> Path:
    path = folder / "record.toml"
    path.write_text(
        "[provider]\n"
        'kind = "record"\n'
        'fixture = "fixtures/evals.jsonl"\n'
        "[provider.live]\n"
        'adapter = "openai"\n'
        'model = "m"\n'
        f'base_url = "{chat.base_url()}"\n'
        "max_retries = 0\n"
    )
    (folder / "fixtures").mkdir()
    return path


def _evaluate(manifest: str, worker: int, start: Any, results: Any) -> None:
    """One worker of the evaluation: its own samples, and the shared ones, which every
    worker asks at about the same moment."""
    from replay_actor import open_provider

    answers = []
    with open_provider(manifest) as llm:
        start.wait(timeout=60)
        for k in range(SHARED):
            answers.append((f"shared {k}", llm.complete(hi(f"shared {k}"))["content"]))
        for j in range(20):
            prompt = f"worker {worker} sample {j % 10}"
            answers.append((prompt, llm.complete(hi(prompt))["content"]))
    results.put((worker, answers))


def test_a_multiprocessing_evaluation_records_one_fixture(chat: ChatServer, tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, chat)
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(WORKERS)
    results = context.Queue()
    workers = [
        context.Process(target=_evaluate, args=(str(manifest), w, start, results))
        for w in range(WORKERS)
    ]
    for process in workers:
        process.start()
    got = dict(results.get(timeout=240) for _ in workers)
    for process in workers:
        process.join(timeout=60)
        assert process.exitcode == 0
    assert sorted(p.name for p in (tmp_path / "fixtures").iterdir()) == [
        "evals.jsonl",
        "evals.jsonl.requests.jsonl",
    ]
    loaded = load_fixture(tmp_path / "fixtures" / "evals.jsonl")
    returned = [content for answers in got.values() for _, content in answers]
    stored = [r["content"] for h in loaded.request_hashes() for r in loaded.responses_for(h) or []]
    assert sorted(stored) == sorted(returned)  # each answer once, none lost
    assert loaded.responses == WORKERS * (SHARED + 20) == chat.count("echo")
    for k in range(SHARED):
        shared = loaded.responses_for(request_hash(hi(f"shared {k}")))
        assert shared is not None
        asked = {
            content for answers in got.values() for p, content in answers if p == f"shared {k}"
        }
        assert {r["content"] for r in shared} == asked
        assert len(shared) == WORKERS
    for worker, answers in got.items():
        for j in range(10):
            prompt = f"worker {worker} sample {j}"
            sequence = loaded.responses_for(request_hash(hi(prompt)))
            assert sequence is not None
            # One worker asked it twice, one call after the other: in that order.
            assert [r["content"] for r in sequence] == [c for p, c in answers if p == prompt]


TESTS = textwrap.dedent(
    """
    import pytest

    def ask(text):
        return {"messages": [{"role": "user", "content": text}]}

    @pytest.mark.parametrize("i", range(24))
    def test_sample(replay_provider, i):
        assert replay_provider.complete(ask(f"sample {i}"))["content"].endswith(f": sample {i}")
        assert replay_provider.complete(ask("shared"))["content"].endswith(": shared")
    """
)


def _pytest(folder: Path, mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-n",
            "4",
            "-q",
            "-p",
            "no:cacheprovider",
            # (deepeval, installed for the logprobs tests, loads a plugin into every
            # pytest run that is slow to import here)
            "-p",
            "no:deepeval",
            f"--replay-mode={mode}",
        ],
        cwd=folder,
        check=False,
        capture_output=True,
        text=True,
        timeout=240,
    )


@pytest.mark.slow  # most of a minute or more: make test-tools runs it
def test_pytest_xdist_workers_record_one_fixture(chat: ChatServer, tmp_path: Path) -> None:
    _manifest(tmp_path, chat)
    (tmp_path / "pytest.ini").write_text("[pytest]\nreplay_manifest = record.toml\n")
    (tmp_path / "test_evals.py").write_text(TESTS)
    recorded = _pytest(tmp_path, "record")
    assert recorded.returncode == 0, recorded.stdout[-3000:] + recorded.stderr[-3000:]
    assert "24 passed" in recorded.stdout
    calls = chat.count("echo")
    fixture = tmp_path / "fixtures" / "evals.jsonl"
    assert sorted(p.name for p in fixture.parent.iterdir()) == [
        "evals.jsonl",
        "evals.jsonl.requests.jsonl",
    ]
    loaded = load_fixture(fixture)
    assert loaded.responses == calls  # every answer the workers got, once
    for i in range(24):
        assert loaded.responses_for(request_hash(hi(f"sample {i}"))) is not None
    shared = loaded.responses_for(request_hash(hi("shared")))
    assert shared is not None
    # Recorded by whichever tests ran before it was in the fixture (at most one per
    # worker at a time); every later test replayed it.
    assert 1 <= len(shared) <= calls - 24

    replayed = _pytest(tmp_path, "replay")
    assert replayed.returncode == 0, replayed.stdout[-3000:] + replayed.stderr[-3000:]
    assert "24 passed" in replayed.stdout
    assert chat.count("echo") == calls  # the replay asked the model nothing
