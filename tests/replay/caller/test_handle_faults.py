"""Faults on the caller's side of the wire, each a regression test of a defect found by
trying the handle as a hostile or unlucky user would (docs/architecture.md, "Failures
and what the caller sees")."""

from __future__ import annotations

import asyncio
import errno
import os
import signal
import socket
import struct
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from replay_actor import (
    ActorLost,
    InvalidArgument,
    ProviderClosed,
    ReplayError,
    ReplayMiss,
    SequenceExhausted,
    Supervisor,
    acquire,
    entry_line,
    request_hash,
)
from replay_actor.replay.caller.acquisition import check_timeout
from replay_actor.replay.caller.handle import Acquired, _rebuild
from replay_actor.replay.io.wire import set_timeouts
from tests.support.fake_actor import FakeActor
from tests.support.frame_locals import captured
from tests.support.paths import ROOT
from tests.support.procs import wait_gone

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(90)]


def req(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


@pytest.fixture
def fixture_path(tmp_path: Path) -> Path:
    path = tmp_path / "fixture.jsonl"
    lines = [
        entry_line(request_hash(req("hello")), response={"content": "frozen"}),
        entry_line(request_hash(req("seq")), responses=[{"i": i} for i in range(1000)]),
        entry_line(request_hash(req("once")), responses=[{"i": 0}]),
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


# -- 1: a reply that is not the answer to the request breaks the handle for good ----------


@pytest.fixture
def fake() -> Iterator[FakeActor]:
    actor = FakeActor(b"K")
    yield actor
    actor.close()


def test_unexpected_reply_breaks_complete_for_good(fake: FakeActor) -> None:
    handle = fake.handle()
    with pytest.raises(ActorLost, match="unexpected reply"):
        handle.complete(req("hello"))
    # Before the fix the next call read the stale second frame as its answer.
    with pytest.raises(ActorLost):
        handle.complete(req("hello"))
    assert fake.requests == 1
    handle.release()


def test_unexpected_reply_breaks_acomplete_for_good(fake: FakeActor) -> None:
    handle = fake.handle()

    async def main() -> None:
        with pytest.raises(ActorLost, match="unexpected reply"):
            await handle.acomplete(req("hello"))
        with pytest.raises(ActorLost):
            await handle.acomplete(req("hello"))

    asyncio.run(main())
    with pytest.raises(ActorLost):
        handle.complete(req("hello"))
    assert fake.requests == 1
    handle.release()


def test_unexpected_reply_breaks_a_batch(fake: FakeActor) -> None:
    handle = fake.handle()
    got = handle.complete_many([req("hello"), req("hello")])
    assert all(isinstance(g, ActorLost) for g in got)
    assert isinstance(handle.complete_many([req("hello")])[0], ActorLost)
    handle.release()


def test_unexpected_snapshot_reply_breaks_the_handle(fake: FakeActor) -> None:
    handle = fake.handle()
    with pytest.raises(ActorLost):
        handle.snapshot()
    with pytest.raises(ActorLost):
        handle.snapshot()
    assert fake.requests == 1
    handle.release()


# -- 2: a busy listener is not an ended acquisition ----------------------------------------


def test_first_calls_of_many_threads_while_the_actor_is_busy(fixture_path: Path) -> None:
    provider = acquire(fixture_path, timeout=30)
    outcomes: list[Any] = []
    lock = threading.Lock()

    def call() -> None:
        try:
            result: Any = provider.complete(req("hello"))
        except ReplayError as exc:
            result = exc
        with lock:
            outcomes.append(result)

    try:
        # A stopped actor accepts nothing: past its listen backlog, connect() says
        # EAGAIN, which the old handle took for "the acquisition ended".
        os.kill(provider.actor_pid, signal.SIGSTOP)
        threads = [threading.Thread(target=call) for _ in range(100)]
        for thread in threads:
            thread.start()
        time.sleep(0.5)
        os.kill(provider.actor_pid, signal.SIGCONT)
        for thread in threads:
            thread.join(timeout=60)
        errors = [o for o in outcomes if not isinstance(o, dict)]
        assert errors == []
        assert len(outcomes) == 100
        assert not provider.closed
        assert provider.complete(req("hello")) == {"content": "frozen"}
    finally:
        os.kill(provider.actor_pid, signal.SIGCONT)
        provider.release()


def test_only_a_refused_connection_means_ended(fixture_path: Path) -> None:
    provider = acquire(fixture_path, timeout=30)
    copy = _rebuild(Acquired(provider._address, provider.actor_pid, os.getpid(), False, 30.0))
    assert copy.complete(req("hello")) == {"content": "frozen"}  # accepted by now
    provider.release()
    with pytest.raises(ProviderClosed):
        copy.complete(req("hello"))
    # A copy made when nobody listens is ended too; a busy listener is not (above).
    late = _rebuild(Acquired(provider._address, provider.actor_pid, os.getpid(), False, 30.0))
    assert late.closed
    copy.release()
    late.release()


# -- 7: a supervisor frees a crashed run's descriptors without being asked --------------


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_supervisor_without_max_actors_frees_crashed_runs_fds(fixture_path: Path) -> None:
    with Supervisor() as supervisor:
        supervisor.acquire(fixture_path).release()  # warm up: zygote, watcher thread
        baseline = _fds()
        runs = []
        for _ in range(15):
            run = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
            provider = supervisor.acquire(fixture_path, owner_pid=run.pid)
            runs.append((run, provider.actor_pid))
        assert _fds() >= baseline + 15
        for run, _ in runs:
            run.kill()  # the run crashes: nobody releases its provider
            run.wait()
        for _, actor in runs:
            assert wait_gone(actor)
        # Never calling active(): the descriptors go back on their own.
        deadline = time.monotonic() + 10
        while _fds() > baseline and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _fds() <= baseline


def test_supervisor_prunes_dead_actors_on_acquire(fixture_path: Path) -> None:
    with Supervisor(max_actors=2) as supervisor:
        first = supervisor.acquire(fixture_path)
        supervisor.acquire(fixture_path)
        os.kill(first.actor_pid, signal.SIGKILL)
        assert wait_gone(first.actor_pid)
        supervisor.acquire(fixture_path)  # the dead one no longer counts
        assert len(supervisor.active()) == 2


# -- 10: too few descriptors is a ReplayError, and leaves nothing behind -----------------

_LOW_FDS = textwrap.dedent(
    """
    import resource, sys, threading
    import replay_actor
    from replay_actor import acquire, ReplayError
    from replay_actor.replay.caller import handle, zygote_client, supervisor
    import asyncio, subprocess, psutil, selectors
    limit = int(sys.argv[2])
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    outcomes = []
    def note(fn):
        try:
            fn()
            outcomes.append("ok")
        except ReplayError as exc:
            outcomes.append("ReplayError")
        except BaseException as exc:
            outcomes.append("raw " + type(exc).__name__ + " " + str(exc))
    box = {}
    note(lambda: box.setdefault("p", acquire(sys.argv[1], timeout=10)))
    p = box.get("p")
    if p is not None:
        req = {"messages": [{"role": "user", "content": "hello"}]}
        note(lambda: p.complete(req))
        def other():
            note(lambda: p.complete(req))
            note(lambda: p.complete_many([req, req]) and None)
        t = threading.Thread(target=other); t.start(); t.join()
        try:  # asyncio's own loop needs descriptors too: only our call is judged
            loop = asyncio.new_event_loop()
        except OSError:
            loop = None
        if loop is not None:
            note(lambda: loop.run_until_complete(p.acomplete(req)))
            loop.close()
        p.release()
    print(" | ".join(outcomes))
    """
)


@pytest.mark.parametrize("limit", [6, 7, 8, 9, 10, 11, 12, 14])
def test_too_few_descriptors_is_a_replay_error(fixture_path: Path, limit: int) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _LOW_FDS, str(fixture_path), str(limit)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert "raw" not in done.stdout, done.stdout
    assert done.stdout.strip(), done.stderr


def test_connect_failures_are_classified() -> None:
    from replay_actor.replay.caller import dial

    assert errno.ECONNREFUSED in dial.GONE
    assert errno.EAGAIN in dial.RETRY
    assert errno.EMFILE not in dial.GONE | dial.RETRY
    with pytest.raises(ProviderClosed):
        dial.connect(b"\0replay-actor-nobody-" + os.urandom(8).hex().encode(), 1.0)


# -- 11: timeouts stay finite ------------------------------------------------------------


def test_tiny_timeouts_round_up_never_to_forever() -> None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        for value in (1e-7, 1e-9, 5e-324, 0.5e-6):
            set_timeouts(sock, value)
            raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.calcsize("ll"))
            assert struct.unpack("ll", raw) != (0, 0)
        set_timeouts(sock, 1e300)  # capped, never an overflow
        with pytest.raises(InvalidArgument):
            set_timeouts(sock, float("inf"))
    finally:
        sock.close()
    assert check_timeout(1e-7) >= 1e-6


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan"), 0, -1, "3", None])
def test_non_finite_timeouts_are_refused(fixture_path: Path, bad: Any) -> None:
    with pytest.raises(InvalidArgument):
        acquire(fixture_path, timeout=bad)
    with Supervisor() as supervisor, pytest.raises(InvalidArgument):
        supervisor.acquire(fixture_path, timeout=bad)
    with pytest.raises(InvalidArgument):
        Supervisor().shutdown(timeout=bad)


def test_a_tiny_timeout_to_a_stopped_actor_fails_promptly(fixture_path: Path) -> None:
    provider = acquire(fixture_path, timeout=30)
    tiny = _rebuild(Acquired(provider._address, provider.actor_pid, os.getpid(), False, 1e-7))
    outcome: list[Any] = []

    def call() -> None:
        try:
            outcome.append(tiny.complete(req("hello")))
        except ReplayError as exc:
            outcome.append(exc)

    try:
        os.kill(provider.actor_pid, signal.SIGSTOP)
        thread = threading.Thread(target=call, daemon=True)
        thread.start()
        thread.join(timeout=10)
        assert not thread.is_alive(), "a call with timeout=1e-7 blocked"
        assert isinstance(outcome[0], ActorLost)
    finally:
        os.kill(provider.actor_pid, signal.SIGCONT)
        tiny.release()
        provider.release()


# -- 12: no request hash in the locals of any frame an error is raised through ----------


def _raise_element(results: list[Any], k: int) -> Callable[[], Any]:
    def fn() -> Any:
        element = results[k]
        if isinstance(element, BaseException):
            raise element
        return element

    return fn


def test_private_errors_carry_no_hash_in_frame_locals(fixture_path: Path) -> None:
    secret_miss = req("a private prompt nobody should see hashed")
    with acquire(fixture_path, private=True, timeout=5) as provider:
        provider.complete(req("once"))
        reports = [
            captured(lambda: provider.complete(secret_miss)),
            captured(lambda: provider.complete(req("once"))),
            captured(lambda: asyncio.run(provider.acomplete(secret_miss))),
            captured(lambda: asyncio.run(provider.acomplete(req("once")))),
        ]
        batch = provider.complete_many([secret_miss, req("once")])
        assert isinstance(batch[0], ReplayMiss) and isinstance(batch[1], SequenceExhausted)
        reports += [captured(_raise_element(batch, 0)), captured(_raise_element(batch, 1))]
        # A lost actor too: the frames in flight held the request frame.
        os.kill(provider.actor_pid, signal.SIGSTOP)
        reports.append(captured(lambda: provider.complete(secret_miss)))
        os.kill(provider.actor_pid, signal.SIGKILL)
        reports.append(captured(lambda: asyncio.run(provider.acomplete(secret_miss))))
        lost = provider.complete_many([secret_miss])
        reports.append(captured(_raise_element(lost, 0)))
    hashes = [request_hash(secret_miss), request_hash(req("once"))]
    for report in reports:
        assert "sha256:" not in report
        for digest in hashes:
            assert digest[7:] not in report
            assert digest[7:].encode().hex() not in report
    assert "digest" not in "".join(reports) or "None" in "".join(reports)


def test_normal_mode_errors_still_carry_the_hash(fixture_path: Path) -> None:
    with acquire(fixture_path, timeout=5) as provider:
        report = captured(lambda: provider.complete(req("missing")))
    assert request_hash(req("missing")) in report


# -- 13: a script that exits without release does not wait for its own actor ----------


_EXITING = textwrap.dedent(
    """
    import atexit, os, sys
    state = {}
    def check():  # registered first, so it runs last: after the library's hooks
        from replay_actor.replay.caller.zygote_client import zygote
        import psutil
        actor = state["actor"]
        alive = psutil.pid_exists(actor) and psutil.Process(actor).status() != "zombie"
        print("actor alive at exit:", alive, flush=True)
    atexit.register(check)
    from replay_actor import acquire
    p = acquire(sys.argv[1], timeout=10)
    p.complete({"messages": [{"role": "user", "content": "hello"}]})
    state["actor"] = p.actor_pid
    # no release(): the script just ends
    """
)


def test_exit_without_release_ends_our_own_actor_first(fixture_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", _EXITING, str(fixture_path)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    # Before the fix the actor still ran when the zygote's hook gave up waiting for it.
    assert "actor alive at exit: False" in done.stdout, done.stdout + done.stderr
