"""A process holding more than 1,024 descriptors acquires, replays and releases like any
other: no wait in the package is ``select``, which refuses a descriptor of 1,024 or more
(docs/architecture.md, "Any descriptor number").

Ray, servers and evaluation harnesses raise their descriptor limit and hold that many,
so every channel, pidfd and socket replay-actor opens in them is numbered past 1,023.
Each entry point runs in a child process of its own that raises its soft limit and holds
1,100 descriptors first (this test process is not disturbed): ``acquire`` with a cold
and a warm zygote, ``complete``, ``acomplete``, ``complete_many``, ``release``, a
``Supervisor``, a large fixture's holder, ``replay-actor serve`` and the Ray backend.
The core follower, which failed every ``complete`` here, is held to its rule that it
never fails a call, whatever goes wrong in it.
"""

from __future__ import annotations

import ast
import errno
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import psutil
import pytest

from replay_actor import entry_line, request_hash
from replay_actor.replay.forked.zygote import CACHE_ENTRY_BYTES
from replay_actor.replay.io.cores import CoreFollower
from replay_actor.replay.io.waits import readable, ready
from tests.support.paths import ROOT

HELD = 1_100
#: The hard limit a child needs: 1,100 held, and room for what the library opens.
NEEDED = 1_200
_SOFT, HARD = resource.getrlimit(resource.RLIMIT_NOFILE)

pytestmark = [
    pytest.mark.usefixtures("no_leaks"),
    pytest.mark.timeout(120),
    pytest.mark.skipif(
        HARD != resource.RLIM_INFINITY and HARD < NEEDED,
        reason=f"the hard descriptor limit here is {HARD}, below the {NEEDED} a child needs "
        f"to hold {HELD} descriptors",
    ),
]

HELLO = {"messages": [{"role": "user", "content": "hello"}]}
NOBODY = {"messages": [{"role": "user", "content": "never recorded"}]}
SEQUENCE = ["one", "two", "three"]

#: Raises the soft limit and holds ``HELD`` descriptors; every one opened later is past
#: ``select``'s bound (the child checks it).
_PRELUDE = textwrap.dedent(
    f"""
    import asyncio, json, os, resource, sys, time
    import psutil

    def hold(inheritable=False):
        import os, resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        wanted = 4096 if hard == resource.RLIM_INFINITY else min(4096, hard)
        if soft != resource.RLIM_INFINITY and soft < wanted:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        held = [os.open(os.devnull, os.O_RDONLY) for _ in range({HELD})]
        for fd in held:
            os.set_inheritable(fd, inheritable)
        probe = os.open(os.devnull, os.O_RDONLY)
        os.close(probe)
        assert probe >= 1024, probe  # the next descriptor is past select's bound
        return held
    """
)

#: One entry point, from a process holding the descriptors. argv: the entry point,
#: ``cold`` or ``warm`` (whether the zygote started before the descriptors were held),
#: the fixture.
_CALLS = _PRELUDE + textwrap.dedent(
    """
    from replay_actor import ReplayError, ProviderClosed, acquire

    entry, zygote, path = sys.argv[1:4]
    HELLO = {"messages": [{"role": "user", "content": "hello"}]}
    NOBODY = {"messages": [{"role": "user", "content": "never recorded"}]}
    if zygote == "warm":
        acquire(path, timeout=30).release()  # the zygote starts with few descriptors
    held = hold()
    result = {}

    def open_fds():
        return len(os.listdir("/proc/self/fd"))

    if entry == "release":
        # A first acquisition starts what lives as long as this process (the zygote's
        # channel when cold, the reaper); the second must leave nothing behind.
        acquire(path, timeout=30).release()
        before = open_fds()
    provider = acquire(path, timeout=30)
    actor = provider.actor_pid
    result["actor_alive"] = psutil.pid_exists(actor)
    result["forked_by"] = psutil.Process(actor).parent().name()  # the zygote, or a holder
    if entry == "acquire":
        result["answers"] = [provider.complete(HELLO)["content"]]
    elif entry == "complete":
        before = provider._cores.following  # (off where cores cannot be read or set)
        result["answers"] = [provider.complete(HELLO)["content"] for _ in range(3)]
        # Still following its caller's core: it failed here, and must not just give up.
        result["following"] = [before, provider._cores.following]
        if provider._cores.following:
            result["actor_cores"] = len(os.sched_getaffinity(actor))
    elif entry == "acomplete":
        async def three():
            return await asyncio.gather(*(provider.acomplete(HELLO) for _ in range(3)))
        result["answers"] = sorted(a["content"] for a in asyncio.run(three()))
    elif entry == "complete_many":
        got = provider.complete_many([HELLO, HELLO, NOBODY, HELLO])
        result["answers"] = [
            g["content"] if isinstance(g, dict) else type(g).__name__ for g in got
        ]
    elif entry == "release":
        result["answers"] = [provider.complete(HELLO)["content"]]
    provider.release()
    provider.release()  # idempotent
    result["closed"] = provider.closed
    try:
        provider.complete(HELLO)
    except ProviderClosed:
        result["after_release"] = "ProviderClosed"
    try:
        psutil.Process(actor).wait(10)  # not our child: returns once it is gone
        result["actor_gone"] = True
    except psutil.NoSuchProcess:
        result["actor_gone"] = True
    except psutil.TimeoutExpired:
        result["actor_gone"] = False
    if entry == "release":
        result["leaked_fds"] = open_fds() - before
    print(json.dumps(result))
    """
)

_SUPERVISOR = _PRELUDE + textwrap.dedent(
    """
    import signal
    from replay_actor import Supervisor

    path = sys.argv[1]
    HELLO = {"messages": [{"role": "user", "content": "hello"}]}
    held = hold()
    result = {}
    with Supervisor(max_actors=4) as supervisor:
        first = supervisor.acquire(path, timeout=30)
        second = supervisor.acquire(path, timeout=30)  # asks whether the first lives
        result["answers"] = [first.complete(HELLO)["content"], second.complete(HELLO)["content"]]
        result["active"] = len(supervisor.active())
        os.kill(second.actor_pid, signal.SIGKILL)  # ours: this process acquired it
        # The supervisor's watcher sees the exit (its pidfd, past 1,023) by itself.
        deadline = time.monotonic() + 20
        while len(supervisor.active()) != 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        result["active_after_kill"] = len(supervisor.active())
    result["first_closed"] = first.closed
    print(json.dumps(result))
    """
)

#: A process held by its pidfd: what the acquirer's handle, the Ray cursor actor's watch
#: on its raylet and the actor's watch on its owner wait on.
_PROCESS = _PRELUDE + textwrap.dedent(
    """
    import subprocess
    from replay_actor.replay.io.procs import ProcessHandle

    held = hold()
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], stdout=subprocess.DEVNULL
    )
    try:
        handle = ProcessHandle(child.pid)
        result = {"pidfd": handle.fd, "alive": handle.alive(), "waited": handle.wait(0.05)}
        handle.kill()
        result["exited"] = handle.wait(30)
        result["alive_after"] = handle.alive()
        handle.close()
    finally:
        child.kill()  # ours, by PID (gone already when all went well)
        child.wait(30)
    print(json.dumps(result))
    """
)

#: ``replay-actor serve`` itself holding the descriptors: they stay open across exec.
_SERVE = _PRELUDE + textwrap.dedent(
    """
    held = hold(inheritable=True)
    os.execv(sys.executable, [sys.executable, "-m", "replay_actor", "serve", sys.argv[1]])
    """
)

#: The driver holds the descriptors, and so does a task while it calls. The cursor
#: actor's worker waits only on its raylet's pidfd, as ``_PROCESS`` does here (Ray's
#: worker setup hook, which could make that worker hold them too, starts workers
#: through a shell that splits a virtual environment's path at its spaces).
_RAY_DRIVER = _PRELUDE + textwrap.dedent(
    """
    import ray
    from replay_actor import ProviderClosed
    from replay_actor.ray import acquire

    address, path = sys.argv[1:3]
    HELLO = {"messages": [{"role": "user", "content": "hello"}]}
    NOBODY = {"messages": [{"role": "user", "content": "never recorded"}]}
    held = hold()
    ray.init(address=address, logging_level="ERROR", log_to_driver=False)

    @ray.remote(num_cpus=0)
    def in_a_task(llm):
        import os
        mine = hold()
        try:
            probe = os.open(os.devnull, os.O_RDONLY)
            os.close(probe)
            return probe, llm.complete(HELLO)["content"]
        finally:
            for fd in mine:
                os.close(fd)  # the worker serves other tasks after this one

    result = {}
    llm = acquire(path, timeout=60)
    answers = [llm.complete(HELLO)["content"]]
    answers.append(asyncio.run(llm.acomplete(HELLO))["content"])
    result["task_probe"], answer = ray.get(in_a_task.remote(llm), timeout=60)
    answers.append(answer)
    got = llm.complete_many([HELLO, NOBODY])
    answers += [g["content"] if isinstance(g, dict) else type(g).__name__ for g in got]
    llm.release()
    try:
        llm.complete(HELLO)
    except ProviderClosed:
        answers.append("ProviderClosed")
    result["answers"] = answers
    print(json.dumps(result))
    ray.shutdown()
    """
)


def _child(code: str, *args: str, timeout: float = 90) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


@pytest.fixture
def fixture_path(tmp_path: Path) -> Path:
    path = tmp_path / "fixture.jsonl"
    path.write_bytes(
        entry_line(request_hash(HELLO), responses=[{"content": c} for c in SEQUENCE]) + b"\n"
    )
    return path


# -- every entry point, from a process holding 1,100 descriptors ---------------------------


@pytest.mark.parametrize("zygote", ["cold", "warm"])
def test_acquire(fixture_path: Path, zygote: str) -> None:
    result = _child(_CALLS, "acquire", zygote, str(fixture_path))
    assert result["actor_alive"] and result["answers"] == ["one"]
    assert result["forked_by"] == "replay-zygote"
    assert result["closed"] and result["actor_gone"]


@pytest.mark.parametrize("zygote", ["cold", "warm"])
def test_complete(fixture_path: Path, zygote: str) -> None:
    result = _child(_CALLS, "complete", zygote, str(fixture_path))
    assert result["answers"] == SEQUENCE
    before, after = result["following"]
    assert after == before  # where it follows cores, it still does: pinned to one
    assert result.get("actor_cores", 1) == 1


@pytest.mark.parametrize("zygote", ["cold", "warm"])
def test_acomplete(fixture_path: Path, zygote: str) -> None:
    result = _child(_CALLS, "acomplete", zygote, str(fixture_path))
    assert result["answers"] == sorted(SEQUENCE)


@pytest.mark.parametrize("zygote", ["cold", "warm"])
def test_complete_many(fixture_path: Path, zygote: str) -> None:
    result = _child(_CALLS, "complete_many", zygote, str(fixture_path))
    assert result["answers"] == ["one", "two", "ReplayMiss", "three"]


@pytest.mark.parametrize("zygote", ["cold", "warm"])
def test_release(fixture_path: Path, zygote: str) -> None:
    result = _child(_CALLS, "release", zygote, str(fixture_path))
    assert result["answers"] == ["one"]
    assert result["closed"] and result["after_release"] == "ProviderClosed"
    assert result["actor_gone"]
    assert result["leaked_fds"] == 0  # the actor's pidfd and channels were closed


def test_a_process_held_by_its_pidfd() -> None:
    result = _child(_PROCESS)
    if result["pidfd"] is None:
        pytest.skip("no pidfd here: psutil stands in, and nothing waits on a descriptor")
    assert result["pidfd"] >= 1024
    assert result["alive"] and not result["waited"]  # a wait that runs out, then
    assert result["exited"] and not result["alive_after"]  # the exit, seen


def test_a_supervisor(fixture_path: Path) -> None:
    result = _child(_SUPERVISOR, str(fixture_path))
    assert result["answers"] == ["one", "one"]  # one cursor per acquisition
    assert result["active"] == 2
    assert result["active_after_kill"] == 1
    assert result["first_closed"]


def test_a_large_fixtures_holder(tmp_path: Path) -> None:
    # Over the zygote's 2 MiB: a holder of its own keeps it and forks the actor.
    path = tmp_path / "large.jsonl"
    filler = "x" * 200
    lines = [entry_line(request_hash(HELLO), responses=[{"content": c} for c in SEQUENCE])]
    lines += [entry_line(f"sha256:{i:064x}", response={"content": filler}) for i in range(12_000)]
    path.write_bytes(b"\n".join(lines) + b"\n")
    assert path.stat().st_size > CACHE_ENTRY_BYTES
    result = _child(_CALLS, "complete", "cold", str(path))
    assert result["forked_by"] == "replay-holder"
    assert result["answers"] == SEQUENCE


def test_the_front_door(fixture_path: Path, tmp_path: Path) -> None:
    manifest = tmp_path / "replay.toml"
    manifest.write_text(f'[provider]\nkind = "replay"\nfixture = {json.dumps(str(fixture_path))}\n')
    proc = subprocess.Popen(
        [sys.executable, "-c", _SERVE, str(manifest)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        info = json.loads(line)
        # The serving process itself (the child after exec) holds them.
        assert psutil.Process(proc.pid).num_fds() > HELD
        headers = {"authorization": "Bearer " + info["token"]}
        body = {"model": "gpt-test", **HELLO}
        with httpx2.Client(timeout=30) as http:
            answers = [
                http.post(info["openai_base_url"] + "/chat/completions", json=body, headers=headers)
                for _ in SEQUENCE
            ]
        assert [a.status_code for a in answers] == [200, 200, 200]
        assert [a.json()["choices"][0]["message"]["content"] for a in answers] == SEQUENCE
        proc.send_signal(signal.SIGTERM)  # serve releases its acquisition and exits 0
        assert proc.wait(timeout=30) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()  # ours, by PID
        proc.communicate(timeout=30)


@pytest.mark.ray
@pytest.mark.timeout(240)
def test_the_ray_backend(fixture_path: Path) -> None:
    pytest.importorskip("ray")
    from tests.support.raycluster import local_cluster

    with local_cluster(head_cpus=1) as cluster:
        result = _child(_RAY_DRIVER, cluster.gcs_address, str(fixture_path), timeout=180)
    assert result["task_probe"] >= 1024
    assert result["answers"] == [
        *SEQUENCE,  # complete, acomplete, then a task's complete
        "SequenceExhausted",
        "ReplayMiss",
        "ProviderClosed",
    ]


# -- the core follower never fails a call -------------------------------------------------


def _fails() -> bool:
    # What asking a pidfd with ``select`` did past 1,023.
    raise ValueError("filedescriptor out of range in select()")


@pytest.fixture
def sleeper() -> Iterator[int]:
    """A live process of ours the follower may move (it never moves the caller)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield proc.pid
    finally:
        proc.kill()  # ours, by PID
        proc.wait(timeout=30)


def test_a_follower_whose_liveness_check_fails_stops_quietly(sleeper: int) -> None:
    follower = CoreFollower(sleeper, _fails)
    if not follower.following:
        pytest.skip("cores cannot be read or set here: nothing follows")
    before = os.sched_getaffinity(sleeper)
    follower.follow()  # does not raise
    assert not follower.following
    assert os.sched_getaffinity(sleeper) == before  # nothing was moved
    follower.follow()
    follower.let_go()


def test_a_follower_that_fails_giving_back_stops_quietly(sleeper: int) -> None:
    checks = iter([True])  # alive when it pins; asking again then fails

    def alive() -> bool:
        return next(checks)  # StopIteration: not an OSError, not a ValueError

    follower = CoreFollower(sleeper, alive)
    if not follower.following:
        pytest.skip("cores cannot be read or set here: nothing follows")
    follower.follow()
    assert len(os.sched_getaffinity(sleeper)) == 1  # pinned to this thread's core
    follower.let_go()  # asks again, which fails: no error, and it follows no more
    assert not follower.following


def test_a_follower_whose_core_reading_fails_stops_quietly(sleeper: int) -> None:
    follower = CoreFollower(sleeper, lambda: True)
    if not follower.following:
        pytest.skip("cores cannot be read or set here: nothing follows")

    def broken() -> int:
        raise OSError(errno.ENOSYS, "no sched_getcpu")

    follower._read = broken
    follower.follow()
    assert not follower.following


# -- the waits ---------------------------------------------------------------------------


def test_waits_answer_as_select_did() -> None:
    left, right = socket.socketpair()
    try:
        assert not readable(left.fileno())  # nothing sent
        assert not ready([left], 0.01)  # a wait that runs out says nothing is ready
        assert ready([left, right], 0.0, write=True) == [left, right]
        right.send(b"x")
        assert readable(left.fileno(), 5.0)
        assert ready([right.fileno(), left.fileno()], None) == [left.fileno()]
        left.recv(1)
        right.close()
        assert readable(left.fileno())  # end of file counts as readable
        with pytest.raises(ValueError):
            readable(-1)
        with pytest.raises(ValueError):
            ready([right], 0.0)  # closed: its fileno() is -1
        closed = os.dup(left.fileno())
        os.close(closed)
        with pytest.raises(OSError) as caught:
            readable(closed)
        assert caught.value.errno == errno.EBADF
    finally:
        left.close()
        right.close()


def test_a_wait_is_woken_by_what_it_waits_for() -> None:
    left, right = socket.socketpair()
    try:
        later = threading.Timer(0.05, right.send, args=(b"x",))
        later.start()
        assert ready([left], 60.0) == [left]  # returns when the byte comes
        later.join()
    finally:
        left.close()
        right.close()


def test_no_select_in_the_package() -> None:
    """``select.select``, ``from select import select`` and ``selectors.SelectSelector``
    all refuse descriptors past 1,023."""

    def refused(node: ast.AST) -> bool:
        if isinstance(node, ast.Attribute):
            called_select = node.attr == "select" and getattr(node.value, "id", "") == "select"
            return called_select or node.attr == "SelectSelector"
        if isinstance(node, ast.ImportFrom) and node.module in ("select", "selectors"):
            return any(a.name in ("select", "SelectSelector") for a in node.names)
        return False

    found = [
        f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
        for path in sorted((ROOT / "replay_actor").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if refused(node)
    ]
    assert not found
