"""The native async path: ``acomplete`` on the event loop itself (docs/architecture.md,
"The async path"): one connection per loop, many requests in flight, replies in order,
cancellation that leaves the connection in step, and exactly-once under it all."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import psutil
import pytest

from replay_actor import (
    ActorLost,
    ProviderClosed,
    ReplayMiss,
    ReplayProvider,
    RequestError,
    SequenceExhausted,
    acquire,
    entry_line,
    request_hash,
)

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(60)]

LOOP = {"messages": [{"role": "user", "content": "loop"}]}
HELLO = {"messages": [{"role": "user", "content": "hello"}]}
SIZE = 600


@pytest.fixture
def fixture_path(tmp_path: Path) -> Path:
    path = tmp_path / "fixture.jsonl"
    lines = [
        entry_line(request_hash(LOOP), responses=[{"i": i} for i in range(SIZE)]),
        entry_line(request_hash(HELLO), response={"content": "frozen"}),
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def connections(pid: int) -> int:
    """How many sockets the actor holds open (its listener and bootstrap included)."""
    return sum(1 for f in psutil.Process(pid).net_connections(kind="unix"))


async def take(provider: ReplayProvider) -> int | None:
    try:
        return int((await provider.acomplete(LOOP))["i"])
    except SequenceExhausted:
        return None


def test_no_worker_thread_and_one_connection_per_loop(fixture_path: Path) -> None:
    with acquire(fixture_path, timeout=30) as provider:
        before = connections(provider.actor_pid)
        threads_before = threading.active_count()

        async def main() -> list[int | None]:
            return await asyncio.gather(*(take(provider) for _ in range(64)))

        got = asyncio.run(main())
        assert threading.active_count() == threads_before  # no executor was started
        assert sorted(i for i in got if i is not None) == list(range(64))
        # All 64 tasks shared one new connection.
        assert connections(provider.actor_pid) - before == 1


def test_many_tasks_take_each_element_exactly_once(fixture_path: Path) -> None:
    with acquire(fixture_path, timeout=30) as provider:

        async def main() -> list[int | None]:
            return await asyncio.gather(*(take(provider) for _ in range(SIZE + 50)))

        got = asyncio.run(main())
    counts = Counter(i for i in got if i is not None)
    assert sorted(counts) == list(range(SIZE))
    assert set(counts.values()) == {1}
    assert got.count(None) == 50


def test_replies_are_matched_in_order(fixture_path: Path) -> None:
    # Alternate a sequence with a single entry and a miss: each task gets its own answer.
    with acquire(fixture_path, timeout=30) as provider:

        async def one(k: int) -> Any:
            try:
                if k % 3 == 0:
                    return (await provider.acomplete(HELLO))["content"]
                if k % 3 == 1:
                    return (await provider.acomplete(LOOP))["i"]
                return await provider.acomplete({"messages": [{"role": "user", "content": "?"}]})
            except ReplayMiss:
                return "miss"

        async def main() -> list[Any]:
            return await asyncio.gather(*(one(k) for k in range(300)))

        got = asyncio.run(main())
    assert [g for k, g in enumerate(got) if k % 3 == 0] == ["frozen"] * 100
    assert [g for k, g in enumerate(got) if k % 3 == 2] == ["miss"] * 100
    assert sorted(g for k, g in enumerate(got) if k % 3 == 1) == list(range(100))


def test_cancelled_task_leaves_the_connection_usable_and_its_element_served(
    fixture_path: Path,
) -> None:
    with acquire(fixture_path, timeout=30) as provider:
        os.kill(provider.actor_pid, signal.SIGSTOP)  # hold every reply back

        async def main() -> list[int | None]:
            tasks = [asyncio.create_task(take(provider)) for _ in range(10)]
            await asyncio.sleep(0.2)  # every request is written and waiting
            for task in tasks[::2]:
                task.cancel()
            os.kill(provider.actor_pid, signal.SIGCONT)
            done = await asyncio.gather(*tasks, return_exceptions=True)
            assert all(isinstance(d, asyncio.CancelledError) for d in done[::2])
            # The connection is still in step: later calls get their own answers.
            after = [await take(provider) for _ in range(5)]
            assert (await provider.acomplete(HELLO))["content"] == "frozen"
            return [d for d in done[1::2] if isinstance(d, int)] + after

        try:
            got = asyncio.run(main())
        finally:
            os.kill(provider.actor_pid, signal.SIGCONT)
        # The five cancelled requests each took an element: the others never see them.
        assert len(got) == 10
        assert len(set(got)) == 10
        assert provider.snapshot()["served"] == 16
        assert max(i for i in got if i is not None) >= 10


def test_loops_in_several_threads_share_the_handle(fixture_path: Path) -> None:
    with acquire(fixture_path, timeout=30) as provider:
        results: list[list[int | None]] = []
        lock = threading.Lock()

        def run() -> None:
            async def main() -> list[int | None]:
                return await asyncio.gather(*(take(provider) for _ in range(100)))

            got = asyncio.run(main())
            with lock:
                results.append(got)

        threads = [threading.Thread(target=run) for _ in range(4)]
        for thread in threads:
            thread.start()
        sync = [provider.complete(LOOP)["i"] for _ in range(100)]
        for thread in threads:
            thread.join(timeout=30)
    got = [i for part in results for i in part if i is not None] + sync
    assert len(results) == 4
    assert sorted(got) == list(range(500))


def test_a_new_loop_after_the_last_one_closed(fixture_path: Path) -> None:
    with acquire(fixture_path, timeout=30) as provider:
        for _ in range(5):
            assert asyncio.run(provider.acomplete(HELLO))["content"] == "frozen"
        # Connections of closed loops are closed, not kept: at most the newest remains.
        assert len(provider._links) <= 1


def test_stopped_actor_fails_every_task_after_the_timeout(fixture_path: Path) -> None:
    provider = acquire(fixture_path, timeout=0.5)
    try:
        os.kill(provider.actor_pid, signal.SIGSTOP)

        async def main() -> list[BaseException | dict[str, Any]]:
            calls = (provider.acomplete(HELLO) for _ in range(8))
            return await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 20)

        got = asyncio.run(main())
        assert all(isinstance(g, ActorLost) for g in got)
        assert "in time" in str(got[0])
        with pytest.raises(ActorLost):  # broken for good, sync calls included
            provider.complete(HELLO)
    finally:
        os.kill(provider.actor_pid, signal.SIGKILL)
        provider.release()


def test_killed_actor_fails_tasks_in_flight(fixture_path: Path) -> None:
    provider = acquire(fixture_path, timeout=30)
    try:
        os.kill(provider.actor_pid, signal.SIGSTOP)

        async def main() -> list[Any]:
            tasks = [asyncio.create_task(provider.acomplete(HELLO)) for _ in range(8)]
            await asyncio.sleep(0.1)
            os.kill(provider.actor_pid, signal.SIGKILL)
            done: list[Any] = await asyncio.gather(*tasks, return_exceptions=True)
            return done

        got = asyncio.run(main())
        assert all(isinstance(g, ActorLost) for g in got)
    finally:
        provider.release()


def test_release_fails_tasks_in_flight_with_provider_closed(fixture_path: Path) -> None:
    provider = acquire(fixture_path, timeout=30)
    os.kill(provider.actor_pid, signal.SIGSTOP)

    async def main() -> list[Any]:
        tasks = [asyncio.create_task(provider.acomplete(HELLO)) for _ in range(4)]
        done: list[Any]
        await asyncio.sleep(0.1)
        os.kill(provider.actor_pid, signal.SIGCONT)
        provider.release()
        done = await asyncio.gather(*tasks, return_exceptions=True)
        return done

    got = asyncio.run(main())
    assert all(isinstance(g, (ProviderClosed, dict)) for g in got)
    with pytest.raises(ProviderClosed):
        asyncio.run(provider.acomplete(HELLO))


def test_copy_sees_the_acquirers_release_as_provider_closed(fixture_path: Path) -> None:
    import pickle

    provider = acquire(fixture_path, timeout=30)
    copy = pickle.loads(pickle.dumps(provider))
    try:
        assert asyncio.run(copy.acomplete(HELLO))["content"] == "frozen"

        async def main() -> None:
            assert (await copy.acomplete(HELLO))["content"] == "frozen"
            provider.release()
            with pytest.raises(ProviderClosed):
                await copy.acomplete(HELLO)

        asyncio.run(main())
    finally:
        copy.release()
        provider.release()


def test_invalid_request_and_closed_handle(fixture_path: Path) -> None:
    provider = acquire(fixture_path, timeout=30)
    with pytest.raises(RequestError):
        asyncio.run(provider.acomplete({"messages": []}))
    provider.release()
    with pytest.raises(ProviderClosed):
        asyncio.run(provider.acomplete({"messages": []}))  # closed is said first


def test_fork_child_uses_a_connection_of_its_own(fixture_path: Path) -> None:
    with acquire(fixture_path, timeout=30) as provider:
        assert asyncio.run(provider.acomplete(HELLO))["content"] == "frozen"
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports through the pipe
            code = 1
            try:
                answer = asyncio.run(provider.acomplete(LOOP))
                os.write(write, str(answer["i"]).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(write)
        _, status = os.waitpid(pid, 0)
        child = int(os.read(read, 100))
        os.close(read)
        assert status == 0
        assert asyncio.run(provider.acomplete(LOOP))["i"] != child


def test_many_tasks_after_the_actor_died_all_get_actor_lost(fixture_path: Path) -> None:
    from tests.support.procs import wait_gone

    provider = acquire(fixture_path, timeout=30)
    try:

        async def main() -> list[Any]:
            assert (await provider.acomplete(HELLO))["content"] == "frozen"
            os.kill(provider.actor_pid, signal.SIGKILL)
            assert wait_gone(provider.actor_pid)
            # Enough frames in one loop iteration to be written at once, into a dead
            # connection: every task gets ActorLost, none an internal error.
            calls = (provider.acomplete(HELLO) for _ in range(100))
            done: list[Any] = await asyncio.gather(*calls, return_exceptions=True)
            return done

        got = asyncio.run(main())
        assert all(isinstance(g, ActorLost) for g in got), {type(g) for g in got}
    finally:
        provider.release()


def _sized(tmp_path: Path, sizes: list[int]) -> tuple[Path, list[dict[str, Any]]]:
    """A fixture whose request ``i`` answers with a response of about ``sizes[i]``
    bytes; the requests, in order."""
    requests = [{"messages": [{"role": "user", "content": f"sized {i}"}]} for i in sizes]
    lines = [
        entry_line(request_hash(req), response={"content": str(i % 10) * size, "n": i})
        for i, (req, size) in enumerate(zip(requests, sizes, strict=True))
    ]
    path = tmp_path / "sized.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path, requests


def test_large_and_small_replies_interleaved_each_reach_their_caller(tmp_path: Path) -> None:
    # Replies far larger than one read, mixed with small ones and in flight together:
    # each read fills the kept buffer in place, and the unfinished tail moves to its front.
    sizes = [3_000_000, 10, 700_000, 5, 262_141, 262_150, 1, 2_000_000]
    path, requests = _sized(tmp_path, sizes)

    async def main() -> list[dict[str, Any]]:
        with acquire(path, timeout=30) as provider:
            first = [await provider.acomplete(req) for req in requests]
            together = await asyncio.gather(*(provider.acomplete(req) for req in requests * 3))
            return first + list(together)

    answers = asyncio.run(main())
    expected = [(str(i % 10) * size, i) for i, size in enumerate(sizes)] * 4
    assert [(a["content"], a["n"]) for a in answers] == expected


def test_a_huge_reply_leaves_no_huge_buffer_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from replay_actor.replay.caller import aio

    monkeypatch.setattr(aio, "_KEEP", 1_000_000)
    path, requests = _sized(tmp_path, [4_000_000, 10])

    async def main() -> tuple[int, int]:
        with acquire(path, timeout=30) as provider:
            await provider.acomplete(requests[0])
            link = provider._links.get(asyncio.get_running_loop())
            assert isinstance(link, aio.AsyncLink)
            after_huge = len(link._in)
            assert (await provider.acomplete(requests[1]))["n"] == 1
            return after_huge, len(link._in)

    after_huge, after_small = asyncio.run(main())
    assert after_huge > 4_000_000  # the huge reply was read into one buffer
    assert after_small <= aio._READ * 2  # and its room was let go by the next read


def test_a_frame_announcing_more_than_it_holds_gets_room_only_as_bytes_come(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import socket as socket_module

    from replay_actor.replay.caller import aio
    from tests.support.fake_actor import FakeActor

    monkeypatch.setattr(aio, "_KEEP", 1_000_000)

    class Boaster(FakeActor):
        """Answers with a header announcing 1 GiB, then 100 bytes, then hangs up."""

        def _answer(self, conn: socket_module.socket) -> None:
            try:
                conn.recv(65536)
                conn.sendall((2**30).to_bytes(4, "big") + b"R" * 100)
            except OSError:
                pass  # the test has closed us
            finally:
                conn.close()

    fake = Boaster(b"")
    sizes: list[int] = []

    async def main() -> None:
        handle = fake.handle()
        try:
            link = handle._links.get(asyncio.get_running_loop())  # the one the call takes
            assert isinstance(link, aio.AsyncLink)
            with pytest.raises(ActorLost):
                await handle.acomplete(HELLO)
            assert link.dead
            sizes.append(len(link._in))
        finally:
            handle.release()

    try:
        asyncio.run(main())
    finally:
        fake.close()
    # Never the announced GiB: at most one read's room and _KEEP ahead of it.
    assert len(sizes) == 1
    assert 0 < sizes[0] <= aio._READ + 1_000_000 + 104
