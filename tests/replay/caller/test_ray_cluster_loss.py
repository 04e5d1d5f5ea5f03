"""The Ray backend with its cluster gone mid-call.

A driver process of this test's own starts a one-node Ray cluster (its GCS and raylet
are that driver's children), acquires, and then kills the GCS and the raylet by the PIDs
it started. A call in flight must end as ``ActorLost`` within about its ``timeout``, by
the handle's own deadline, and every later call at once: Ray's own queries to the GCS
(the actor table) stay blocked for a minute, after which Ray terminates the whole driver.

- With the cursor actor's worker stopped (SIGSTOP), so the call is in flight for good.
- With threads calling in a loop, as ``ray stop`` would find an evaluation: once with
  the killed raylet left unreaped (a zombie child of the driver, as when ``ray.init()``
  started the cluster: Ray's workers, which check the raylet's PID, do not notice), once
  reaped at once (as init reaps a cluster that ``ray start`` began). The cursor actor
  must exit by itself either way, ``release()`` return promptly, and the calls failing
  together leave at most one thread asking the dead GCS why.

The driver runs apart from pytest for that reason. Every process of its cluster carries
a token in its environment (Ray passes the driver's on), so the test finds them all,
orphans included, stops them by PID and checks that none is left.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import psutil
import pytest

pytest.importorskip("ray")

from replay_actor import entry_line, request_hash

pytestmark = [pytest.mark.ray, pytest.mark.timeout(120)]

TIMEOUT = 5.0
#: How long the driver may take for the call after the kill: generous (this is not a
#: speed test), and far below the minute the old code stayed blocked.
BOUND = TIMEOUT + 15.0
TOKEN_VAR = "REPLAY_ACTOR_CLUSTER_LOSS_TEST"

#: The driver's start: its own cluster, an acquisition, one answered call.
PROLOGUE = """
import json, os, signal, sys, threading, time
import psutil, ray
from ray._private import state
from replay_actor.ray import acquire

temp_dir, fixture, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
hello = {"messages": [{"role": "user", "content": "hello"}]}
ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False,
         logging_level="ERROR", _temp_dir=temp_dir)
llm = acquire(fixture, timeout=timeout)
llm.complete(hello)
me = psutil.Process()
cluster = [p for p in me.children(recursive=True) if p.name() in ("gcs_server", "raylet")]
assert sorted(p.name() for p in cluster) == ["gcs_server", "raylet"], cluster
"""

STOPPED_DRIVER = PROLOGUE + textwrap.dedent(
    """
    os.kill(state.actors(llm.actor_id)["Pid"], signal.SIGSTOP)  # the call stays in flight
    done = {}

    def call():
        started = time.monotonic()
        try:
            llm.complete(hello)
            done["kind"], done["message"] = "ok", ""
        except Exception as exc:
            done["kind"], done["message"] = type(exc).__name__, str(exc)
        done["seconds"] = time.monotonic() - started

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    time.sleep(0.5)
    for proc in cluster:
        proc.kill()  # started by this driver's ray.init
    caller.join(60)
    print(json.dumps(done), flush=True)
    os._exit(0)  # before Ray, missing its GCS, terminates this process itself
    """
)

LOOPING_DRIVER = PROLOGUE + textwrap.dedent(
    """
    reap = sys.argv[4] == "reaped"
    actor = psutil.Process(state.actors(llm.actor_id)["Pid"])
    answered, ended = [], []

    def loop():
        while True:
            try:
                llm.complete(hello)
            except Exception as exc:
                ended.append((type(exc).__name__, str(exc), time.monotonic()))
                return
            answered.append(1)

    # Three threads calling at once: each has a call in flight when the cluster goes.
    callers = [threading.Thread(target=loop, daemon=True) for _ in range(3)]
    for caller in callers:
        caller.start()
    started = time.monotonic()
    while len(answered) < 30 and time.monotonic() - started < 30:
        time.sleep(0.01)  # the loops are under way
    before = len(answered)
    killed = time.monotonic()
    for proc in cluster:
        proc.kill()  # started by this driver's ray.init, killed by PID
    if reap:
        for proc in cluster:
            proc.wait(10)
    for caller in callers:
        caller.join(60)
    result = {"answered_before": before, "kinds": sorted({kind for kind, _, _ in ended})}
    result["messages"] = [message for _, message, _ in ended]
    result["seconds"] = max(at - killed for _, _, at in ended) if len(ended) == 3 else None

    later = time.monotonic()
    try:
        llm.complete(hello)
        result["later"] = "ok"
    except Exception as exc:
        result["later"] = type(exc).__name__
    result["later_seconds"] = time.monotonic() - later
    # What the loss left running here: the threads asking Ray's dead GCS why.
    result["askers"] = sum(t.name == "replay-actor-ray-why" for t in threading.enumerate())

    release = time.monotonic()
    llm.release()
    result["release_seconds"] = time.monotonic() - release

    def gone():
        try:
            return actor.status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    deadline = time.monotonic() + 10
    while not gone() and time.monotonic() < deadline:
        time.sleep(0.05)
    result["actor_pid"], result["actor_gone"] = actor.pid, gone()
    print(json.dumps(result), flush=True)
    os._exit(0)  # before Ray, missing its GCS, terminates this process itself
    """
)


def cluster_processes(token: str) -> list[psutil.Process]:
    """Live processes whose environment carries ``token`` (the driver's cluster)."""
    found = []
    for proc in psutil.process_iter(["pid", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE or proc.pid == os.getpid():
                continue
            if proc.environ().get(TOKEN_VAR) == token:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def run_driver(tmp_path: Path, script: str, *args: str) -> tuple[dict[str, Any], set[int]]:
    """Run ``script`` as a driver with its own cluster; its JSON answer and the PIDs of
    its cluster's processes that were still running once it exited (all stopped now)."""
    fixture = tmp_path / "fx.jsonl"
    hello = {"messages": [{"role": "user", "content": "hello"}]}
    fixture.write_bytes(entry_line(request_hash(hello), response={"content": "hi"}) + b"\n")
    temp_dir = tempfile.mkdtemp(prefix="ra-loss-", dir="/tmp")  # short: Ray's socket paths
    token = os.urandom(8).hex()
    env = {**os.environ, TOKEN_VAR: token}
    driver = subprocess.Popen(
        [sys.executable, "-c", script, temp_dir, str(fixture), str(TIMEOUT), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=tmp_path,  # ``-c`` puts the working directory first on sys.path
    )
    try:
        # Starting the cluster is not bounded by the call's timeout; the call is.
        out, _ = driver.communicate(timeout=60 + BOUND)
    except subprocess.TimeoutExpired:
        out = b""
    finally:
        driver.kill()  # ours; a no-op once it has exited
        driver.wait()
        left = cluster_processes(token)
        for proc in left:  # the cluster this test's driver started, stopped by PID
            try:
                proc.kill()
            except psutil.Error:
                pass
        _, alive = psutil.wait_procs(left, timeout=10)
        shutil.rmtree(temp_dir, ignore_errors=True)
    assert not alive, f"processes outlived the test: {[p.pid for p in alive]}"
    # No answer: the call stayed blocked, or went on being answered until Ray, missing
    # its GCS, terminated the driver.
    assert out, "the driver gave no answer: its call never ended as ActorLost"
    return json.loads(out.decode().strip().splitlines()[-1]), {p.pid for p in left}


def test_a_call_with_the_cluster_gone_is_actor_lost_within_its_timeout(tmp_path: Path) -> None:
    result, _ = run_driver(tmp_path, STOPPED_DRIVER)
    assert result["kind"] == "ActorLost", result
    assert result["message"].startswith("the cursor actor (ray actor "), result
    assert result["seconds"] < BOUND, result


@pytest.mark.parametrize("raylet", ["unreaped", "reaped"])
def test_a_looping_caller_is_actor_lost_when_the_gcs_and_raylet_are_killed(
    tmp_path: Path, raylet: str
) -> None:
    result, left = run_driver(tmp_path, LOOPING_DRIVER, raylet)
    assert result["answered_before"] >= 30, result  # the kill came mid-loop
    assert result["kinds"] == ["ActorLost"], result  # every thread's call ended so
    assert all(m.startswith("the cursor actor (ray actor ") for m in result["messages"]), result
    assert result["seconds"] < BOUND, result
    # Calls failing together ask Ray's (dead) GCS once, not once a call.
    assert result["askers"] <= 1, result
    # The handle is broken: the next call fails at once, and release() returns.
    assert result["later"] == "ActorLost", result
    assert result["later_seconds"] < 1.0, result
    assert result["release_seconds"] < BOUND, result
    # The cursor actor ended by itself, before anything here stopped it.
    assert result["actor_gone"], result
    assert result["actor_pid"] not in left, result
