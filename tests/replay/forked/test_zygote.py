"""The zygote: warm forks, a fixture cache that never serves a stale file, restarts."""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from replay_actor import ActorLost, FixtureError, acquire, entry_line, request_hash
from replay_actor.replay.caller.zygote_client import Zygote, zygote
from replay_actor.replay.forked.zygote import TEST_DELAY_ENV, FixtureCache
from tests.support.procs import wait_gone

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(60)]

HELLO = {"messages": [{"role": "user", "content": "hello"}]}


def write(path: Path, content: str) -> None:
    path.write_bytes(entry_line(request_hash(HELLO), response={"content": content}) + b"\n")


def answer(path: Path, **kwargs: Any) -> str:
    with acquire(path, timeout=10, **kwargs) as provider:
        return str(provider.complete(HELLO)["content"])


def test_actors_are_forked_by_one_zygote(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    write(path, "one")
    with acquire(path, timeout=10) as a, acquire(path, timeout=10) as b:
        assert zygote.pid is not None
        parents = {psutil.Process(a.actor_pid).ppid(), psutil.Process(b.actor_pid).ppid()}
        assert parents == {zygote.pid}
        assert psutil.Process(a.actor_pid).name() == "replay-actor"


def test_a_changed_fixture_is_never_served_from_the_cache(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    write(path, "version one")
    assert answer(path) == "version one"
    assert answer(path) == "version one"  # now cached in the zygote
    write(path, "version two")  # the same size, rewritten in place
    assert answer(path) == "version two"
    replacement = tmp_path / "new.jsonl"
    write(replacement, "third version")
    os.replace(replacement, path)  # a new inode under the same name
    assert answer(path) == "third version"


def test_a_fixture_broken_after_caching_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    write(path, "fine")
    assert answer(path) == "fine"
    path.write_bytes(b"not json\n")
    with pytest.raises(FixtureError) as info:
        answer(path)
    assert (info.value.reason, info.value.line) == ("invalid_json", 1)


def test_a_killed_zygote_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    write(path, "alive")
    assert answer(path) == "alive"
    old = zygote.pid
    assert old is not None
    with acquire(path, timeout=10) as survivor:
        os.kill(old, signal.SIGKILL)
        assert wait_gone(old)
        # Actors already forked live on without their zygote...
        assert survivor.complete(HELLO)["content"] == "alive"
        # ...and the next acquisition starts a new one.
        assert answer(path) == "alive"
    assert zygote.pid not in (None, old)


def test_the_zygote_reaps_its_actors(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    write(path, "x")
    pids = []
    for _ in range(3):
        with acquire(path, timeout=10) as provider:
            pids.append(provider.actor_pid)
    for pid in pids:
        assert wait_gone(pid)
        assert not psutil.pid_exists(pid) or psutil.Process(pid).ppid() != zygote.pid
    assert zygote.pid is not None
    zombies = [
        c.pid for c in psutil.Process(zygote.pid).children() if c.status() == psutil.STATUS_ZOMBIE
    ]
    deadline = time.monotonic() + 5
    while zombies and time.monotonic() < deadline:
        time.sleep(0.05)
        zombies = [p for p in zombies if psutil.pid_exists(p)]
    assert zombies == []


def test_an_actor_outliving_its_acquirer_keeps_its_zygote_until_it_ends(tmp_path: Path) -> None:
    """The acquirer (an orchestrator) exits while a run still holds a copy: the actor
    serves on, its zygote stays its parent (no orphan), and both go when the copy does."""
    import pickle
    import subprocess
    import sys
    import textwrap

    path = tmp_path / "f.jsonl"
    write(path, "still here")
    code = textwrap.dedent(
        """
        import os, pickle, sys
        from replay_actor import acquire
        from replay_actor.replay.caller.zygote_client import zygote
        p = acquire(sys.argv[1], owner_pid=int(sys.argv[2]), timeout=10)
        print(pickle.dumps(p).hex(), p.actor_pid, zygote.pid, flush=True)
        sys.stdin.readline()  # wait until the copy is connected
        """
    )
    acquirer = subprocess.Popen(
        [sys.executable, "-c", code, str(path), str(os.getpid())],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert acquirer.stdin is not None
    assert acquirer.stdout is not None
    blob, actor_pid, zygote_pid = acquirer.stdout.readline().split()
    copy = pickle.loads(bytes.fromhex(blob))
    acquirer.stdin.write("go\n")
    acquirer.stdin.flush()
    assert acquirer.wait(timeout=30) == 0
    assert copy.complete(HELLO)["content"] == "still here"
    assert psutil.Process(int(actor_pid)).ppid() == int(zygote_pid)
    copy.release()
    assert wait_gone(int(actor_pid))
    assert wait_gone(int(zygote_pid))


# -- timeouts, late replies and the cache ---------------------------------------------------


@pytest.fixture
def own_zygote(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Zygote]:
    """A zygote of this test's own, started with the test-only reply-delay hook armed.

    The hook file (``delay(seconds)`` writes it) makes the zygote sleep once, between
    forking an actor and replying, as a descheduled zygote would."""
    import replay_actor.replay.caller.acquisition as acquisition_module

    monkeypatch.setenv(TEST_DELAY_ENV, str(tmp_path / "delay"))
    fresh = Zygote()
    monkeypatch.setattr(acquisition_module, "zygote", fresh)
    yield fresh
    pid = fresh.pid
    fresh.shutdown(wait=10.0)
    if pid is not None:
        assert wait_gone(pid)


def delay(tmp_path: Path, seconds: float) -> None:
    (tmp_path / "delay").write_text(str(seconds))


def children_of(pid: int) -> list[int]:
    return [c.pid for c in psutil.Process(pid).children() if c.status() != psutil.STATUS_ZOMBIE]


def test_a_late_zygote_reply_leaves_no_actor_and_no_second_reader(
    own_zygote: Zygote, tmp_path: Path
) -> None:
    path = tmp_path / "seq.jsonl"
    path.write_bytes(
        entry_line(request_hash(HELLO), responses=[{"n": i} for i in range(50)]) + b"\n"
    )
    assert answer_first(path) == 0  # the zygote is up
    zygote_pid = own_zygote.pid
    assert zygote_pid is not None
    delay(tmp_path, 1.5)
    with pytest.raises(ActorLost):
        acquire(path, timeout=0.5)
    # The zygote was not killed and nothing was resent to another one: the actor it
    # forked late on the abandoned socket end has nobody to serve and goes.
    assert own_zygote.pid == zygote_pid
    deadline = time.monotonic() + 10
    while children_of(zygote_pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert children_of(zygote_pid) == []
    # The next acquisition skips the late reply and gets exact answers from one actor.
    with acquire(path, timeout=10) as provider:
        assert [provider.complete(HELLO)["n"] for _ in range(50)] == list(range(50))
        assert children_of(zygote_pid) == [provider.actor_pid]


def answer_first(path: Path) -> int:
    with acquire(path, timeout=10) as provider:
        return int(provider.complete(HELLO)["n"])


def test_a_timed_out_acquire_never_kills_the_zygote_of_other_acquisitions(
    own_zygote: Zygote, tmp_path: Path
) -> None:
    path = tmp_path / "f.jsonl"
    write(path, "alive")
    with acquire(path, timeout=10) as survivor:
        zygote_pid = own_zygote.pid
        delay(tmp_path, 1.0)
        with pytest.raises(ActorLost):
            acquire(path, timeout=0.3)
        assert own_zygote.pid == zygote_pid
        assert psutil.Process(zygote_pid).is_running()
        assert psutil.Process(survivor.actor_pid).ppid() == zygote_pid  # not orphaned
        assert survivor.complete(HELLO)["content"] == "alive"
        assert answer(path) == "alive"


@pytest.fixture(scope="module")
def slow_fixture(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float]:
    """A valid fixture that takes a while to parse, and how long it took here."""
    from replay_actor import load_fixture

    path = tmp_path_factory.mktemp("slow") / "slow.jsonl"
    response = {"v": list(range(2000))}
    with path.open("wb") as f:
        for i in range(8000):
            f.write(entry_line(f"sha256:{i:064x}", response=response) + b"\n")
    start = time.monotonic()
    load_fixture(path)
    return path, time.monotonic() - start


def test_timeout_bounds_the_whole_acquire_of_a_slow_fixture(
    own_zygote: Zygote, slow_fixture: tuple[Path, float], tmp_path: Path
) -> None:
    path, parse_time = slow_fixture
    small = tmp_path / "f.jsonl"
    write(small, "warm")
    assert answer(small) == "warm"  # the zygote is up: its start is not timed
    timeout = parse_time / 3
    start = time.monotonic()
    with pytest.raises(ActorLost):
        acquire(path, timeout=timeout)
    elapsed = time.monotonic() - start
    # Once the timeout, not twice (no retry on another zygote), with room for noise.
    assert elapsed < 1.6 * timeout, (elapsed, timeout)


def test_a_small_acquire_does_not_wait_for_another_threads_large_parse(
    own_zygote: Zygote, slow_fixture: tuple[Path, float], tmp_path: Path
) -> None:
    import threading

    path, parse_time = slow_fixture
    small = tmp_path / "f.jsonl"
    write(small, "quick")
    assert answer(small) == "quick"
    big_done: list[int] = []

    def big() -> None:
        with acquire(path, timeout=60) as provider:
            big_done.append(provider.actor_pid)

    thread = threading.Thread(target=big)
    thread.start()
    try:
        time.sleep(min(0.05, parse_time / 10))  # the large request reaches the zygote first
        timeout = max(0.5, parse_time / 2)
        start = time.monotonic()
        with acquire(small, timeout=timeout) as provider:
            # ``timeout`` bounds the whole acquire, the wait for the zygote included.
            assert time.monotonic() - start <= timeout
            assert provider.complete(HELLO)["content"] == "quick"
    finally:
        thread.join(60)
    assert big_done


def test_the_cache_is_bounded_by_bytes_and_by_idle_time(tmp_path: Path) -> None:
    from replay_actor.fixture import DEFAULT_CEILINGS
    from replay_actor.replay.core.protocol import ActorConfig

    def config(path: Path) -> ActorConfig:
        return ActorConfig(
            fixture=str(path),
            owner_pid=os.getpid(),
            owner_create_time=0.0,
            private=False,
            ceilings=DEFAULT_CEILINGS.as_dict(),
            inspection_path=None,
        )

    paths = []
    for name in ("a", "b", "c"):
        path = tmp_path / f"{name}.jsonl"
        write(path, name * 1000)
        paths.append(path)
    size = paths[0].stat().st_size
    large = tmp_path / "large.jsonl"
    write(large, "x" * (3 * size))
    cache = FixtureCache(max_bytes=2 * size, entry_bytes=2 * size, idle=0.5)
    cache.warm(config(large))
    assert cache.get(config(large)) is None and len(cache) == 0  # too large to keep
    for path in paths:
        cache.warm(config(path))
    # Two fit; the least recently used went.
    assert cache.get(config(paths[0])) is None
    assert cache.get(config(paths[1])) is not None and cache.get(config(paths[2])) is not None
    assert cache.bytes <= 2 * size
    now = time.monotonic()
    expiry = cache.next_expiry(now)
    assert expiry is not None and expiry <= 0.5
    cache.expire(now + 0.6)
    assert len(cache) == 0 and cache.next_expiry(now) is None


def test_exiting_without_release_does_not_wait_for_the_actor_it_owns(tmp_path: Path) -> None:
    """The exit hook must not wait for an actor whose owner is the exiting process:
    that actor ends only once the process has."""
    import subprocess
    import sys
    import textwrap

    path = tmp_path / "f.jsonl"
    write(path, "bye")
    code = textwrap.dedent(
        """
        import atexit, sys, time
        marks = {}
        # atexit runs last-registered first: "report" runs after every other hook,
        # "start" (registered after the library's) before the library's.
        atexit.register(lambda: print(f"{time.monotonic() - marks['start']:.3f}", flush=True))
        from replay_actor import acquire
        provider = acquire(sys.argv[1], timeout=10)
        assert provider.complete({"messages": [{"role": "user", "content": "hello"}]})
        atexit.register(lambda: marks.__setitem__("start", time.monotonic()))
        """
    )
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code, str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    spent_in_exit_hooks = float(done.stdout.split()[-1])
    assert spent_in_exit_hooks < 0.5  # it used to be the full 1 s wait


# -- malformed control messages (core/control.py) ------------------------------------------


@pytest.mark.parametrize(
    "message",
    [b"no-token-here", b"7 not a config", b"7 {}", b"x1 {}"],
)
def test_a_malformed_request_is_dropped_and_the_zygote_serves_on(
    own_zygote: Zygote, tmp_path: Path, message: bytes
) -> None:
    path = tmp_path / "f.jsonl"
    write(path, "still here")
    assert answer(path) == "still here"  # the zygote is up
    zygote_pid = own_zygote.pid
    control = own_zygote._control
    assert control is not None and zygote_pid is not None
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with ours:
        with own_zygote._lock:  # a request of our own, sent as spawn sends one
            socket.send_fds(control, [message], [theirs.fileno()])
        theirs.close()
        # Dropped: no actor is forked for it, and the zygote closes the end it got,
        # so ours sees EOF (the only other copy was ``theirs``, closed above).
        ours.settimeout(10)
        assert ours.recv(1) == b""
    assert children_of(zygote_pid) == []
    assert own_zygote.pid == zygote_pid  # it did not die of it
    assert answer(path) == "still here"
