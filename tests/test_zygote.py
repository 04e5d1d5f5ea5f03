"""The zygote: warm forks, a fixture cache that never serves a stale file, restarts."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from replay_actor import FixtureError, acquire, entry_line, request_hash
from replay_actor.replay.zygote import zygote
from tests.procs import wait_gone

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
        from replay_actor.replay.zygote import zygote
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
