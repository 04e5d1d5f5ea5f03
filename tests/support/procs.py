"""Process hygiene for tests that start processes: nothing may outlive a test."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator

import psutil
import pytest

# Every process this test process starts inherits the mark, so the leak check can tell
# our actors (orphans included) from those of another test run on the same machine.
# Under pytest-xdist each worker marks its own (the session's mark and the worker's
# name): one worker's check must not count, and kill, the actors of a test running in
# another worker, nor its ``replay-actor run`` (a console script: its process is named
# ``replay-actor`` too).
MARK_VARIABLE = "REPLAY_ACTOR_TEST_SESSION"
_SESSION = os.environ.setdefault(MARK_VARIABLE, uuid.uuid4().hex)
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
MARK = _SESSION if not _WORKER or _SESSION.endswith(f"-{_WORKER}") else f"{_SESSION}-{_WORKER}"
os.environ[MARK_VARIABLE] = MARK


def is_gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (a zombie not ours to reap counts as gone)."""
    try:
        proc = psutil.Process(pid)
        if proc.status() != psutil.STATUS_ZOMBIE:
            return False
        return proc.ppid() != os.getpid()
    except psutil.NoSuchProcess:
        return True


def wait_gone(pid: int, within: float = 10.0) -> bool:
    """Wait (bounded) until ``pid`` is gone; True if it went."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if is_gone(pid):
            return True
        time.sleep(0.01)
    return is_gone(pid)


# Helpers that live as long as the process that started them, by design: the zygote
# that forks actors (it exits with its parent), multiprocessing's own.
_LONG_LIVED = (
    "replay_actor.replay.forked.zygote",
    "multiprocessing.resource_tracker",
    "multiprocessing.forkserver",
)


def _infrastructure(pid: int) -> bool:
    """Per-process helpers (the zygote, multiprocessing's) outlive single tests."""
    try:
        proc = psutil.Process(pid)
        if proc.name() == "replay-actor":
            return False  # forked from the zygote, so it shares its command line
        cmdline = " ".join(proc.cmdline())
    except psutil.Error:
        return False
    return any(name in cmdline for name in _LONG_LIVED)


def actor_pids() -> set[int]:
    """PIDs of every live cursor actor started by this test session (orphans too)."""
    found = set()
    for proc in psutil.process_iter(["pid", "name", "status"]):
        if proc.info.get("status") == psutil.STATUS_ZOMBIE:
            continue
        if proc.info.get("name") != "replay-actor":
            continue
        try:
            if proc.environ().get(MARK_VARIABLE) == MARK:
                found.add(proc.info["pid"])
        except psutil.Error:
            continue
    return found


@pytest.fixture
def no_leaks() -> Iterator[None]:
    """Assert that no child process and no new actor outlived the test."""
    me = psutil.Process()
    before_children = {c.pid for c in me.children(recursive=True)}
    before_actors = actor_pids()
    yield
    deadline = time.monotonic() + 10.0
    leaked: set[int] = set()
    while time.monotonic() < deadline:
        children = {c.pid for c in me.children(recursive=True)} - before_children
        leaked = {pid for pid in children if not is_gone(pid) and not _infrastructure(pid)}
        leaked |= {pid for pid in actor_pids() - before_actors if not is_gone(pid)}
        # Zombies of ours must be reaped too: the reaper thread does it on its own.
        zombies = set()
        for pid in children:
            try:
                if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                    zombies.add(pid)
            except psutil.NoSuchProcess:
                pass
        leaked |= zombies
        if not leaked:
            return
        time.sleep(0.02)
    for pid in leaked:  # stop only what this test started, by PID, then fail
        try:
            psutil.Process(pid).kill()
        except psutil.NoSuchProcess:
            pass
    pytest.fail(f"processes outlived the test: {sorted(leaked)}")
