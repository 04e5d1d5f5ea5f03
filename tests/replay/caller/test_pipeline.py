"""``complete_many``: a batch pipelined from one thread (docs/architecture.md, "Pipelined
batches"): one element per request, in order, each the response or the error that
``complete`` would have raised; no deadlock whatever the batch size."""

from __future__ import annotations

import os
import pickle
import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from replay_actor import (
    ActorLost,
    ProviderClosed,
    ReplayError,
    ReplayMiss,
    RequestError,
    SequenceExhausted,
    acquire,
    entry_line,
    request_hash,
)
from tests.support.paths import ROOT

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(90)]


def req(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


LOOP = req("loop")
SIZE = 1000
BIG = "x" * 20_000


@pytest.fixture
def fixture_path(tmp_path: Path) -> Path:
    path = tmp_path / "fixture.jsonl"
    lines = [
        entry_line(request_hash(LOOP), responses=[{"i": i} for i in range(SIZE)]),
        entry_line(request_hash(req("hello")), response={"content": "frozen"}),
        entry_line(request_hash(req("big")), response={"content": BIG}),
        entry_line(request_hash(req("two")), responses=[{"n": 1}, {"n": 2}]),
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_each_element_is_the_answer_or_the_error_complete_would_raise(
    fixture_path: Path,
) -> None:
    with acquire(fixture_path, timeout=30) as provider:
        batch = [req("hello"), req("two"), req("nope"), {"messages": []}, req("two"), req("two")]
        got = provider.complete_many(batch)
        assert got[0] == {"content": "frozen"}
        assert got[1] == {"n": 1}
        assert isinstance(got[2], ReplayMiss)
        assert got[2].request_hash == request_hash(req("nope"))
        assert str(got[2]) == (
            f"no replay fixture matches this request (request_hash: {request_hash(req('nope'))})"
        )
        assert isinstance(got[3], RequestError)
        assert got[4] == {"n": 2}
        assert isinstance(got[5], SequenceExhausted)
        # The invalid request was never sent: the actor counted five calls.
        snap = provider.snapshot()
        assert snap["served"] + snap["misses"] + snap["exhausted"] == 5
        assert provider.complete_many([]) == []
        # The channel is still in step for ordinary calls afterwards.
        assert provider.complete(req("hello")) == {"content": "frozen"}


def test_a_large_batch_with_large_replies_does_not_deadlock(fixture_path: Path) -> None:
    # 3000 requests one way and ~40 MB of replies the other: far beyond both socket
    # buffers, so sends and reads must interleave.
    with acquire(fixture_path, timeout=30) as provider:
        batch = [req("big") if k % 3 else LOOP for k in range(3 * SIZE)]
        got = provider.complete_many(batch)
    assert [g["i"] for g in got[::3]] == list(range(SIZE))  # type: ignore[index]
    assert all(g == {"content": BIG} for k, g in enumerate(got) if k % 3)


def test_batches_from_threads_and_calls_share_elements_exactly_once(fixture_path: Path) -> None:
    with acquire(fixture_path, timeout=30) as provider:
        results: list[Any] = []
        lock = threading.Lock()

        def run() -> None:
            got = provider.complete_many([LOOP] * 250)
            with lock:
                results.extend(got)

        threads = [threading.Thread(target=run) for _ in range(4)]
        for thread in threads:
            thread.start()
        for _ in range(100):
            try:
                results.append(provider.complete(LOOP))
            except SequenceExhausted as exc:
                results.append(exc)
        for thread in threads:
            thread.join(timeout=60)
    answers = [r["i"] for r in results if isinstance(r, dict)]
    assert sorted(answers) == list(range(SIZE))
    assert sum(isinstance(r, SequenceExhausted) for r in results) == 4 * 250 + 100 - SIZE


def test_a_copy_pipelines_too(fixture_path: Path) -> None:
    with acquire(fixture_path, timeout=30) as provider:
        copy = pickle.loads(pickle.dumps(provider))
        try:
            got = copy.complete_many([LOOP] * 3)
            assert [g["i"] for g in got if isinstance(g, dict)] == [0, 1, 2]
            assert provider.complete(LOOP)["i"] == 3
        finally:
            copy.release()


def test_closed_and_broken_handles_fill_every_element(fixture_path: Path) -> None:
    provider = acquire(fixture_path, timeout=30)
    os.kill(provider.actor_pid, signal.SIGKILL)
    got = provider.complete_many([req("hello"), {"messages": []}, req("hello")])
    assert isinstance(got[0], ActorLost)
    assert isinstance(got[1], RequestError)  # as complete() says: the request first
    assert isinstance(got[2], ActorLost)
    assert got[0] is not got[2]  # never one shared instance
    with pytest.raises(ActorLost):
        provider.complete(req("hello"))
    provider.release()
    got = provider.complete_many([req("hello"), {"messages": []}])
    assert all(isinstance(g, ProviderClosed) for g in got)


def test_actor_killed_mid_batch_breaks_the_handle(fixture_path: Path) -> None:
    provider = acquire(fixture_path, timeout=30)
    try:
        os.kill(provider.actor_pid, signal.SIGSTOP)
        timer = threading.Timer(0.3, os.kill, (provider.actor_pid, signal.SIGKILL))
        timer.start()
        got = provider.complete_many([LOOP] * 2000)
        timer.join()
        assert all(isinstance(g, ActorLost) for g in got)
        with pytest.raises(ActorLost):
            provider.complete(LOOP)
    finally:
        provider.release()


def test_stopped_actor_times_out(fixture_path: Path) -> None:
    provider = acquire(fixture_path, timeout=0.5)
    try:
        os.kill(provider.actor_pid, signal.SIGSTOP)
        got = provider.complete_many([LOOP] * 10)
        assert all(isinstance(g, ActorLost) and "in time" in str(g) for g in got)
    finally:
        os.kill(provider.actor_pid, signal.SIGKILL)
        provider.release()


def test_release_by_the_acquirer_reaches_a_copys_batch(fixture_path: Path) -> None:
    provider = acquire(fixture_path, timeout=30)
    copy = pickle.loads(pickle.dumps(provider))
    try:
        assert copy.complete(req("hello")) == {"content": "frozen"}
        provider.release()
        got = copy.complete_many([req("hello")] * 3)
        assert all(isinstance(g, ProviderClosed) for g in got)
    finally:
        copy.release()


def test_every_provider_kind_has_complete_many() -> None:
    from replay_actor._interface import Provider
    from replay_actor.adapters.live import LiveProvider
    from replay_actor.record.provider import RecordingProvider
    from replay_actor.replay.caller.handle import ReplayProvider

    for cls in (ReplayProvider, LiveProvider, RecordingProvider):
        assert callable(getattr(cls, "complete_many", None))
    assert "complete_many" in dir(Provider)
    assert issubclass(ReplayError, Exception)


def test_the_concurrency_page_runs_as_written() -> None:
    import re
    import subprocess
    import sys

    root = ROOT
    page = (root / "docs" / "concurrency.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", page, re.DOTALL)
    assert blocks
    for block in blocks:
        done = subprocess.run(
            [sys.executable, "-c", block],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        lines = [line.strip() for line in block.splitlines()]
        promised = [line[2:] for line in lines if line.startswith("# ")]
        printed = done.stdout.splitlines()
        assert printed == promised[-len(printed) :]
