"""The Ray backend with its cluster gone mid-call (issue 17, item 7).

A driver process of this test's own starts a one-node Ray cluster (its GCS and raylet
are that driver's children), acquires, stops the cursor actor's worker (SIGSTOP) so a
call is in flight, and then kills the GCS and the raylet by the PIDs it started. The
call must end as ``ActorLost`` within about its ``timeout``, by the handle's own
deadline: Ray's own waits (``ray.get``, ``ray.wait``, the actor table) stay blocked for
a minute, after which Ray terminates the whole driver.

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

DRIVER = textwrap.dedent(
    """
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
    me = psutil.Process()
    for proc in me.children(recursive=True):
        if proc.name() in ("gcs_server", "raylet"):
            proc.kill()  # started by this driver's ray.init
    caller.join(60)
    print(json.dumps(done), flush=True)
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


def test_a_call_with_the_cluster_gone_is_actor_lost_within_its_timeout(tmp_path: Path) -> None:
    fixture = tmp_path / "fx.jsonl"
    hello = {"messages": [{"role": "user", "content": "hello"}]}
    fixture.write_bytes(entry_line(request_hash(hello), response={"content": "hi"}) + b"\n")
    temp_dir = tempfile.mkdtemp(prefix="ra-loss-", dir="/tmp")  # short: Ray's socket paths
    token = os.urandom(8).hex()
    env = {**os.environ, TOKEN_VAR: token}
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, temp_dir, str(fixture), str(TIMEOUT)],
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
    assert out, "the driver gave no answer: the call stayed blocked"
    result = json.loads(out.decode().strip().splitlines()[-1])
    assert result["kind"] == "ActorLost", result
    assert result["message"].startswith("the cursor actor (ray actor "), result
    assert result["seconds"] < BOUND, result
