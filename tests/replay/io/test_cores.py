"""``CoreFollower``: the acquirer's handle keeps its actor on the calling thread's core
while one thread calls ``complete``, gives the actor its own affinity back the first
time the handle is used another way, never moves the caller, and never fails a call."""

from __future__ import annotations

import asyncio
import os
import pickle
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from replay_actor import acquire, entry_line, request_hash
from replay_actor.replay.io.cores import ENV, CoreFollower

pytestmark = [
    pytest.mark.usefixtures("no_leaks"),
    pytest.mark.timeout(60),
    pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here"),
]

HELLO = {"messages": [{"role": "user", "content": "hello"}]}
CORES = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


@pytest.fixture
def fixture_path(tmp_path: Path) -> Path:
    path = tmp_path / "fixture.jsonl"
    path.write_bytes(entry_line(request_hash(HELLO), response={"content": "hi"}) + b"\n")
    return path


@pytest.fixture
def own_affinity() -> Iterator[set[int]]:
    """This process's affinity, given back after the test (some tests pin the caller)."""
    mine = os.sched_getaffinity(0)
    yield mine
    os.sched_setaffinity(0, mine)


def test_the_actor_runs_on_the_core_of_its_one_calling_thread(
    fixture_path: Path, own_affinity: set[int]
) -> None:
    with acquire(fixture_path, timeout=30) as provider:
        free = os.sched_getaffinity(provider.actor_pid)
        for core in CORES:
            os.sched_setaffinity(0, {core})  # the test moves itself; the library never does
            assert provider.complete(HELLO)["content"] == "hi"
            assert os.sched_getaffinity(provider.actor_pid) == {core}
        assert os.sched_getaffinity(0) == {CORES[-1]}  # the caller stays where it was put
    assert free == own_affinity


@pytest.mark.parametrize("use", ["thread", "acomplete", "complete_many"])
def test_any_other_use_gives_the_actor_its_own_affinity_back(fixture_path: Path, use: str) -> None:
    with acquire(fixture_path, timeout=30) as provider:
        free = os.sched_getaffinity(provider.actor_pid)
        provider.complete(HELLO)
        assert len(os.sched_getaffinity(provider.actor_pid)) == 1
        if use == "thread":
            other = threading.Thread(target=provider.complete, args=(HELLO,))
            other.start()
            other.join(timeout=20)
            provider.complete(HELLO)  # now crowded: the first thread's call lets go
        elif use == "acomplete":
            asyncio.run(provider.acomplete(HELLO))
        else:
            assert provider.complete_many([HELLO, HELLO])[1] == {"content": "hi"}
        assert os.sched_getaffinity(provider.actor_pid) == free
        provider.complete(HELLO)  # and for good: plain calls no longer pin it
        assert os.sched_getaffinity(provider.actor_pid) == free


def test_a_copy_never_moves_the_actor(fixture_path: Path) -> None:
    with acquire(fixture_path, timeout=30) as provider:
        free = os.sched_getaffinity(provider.actor_pid)
        copy = pickle.loads(pickle.dumps(provider))
        try:
            assert copy.complete(HELLO)["content"] == "hi"
            assert os.sched_getaffinity(provider.actor_pid) == free
        finally:
            copy.release()


def test_the_environment_variable_turns_it_off(fixture_path: Path) -> None:
    script = (
        "import os, sys\n"
        "from replay_actor import acquire\n"
        "with acquire(sys.argv[1], timeout=30) as p:\n"
        "    free = os.sched_getaffinity(p.actor_pid)\n"
        "    p.complete({'messages': [{'role': 'user', 'content': 'hello'}]})\n"
        "    print(os.sched_getaffinity(p.actor_pid) == free)\n"
    )
    for value, untouched in (("0", "True"), ("1", str(len(CORES) == 1))):
        done = subprocess.run(
            [sys.executable, "-c", script, str(fixture_path)],
            env={**os.environ, ENV: value},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert (done.returncode, done.stdout.strip()) == (0, untouched), done.stderr


def test_a_core_the_actor_may_not_use_ends_following_quietly(
    fixture_path: Path, own_affinity: set[int]
) -> None:
    if len(CORES) < 2:
        pytest.skip("needs two cores")
    with acquire(fixture_path, timeout=30) as provider:
        os.sched_setaffinity(provider.actor_pid, {CORES[0]})  # narrowed from outside
        os.sched_setaffinity(0, {CORES[1]})
        assert provider.complete(HELLO)["content"] == "hi"
        assert os.sched_getaffinity(provider.actor_pid) == {CORES[0]}  # left as it was
        follower = provider._cores
        assert follower is not None and not follower.following


def test_an_actor_that_is_gone_is_not_an_error_of_the_follower() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=30)
    follower = CoreFollower(child.pid, lambda: True)  # a PID nobody has any more
    follower.follow()
    assert not follower.following
    follower.let_go()  # and letting go of nothing is nothing


def test_a_dead_actor_is_never_moved_even_if_its_pid_lives_on(own_affinity: set[int]) -> None:
    # Stands for a PID reused after the actor died: a live process that is not ours to
    # move. The follower asks the actor's pidfd first, and moves nothing.
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        before = os.sched_getaffinity(bystander.pid)
        follower = CoreFollower(bystander.pid, lambda: False)
        follower.follow()
        assert not follower.following
        assert os.sched_getaffinity(bystander.pid) == before
    finally:
        bystander.kill()  # ours, by its PID
        bystander.wait(timeout=30)
