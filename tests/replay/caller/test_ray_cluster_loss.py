"""The Ray backend with its cluster gone mid-call.

A driver process of this test's own starts a one-node Ray cluster (its GCS and raylet
are that driver's children), acquires, and then kills the GCS and the raylet by the PIDs
it started. A call in flight must end as ``ActorLost`` within about its ``timeout``, by
the handle's own deadline, and every later call at once: Ray's own queries to the GCS
(the actor table) stay blocked for a minute, after which Ray terminates the whole driver.

- With the cursor actor's worker stopped (SIGSTOP), so the call is in flight for good.
  The driver checks that the PID Ray's actor table gives is the process that runs the
  actor's calls, waits until all its threads have stopped, and only then calls. Killing
  the raylet orphans its workers' process groups, and the kernel sends a stopped
  process in an orphaned group SIGHUP and SIGCONT (POSIX job control): the actor ran
  again, and where SIGHUP was ignored it could answer the call before it exited with its
  raylet. So the driver adopts the raylet's orphans (a subreaper, in the actor's
  session): the actor's group is not orphaned, and it stays stopped until the call ends.
- With threads calling in a loop, as ``ray stop`` would find an evaluation: once with
  the killed raylet left unreaped (a zombie child of the driver, as when ``ray.init()``
  started the cluster: Ray's workers, which check the raylet's PID, do not notice), once
  reaped at once (as init reaps a cluster that ``ray start`` began). The cursor actor
  must exit by itself either way, ``release()`` return promptly, and the calls failing
  together leave at most one thread asking the dead GCS why.

The driver runs apart from pytest for that reason. The test finds every process of the
driver's cluster, orphans included: the driver's process tree, as the test sees it while
the driver runs and as the driver writes it down just before the kill (Ray's agents,
which outlive a killed raylet, write their process titles over their command line and
environment, so the tree is what finds them), and any process that carries the driver's
token in its environment, names the cluster's temporary directory in its command line or
runs in the driver's working directory. It stops those still running by PID and fails
if any outlived the test.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
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
#: How long the driver may take to start its cluster and its cursor actor: not timed (a
#: Ray worker takes longer than ``TIMEOUT`` to start on a loaded machine).
START = 60.0
TOKEN_VAR = "REPLAY_ACTOR_CLUSTER_LOSS_TEST"

#: The driver's start: its own cluster, an acquisition, one answered call.
PROLOGUE = """
import json, os, signal, sys, threading, time
import psutil, ray
from ray._private import state
from replay_actor.ray import RayReplayProvider, acquire

temp_dir, fixture, tree = sys.argv[1], sys.argv[2], sys.argv[3]
timeout, START = float(sys.argv[4]), float(sys.argv[5])
hello = {"messages": [{"role": "user", "content": "hello"}]}
ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False,
         logging_level="ERROR", _temp_dir=temp_dir)
# The actor's start is not what is timed: the acquisition waits up to START, and the
# handle called here is that acquisition with every call bounded by ``timeout``, as
# acquire(fixture, timeout=timeout) makes it where the actor starts within timeout.
started = acquire(fixture, timeout=START)
_, (acquired, _) = started.__reduce__()
llm = RayReplayProvider(acquired._replace(timeout=timeout), acquirer=True)
llm.complete(hello)
me = psutil.Process()
cluster = [p for p in me.children(recursive=True) if p.name() in ("gcs_server", "raylet")]
assert sorted(p.name() for p in cluster) == ["gcs_server", "raylet"], cluster


def note_cluster():
    # Every process of this driver's cluster while it is up, for the test's leak check.
    with open(tree, "a") as out:
        for proc in me.children(recursive=True):
            try:
                out.write(json.dumps([proc.pid, proc.create_time()]) + "\\n")
            except psutil.Error:
                pass


note_cluster()
"""

STOPPED_DRIVER = PROLOGUE + textwrap.dedent(
    """
    import ctypes

    PR_SET_CHILD_SUBREAPER = 36


    def give_up(message):
        print(json.dumps({"kind": "setup", "message": message}), flush=True)
        os._exit(0)


    def status(proc):
        try:
            return proc.status()
        except psutil.NoSuchProcess:
            return "gone"


    def stopped(proc):
        # A group stop is complete once every thread is stopped, not only the first.
        try:
            if proc.status() != psutil.STATUS_STOPPED:
                return False
            for task in os.listdir(f"/proc/{proc.pid}/task"):
                with open(f"/proc/{proc.pid}/task/{task}/stat") as stat:
                    if stat.read().rsplit(")", 1)[1].split()[0] != "T":
                        return False
        except (OSError, psutil.Error):
            return False
        return True


    # The process that runs the actor's calls: as Ray's actor table has it, as the actor
    # itself reports it, and one of this node's raylet's workers, titled for the actor.
    pid = state.actors(llm.actor_id)["Pid"]
    serving = acquired.actor.__ray_call__.remote(lambda actor: os.getpid())
    serving = serving.future().result(timeout=START)
    raylet = next(p for p in cluster if p.name() == "raylet")
    try:
        actor = psutil.Process(pid)
        title, parent = " ".join(actor.cmdline()), actor.ppid()
    except psutil.Error as exc:
        give_up(f"the actor table's PID {pid} is not a running process: {exc!r}")
    if (pid, parent) != (serving, raylet.pid) or not title.startswith("ray::CursorActor"):
        give_up(
            f"the actor table's PID {pid} ({title!r}, parent {parent}) is not the "
            f"cursor actor's worker: the actor runs in {serving}, the raylet is {raylet.pid}"
        )
    # Adopt what the raylet's death orphans, so the kernel does not resume the actor.
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        give_up(f"prctl(PR_SET_CHILD_SUBREAPER): errno {ctypes.get_errno()}")
    os.kill(pid, signal.SIGSTOP)  # the call stays in flight
    deadline = time.monotonic() + 10
    while not stopped(actor):
        if time.monotonic() > deadline:
            give_up(f"the cursor actor's worker {pid} did not stop: {status(actor)}")
        time.sleep(0.01)
    done = {}
    calling = threading.Event()

    def call():
        calling.set()
        started = time.monotonic()
        try:
            llm.complete(hello)
            done["kind"], done["message"] = "ok", ""
        except Exception as exc:
            done["kind"], done["message"] = type(exc).__name__, str(exc)
        done["seconds"] = time.monotonic() - started

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    calling.wait(10)
    time.sleep(0.5)  # the call goes out to the stopped actor
    if done:
        give_up(f"the call to the stopped actor ended before the kill: {done}")
    note_cluster()
    for proc in cluster:
        proc.kill()  # started by this driver's ray.init
    caller.join(60)
    done["actor"] = status(actor)  # still stopped: nothing here answered the call
    actor.kill()  # of this driver's cluster, adopted: by PID
    print(json.dumps(done), flush=True)
    os._exit(0)  # before Ray, missing its GCS, terminates this process itself
    """
)

LOOPING_DRIVER = PROLOGUE + textwrap.dedent(
    """
    reap = sys.argv[6] == "reaped"
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
    note_cluster()
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


def running(proc: psutil.Process) -> bool:
    """``proc`` (the same process, not a reused PID) runs still; a zombie has ended."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def noted(tree: Path) -> set[psutil.Process]:
    """The processes the driver wrote down (PID, start time) that run still."""
    found = set()
    lines = tree.read_text().splitlines() if tree.exists() else []
    for line in lines:
        try:
            pid, created = json.loads(line)
            proc = psutil.Process(pid)
            if abs(proc.create_time() - created) < 0.01:  # not another process since
                found.add(proc)
        except (ValueError, psutil.Error):
            continue  # a line cut short by the driver's end, or a process gone
    return found


def cluster_processes(
    seen: set[psutil.Process], token: str, temp_dir: str, cwd: Path
) -> set[psutil.Process]:
    """Live processes of the cluster a driver of this test started: those ``seen`` in
    its tree, and any whose environment carries ``token``, whose command line names
    ``temp_dir`` or whose working directory is the driver's ``cwd``."""
    found = {proc for proc in seen if running(proc)}
    for proc in psutil.process_iter(["pid", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE or proc.pid == os.getpid():
                continue
            if (
                proc.environ().get(TOKEN_VAR) == token
                or temp_dir in " ".join(proc.cmdline())
                or proc.cwd() == str(cwd)
            ):
                found.add(proc)
        except psutil.Error:
            continue
    return found


def run_driver(tmp_path: Path, script: str, *args: str) -> tuple[dict[str, Any], set[int]]:
    """Run ``script`` as a driver with its own cluster; its JSON answer and the PIDs of
    its cluster's processes that were still running once it exited (all stopped now)."""
    fixture = tmp_path / "fx.jsonl"
    hello = {"messages": [{"role": "user", "content": "hello"}]}
    fixture.write_bytes(entry_line(request_hash(hello), response={"content": "hi"}) + b"\n")
    tree = tmp_path / "cluster.jsonl"
    errors = tmp_path / "driver.err"
    temp_dir = tempfile.mkdtemp(prefix="ra-loss-", dir="/tmp")  # short: Ray's socket paths
    token = os.urandom(8).hex()
    env = {**os.environ, TOKEN_VAR: token}
    seen: set[psutil.Process] = set()
    out = b""
    argv = [temp_dir, str(fixture), str(tree), str(TIMEOUT), str(START), *args]
    with errors.open("wb") as stderr:
        driver = subprocess.Popen(
            [sys.executable, "-c", script, *argv],
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            cwd=tmp_path,  # ``-c`` puts the working directory first on sys.path
        )
    try:
        # Starting the cluster is not bounded by the call's timeout; the call is.
        deadline = time.monotonic() + START + BOUND
        while True:
            try:  # the driver's tree while its cluster is up, agents included
                seen.update(psutil.Process(driver.pid).children(recursive=True))
            except psutil.Error:
                pass
            try:
                out, _ = driver.communicate(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() > deadline:
                    break
    finally:
        driver.kill()  # ours; a no-op once it has exited
        driver.wait()
        seen |= noted(tree)
        left = cluster_processes(seen, token, temp_dir, tmp_path)
        for proc in left:  # the cluster this test's driver started, stopped by PID
            try:
                proc.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(left, timeout=10)
        outlived = cluster_processes(seen, token, temp_dir, tmp_path)
        shutil.rmtree(temp_dir, ignore_errors=True)
    assert not outlived, f"processes outlived the test: {sorted(p.pid for p in outlived)}"
    # No answer: the call stayed blocked, or went on being answered until Ray, missing
    # its GCS, terminated the driver.
    said = errors.read_text(errors="replace")[-3000:]
    assert out, f"the driver gave no answer: its call never ended as ActorLost\n{said}"
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    assert result.get("kind") != "setup", result["message"]
    return result, {p.pid for p in left}


def test_a_call_with_the_cluster_gone_is_actor_lost_within_its_timeout(
    tmp_path: Path, no_leaks: None
) -> None:
    result, _ = run_driver(tmp_path, STOPPED_DRIVER)
    # The actor stayed stopped through the kill and the call: nothing could answer it.
    assert result["actor"] == psutil.STATUS_STOPPED, result
    assert result["kind"] == "ActorLost", result
    assert result["message"].startswith("the cursor actor (ray actor "), result
    assert result["seconds"] < BOUND, result


@pytest.mark.parametrize("raylet", ["unreaped", "reaped"])
def test_a_looping_caller_is_actor_lost_when_the_gcs_and_raylet_are_killed(
    tmp_path: Path, raylet: str, no_leaks: None
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
