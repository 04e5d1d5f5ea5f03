"""The crash matrix: however a run ends, no cursor actor survives and no call hangs.

In the style of loky's ``crash_cases``: each case starts a real run process that
acquires a provider, then ends in its own way; the test asserts the actor is gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from replay_actor import ActorLost, ReplayProvider, Supervisor, acquire, entry_line, request_hash
from tests.support.procs import wait_gone

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(90)]

HELLO = {"messages": [{"role": "user", "content": "hello"}]}

RUN = textwrap.dedent(
    """
    import os, sys, time
    from replay_actor import acquire
    HELLO = {"messages": [{"role": "user", "content": "hello"}]}
    mode, fixture = sys.argv[1], sys.argv[2]
    p = acquire(fixture, timeout=10)
    print(p.actor_pid, flush=True)
    if mode == "idle":
        time.sleep(60)
    elif mode == "calls":
        while True:
            p.complete(HELLO)
    elif mode == "release-loop":
        while True:
            q = acquire(fixture, timeout=10)
            print(q.actor_pid, flush=True)
            q.release()
    elif mode == "exception":
        raise RuntimeError("the run failed")
    elif mode == "os_exit":
        os._exit(3)
    elif mode == "no-release":
        p.complete(HELLO)
    """
)


@pytest.fixture
def fixture_path(tmp_path: Path) -> Path:
    path = tmp_path / "fixture.jsonl"
    path.write_bytes(entry_line(request_hash(HELLO), response={"content": "frozen"}) + b"\n")
    return path


@pytest.fixture
def big_fixture(tmp_path: Path) -> Path:
    path = tmp_path / "big.jsonl"
    lines = [
        entry_line(
            request_hash({"messages": [{"role": "user", "content": str(i)}]}),
            response={"content": "x" * 200},
        )
        for i in range(20_000)
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def start_run(mode: str, fixture: Path) -> tuple[subprocess.Popen[str], int]:
    run = subprocess.Popen(
        [sys.executable, "-c", RUN, mode, str(fixture)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert run.stdout is not None
    line = run.stdout.readline()
    assert line.strip().isdigit(), "the run did not acquire"
    return run, int(line)


@pytest.mark.parametrize("mode", ["idle", "calls"])
def test_sigkill_of_the_run_leaves_no_actor(mode: str, fixture_path: Path) -> None:
    run, actor = start_run(mode, fixture_path)
    time.sleep(0.2)  # let "calls" get going, so the kill lands mid-exchange
    run.kill()
    run.wait(timeout=30)
    assert wait_gone(actor)


def test_sigkill_during_release_leaves_no_actor(fixture_path: Path) -> None:
    run, first = start_run("release-loop", fixture_path)
    assert run.stdout is not None
    actors = [first] + [int(run.stdout.readline()) for _ in range(3)]
    run.kill()
    run.wait(timeout=30)
    assert all(wait_gone(pid) for pid in actors)


@pytest.mark.parametrize(("mode", "code"), [("exception", 1), ("os_exit", 3), ("no-release", 0)])
def test_run_ending_without_release_leaves_no_actor(
    mode: str, code: int, fixture_path: Path
) -> None:
    run, actor = start_run(mode, fixture_path)
    assert run.wait(timeout=30) == code
    assert wait_gone(actor)


@pytest.mark.parametrize("moment", ["zygote-parsing", "holder-parsing"])
def test_sigkill_during_acquisition_leaves_no_actor(big_fixture: Path, moment: str) -> None:
    if moment == "holder-parsing":
        # A large fixture is parsed by its holder (docs/architecture.md, "Large
        # fixtures"); a last line it rejects makes it parse the whole file first, and
        # the kill lands while it does.
        with big_fixture.open("ab") as f:
            f.write(b"not json\n")
    code = textwrap.dedent(
        """
        import sys
        from replay_actor import acquire
        print("go", flush=True)
        try:
            acquire(sys.argv[1], timeout=30)
        finally:
            print("acquisition over", flush=True)
        """
    )
    run = subprocess.Popen(
        [sys.executable, "-c", code, str(big_fixture)], stdout=subprocess.PIPE, text=True
    )
    assert run.stdout is not None
    assert run.stdout.readline().strip() == "go"
    import psutil

    deadline = time.monotonic() + 20
    actors: list[int] = []
    descendants: list[int] = []
    while time.monotonic() < deadline and not actors:
        if moment == "zygote-parsing" and descendants:
            break
        descendants = []
        for child in psutil.Process(run.pid).children(recursive=True):
            try:
                descendants.append(child.pid)
                if child.name() in ("replay-actor", "replay-holder"):
                    actors.append(child.pid)
            except psutil.NoSuchProcess:
                pass
        time.sleep(0.002)
    run.kill()  # the zygote or the actor is parsing the fixture
    out, _ = run.communicate(timeout=30)
    assert "acquisition over" not in out, "the kill came too late to test anything"
    assert descendants
    assert actors or moment == "zygote-parsing"  # the holder, while it parses
    # The actor and the run's zygote both go.
    assert all(wait_gone(pid) for pid in descendants)


def test_orchestrator_pattern_run_killed_actor_reaped(fixture_path: Path) -> None:
    """An orchestrator acquires for a run process; the run is SIGKILLed; the actor
    exits and the living orchestrator is left with no zombie."""
    run = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with Supervisor() as supervisor:
            provider = supervisor.acquire(fixture_path, owner_pid=run.pid, timeout=10)
            assert provider.complete(HELLO)["content"] == "frozen"
            run.kill()
            run.wait()
            assert wait_gone(provider.actor_pid)  # no zombie: wait_gone counts ours
            with pytest.raises(ActorLost):
                provider.complete(HELLO)
    finally:
        run.kill()
        run.wait()


def test_actor_killed_mid_call_fails_every_waiting_thread(fixture_path: Path) -> None:
    provider = acquire(fixture_path, timeout=30)
    errors: list[BaseException] = []
    stop = threading.Event()

    def hammer() -> None:
        try:
            while not stop.is_set():
                provider.complete(HELLO)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(0.2)
    os.kill(provider.actor_pid, signal.SIGKILL)
    for thread in threads:
        thread.join(timeout=20)
    stop.set()
    assert not any(thread.is_alive() for thread in threads), "a call hung"
    assert len(errors) == 4
    assert all(isinstance(exc, ActorLost) for exc in errors)
    provider.release()
    assert wait_gone(provider.actor_pid)


def test_no_call_blocks_when_the_actor_is_stopped(fixture_path: Path) -> None:
    provider = acquire(fixture_path, timeout=2.0)
    os.kill(provider.actor_pid, signal.SIGSTOP)
    results: list[Any] = []
    try:
        thread = threading.Thread(target=lambda: results.append(_call(provider)))
        thread.start()
        thread.join(timeout=20)
        assert not thread.is_alive()
        assert isinstance(results[0], ActorLost)
    finally:
        os.kill(provider.actor_pid, signal.SIGKILL)  # a stopped process dies of it too
        provider.release()


def _call(provider: ReplayProvider) -> Any:
    try:
        return provider.complete(HELLO)
    except ActorLost as exc:
        return exc
