"""Exactly-once under contention: threads, asyncio tasks, processes and forks share
one acquisition's cursors, and every sequence element is handed out once."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
from collections import Counter
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

from replay_actor import (
    ReplayError,
    ReplayProvider,
    SequenceExhausted,
    acquire,
    entry_line,
    request_hash,
)

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(90)]

LOOP = {"messages": [{"role": "user", "content": "loop"}]}
SIZE = 1000


@pytest.fixture
def fixture_path(tmp_path: Path) -> Path:
    path = tmp_path / "fixture.jsonl"
    path.write_bytes(
        entry_line(request_hash(LOOP), responses=[{"i": i} for i in range(SIZE)]) + b"\n"
    )
    return path


def drain(provider: ReplayProvider, attempts: int) -> tuple[list[int], int]:
    got: list[int] = []
    exhausted = 0
    for _ in range(attempts):
        try:
            got.append(provider.complete(LOOP)["i"])
        except SequenceExhausted:
            exhausted += 1
    return got, exhausted


def assert_exactly_once(got: list[int], exhausted: int, asked: int) -> None:
    counts = Counter(got)
    assert sorted(counts) == list(range(SIZE))
    assert set(counts.values()) == {1}
    assert exhausted == asked - SIZE


def test_eight_threads_on_one_handle(fixture_path: Path) -> None:
    with acquire(fixture_path, timeout=30) as provider:
        results: list[tuple[list[int], int]] = []
        lock = threading.Lock()

        def worker() -> None:
            outcome = drain(provider, 130)
            with lock:
                results.append(outcome)

        threads = [threading.Thread(target=worker) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert len(results) == 8
        got = [i for part, _ in results for i in part]
        assert_exactly_once(got, sum(e for _, e in results), 8 * 130)


def test_four_hundred_asyncio_tasks(fixture_path: Path) -> None:
    async def main() -> tuple[list[int], int]:
        with acquire(fixture_path, timeout=30) as provider:

            async def one() -> int | None:
                try:
                    return int((await provider.acomplete(LOOP))["i"])
                except SequenceExhausted:
                    return None

            outcomes = await asyncio.gather(*(one() for _ in range(400 * 3)))
        got = [i for i in outcomes if i is not None]
        return got, sum(1 for i in outcomes if i is None)

    got, exhausted = asyncio.run(main())
    assert len(got) == SIZE
    assert set(Counter(got).values()) == {1}
    assert exhausted == 1200 - SIZE


def _child(provider: ReplayProvider, out: Connection) -> None:
    out.send(drain(provider, 300))
    out.close()
    provider.release()


def test_four_processes_share_one_handle(fixture_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    with acquire(fixture_path, timeout=30) as provider:
        pipes = [ctx.Pipe(duplex=False) for _ in range(4)]
        procs = [ctx.Process(target=_child, args=(provider, w)) for _, w in pipes]
        for proc in procs:
            proc.start()
        results = [r.recv() for r, _ in pipes]
        for proc in procs:
            proc.join(timeout=60)
            assert proc.exitcode == 0
        # The acquirer's own handle still works after its copies were released.
        with pytest.raises(SequenceExhausted):
            provider.complete(LOOP)
    got = [i for part, _ in results for i in part]
    assert_exactly_once(got, sum(e for _, e in results), 4 * 300)


def test_handle_sent_over_a_connection_works_there(fixture_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    with acquire(fixture_path, timeout=30) as provider:
        first = provider.complete(LOOP)["i"]
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_receive_and_call, args=(child,))
        proc.start()
        parent.send(provider)
        assert parent.recv() == first + 1
        proc.join(timeout=60)
        assert proc.exitcode == 0
        assert provider.complete(LOOP)["i"] == first + 2


def _receive_and_call(conn: Connection) -> None:
    provider = conn.recv()
    conn.send(provider.complete(LOOP)["i"])
    provider.release()


def test_bare_fork_child_uses_its_own_channel(fixture_path: Path) -> None:
    with acquire(fixture_path, timeout=30) as provider:
        assert provider.complete(LOOP)["i"] == 0
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: must work correctly or raise ReplayError, never hang
            code = 1
            try:
                value = provider.complete(LOOP)["i"]
                os.write(write_end, str(value).encode())
                code = 0
            except ReplayError:
                os.write(write_end, b"error")
                code = 0
            finally:
                os._exit(code)
        os.close(write_end)
        _, status = os.waitpid(pid, 0)
        answer = os.read(read_end, 64).decode()
        os.close(read_end)
        assert os.waitstatus_to_exitcode(status) == 0
        assert answer == "1"  # the fork shares the acquisition's cursors
        assert provider.complete(LOOP)["i"] == 2  # and the parent's channel is intact


def test_each_thread_gets_its_own_channel(fixture_path: Path) -> None:
    import psutil

    with acquire(fixture_path, timeout=30) as provider:
        actor = psutil.Process(provider.actor_pid)
        before = len(actor.net_connections(kind="unix"))
        ready = threading.Barrier(5)
        done = threading.Event()

        def worker() -> None:
            provider.complete(LOOP)
            ready.wait(timeout=20)
            done.wait(timeout=20)

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for thread in threads:
            thread.start()
        ready.wait(timeout=20)
        during = len(actor.net_connections(kind="unix"))
        done.set()
        for thread in threads:
            thread.join(timeout=20)
        # One of the four took the handle's first channel; the other three opened theirs.
        assert during - before == 3


def test_a_handle_is_crowded_while_a_second_thread_has_a_channel(fixture_path: Path) -> None:
    import gc

    with acquire(fixture_path, timeout=30) as provider:
        first = provider.complete(LOOP)["i"]
        assert not provider._sync.crowded  # one thread: the ordinary hash and write
        answers: list[int] = []
        called, finish = threading.Event(), threading.Event()

        def second() -> None:
            answers.append(provider.complete(LOOP)["i"])
            called.set()
            finish.wait(timeout=20)

        thread = threading.Thread(target=second)
        thread.start()
        assert called.wait(timeout=20)
        assert provider._sync.crowded
        # Crowded calls (the hash in turn, the held write) answer as plain ones do.
        answers.append(provider.complete(LOOP)["i"])
        finish.set()
        thread.join(timeout=20)
        del thread
        gc.collect()  # the ended thread's channel goes with its thread-local slot
        assert not provider._sync.crowded
        answers.append(provider.complete(LOOP)["i"])
        assert [first, *answers] == [0, 1, 2, 3]
