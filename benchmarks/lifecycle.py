"""Process lifecycle: P5 (acquire -> ready) and P7 (owner SIGKILL -> actor gone; idle CPU).

P5 compares ``acquire`` (after the run's first acquisition, which starts the zygote and
is not counted) with two no-op children waited for until they signal ready:

- P5a, the target's "a bare no-op child started the same way", read strictly: an actor is a
  child forked by the warm zygote, so the reference is a child forked by a warm
  mini-zygote (``minizygote``: started as the zygote is, ``python -P -c`` with the same
  environment, the child's socket passed over ``SCM_RIGHTS``) that writes "OK" and exits.
  The same mini-zygote holding the parsed 1k-entry fixture, and running the real actor in
  its child, split the difference into steps (fork, table, actor set-up, acquirer side).
- P5b, the old floor: a fresh no-op interpreter started by ``subprocess.Popen`` of
  ``sys.executable -c`` as actors used to be started (same environment, passed fd).

P5a and P5b are measured in a worker process of their own (``python -m
benchmarks.lifecycle REPS``), whose zygote has acquired only the 1k fixture; P5c again in
this process, whose zygote caches the 100k, 10k and 100 fixtures too (the P1 run's
state, made explicit), against a mini-zygote holding the same four tables.

P7 starts a small owner process, acquires for it, opens pidfds on the owner and the
actor (both alive, so no PID can have been recycled), SIGKILLs the owner by its PID
and times until each pidfd reports an exit. The owner's own death latency is reported
as the reference: the part of the time that is the kernel's, not ours. Idle CPU is the
actor's on-CPU time from ``/proc/PID/schedstat`` (nanoseconds; psutil's ``cpu_times``
counts in 10 ms clock ticks, too coarse for a 1 ms target), over a window of at least
10 s (5 s with ``--quick``), scaled to 10 s.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import msgspec
import psutil

from replay_actor import ReplayProvider, acquire
from replay_actor.fixture import DEFAULT_CEILINGS
from replay_actor.replay.core.protocol import ActorConfig
from replay_actor.replay.io.procs import identity as owner_identity

from .minizygote import MiniZygote
from .procs import Owner, bare_child_ready, child_env, start_worker, stop, wait_exit
from .timing import Config, Row, Stats, interleave, percentile
from .workload import fixture

__all__ = ["run_acquire", "run_owner_death"]


def _actor_config(path: str) -> bytes:
    """The config ``acquire`` would send for ``path``, owned by this process."""
    me = os.getpid()
    create_time = owner_identity(me)
    assert create_time is not None
    return msgspec.json.encode(
        ActorConfig(
            fixture=os.path.abspath(path),
            owner_pid=me,
            owner_create_time=create_time,
            private=False,
            ceilings=DEFAULT_CEILINGS.as_dict(),
            inspection_path=None,
        )
    )


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def _measure_acquire(
    reps: int, held: tuple[str, ...], *, interpreter: bool
) -> dict[str, list[float]]:
    """Interleaved samples (seconds) of ``acquire`` on the 1k fixture and its references.

    This process's zygote is expected to hold ``held`` (the 1k fixture among them); the
    second mini-zygote holds the same tables."""
    path = str(fixture(1_000))
    env = child_env()
    config = _actor_config(path)
    bare = MiniZygote(env)
    table = MiniZygote(env, held)
    try:

        def ours() -> float:
            start = time.perf_counter()
            provider = acquire(path)
            elapsed = time.perf_counter() - start
            provider.release()
            return elapsed

        sides: dict[str, Callable[[], float]] = {
            "ours": ours,
            "fork": bare.noop,
            "fork_table": table.noop,
            "fork_actor": lambda: table.actor(config),
        }
        if interpreter:
            sides["interpreter"] = lambda: bare_child_ready(env)
        return interleave(sides, reps=reps, warmup=2)
    finally:
        bare.close()
        table.close()


def _acquire_worker(reps: int) -> None:
    """P5's fresh measurement, in a process of its own: its zygote's first acquisition
    (not counted) is of the 1k fixture, so that is the only table it holds."""
    path = str(fixture(1_000))
    acquire(path).release()
    samples = _measure_acquire(reps, (path,), interpreter=True)
    sys.stdout.write(msgspec.json.encode(samples).decode() + "\n")
    sys.stdout.flush()


def _fresh_samples(reps: int) -> dict[str, list[float]]:
    worker = start_worker("benchmarks.lifecycle", str(reps))
    try:
        assert worker.stdout is not None
        line = worker.stdout.readline()
        if not line:
            raise RuntimeError("the P5 worker ended early (see children.log)")
        return msgspec.json.decode(line, type=dict[str, list[float]])
    finally:
        if worker.stdin is not None:
            worker.stdin.close()
        try:
            worker.wait(10.0)
        except subprocess.TimeoutExpired:
            pass
        if worker.stdout is not None:
            worker.stdout.close()
        stop(worker)


def _steps(samples: dict[str, list[float]], tables: str) -> dict[str, float]:
    med = {name: statistics.median(values) for name, values in samples.items()}
    return {
        "fork of the warm process (no table)": med["fork"],
        f"+ {tables} held by the forking process": med["fork_table"] - med["fork"],
        "+ the actor's set-up in the child (name, owner pidfd + psutil identity, table,"
        " listener bind, READY frame)": med["fork_actor"] - med["fork_table"],
        "+ the acquirer's side and the zygote's protocol (owner identity, config,"
        " fixture stat checks, actor pidfd, handle)": med["ours"] - med["fork_actor"],
    }


def _note(samples: dict[str, list[float]], tables: str) -> str:
    med = {name: statistics.median(values) for name, values in samples.items()}
    text = (
        f"medians: acquire {_ms(med['ours'])}; a no-op child forked by a warm process"
        f" started as the zygote is {_ms(med['fork'])}; the same from a process holding"
        f" {tables} {_ms(med['fork_table'])}; the real actor forked from that process,"
        f" until READY, {_ms(med['fork_actor'])}"
    )
    if "interpreter" in med:
        text += f"; a fresh no-op interpreter {_ms(med['interpreter'])}"
    steps = "; ".join(f"{k} {v * 1e3:+.2f} ms" for k, v in _steps(samples, tables).items())
    return f"{text}. Steps: {steps}."


def run_acquire(cfg: Config) -> list[Row]:
    """P5: acquire -> ready on a 1k-entry fixture vs a no-op child forked from a warm
    process started as the zygote is (the strict reading) and vs a fresh interpreter
    started as actors used to be (the old floor), with the steps in between; fresh (a
    zygote holding only that fixture) and in this run (a zygote that also caches the
    100, 10k and 100k fixtures)."""
    reps = cfg.rounds(31, 5)
    fresh = _fresh_samples(reps)
    # This process's zygote: make its cache hold exactly these four, the 1k one last.
    held = tuple(str(fixture(n)) for n in (100_000, 10_000, 100, 1_000))
    for path in held:
        acquire(path, timeout=120.0).release()
    in_run = _measure_acquire(reps, held, interpreter=False)
    one = "the parsed 1k-entry fixture"
    four = "what the zygote cache keeps of the 100k, 10k, 100 and 1k-entry fixtures"
    ours, fork = Stats.of(fresh["ours"]), Stats.of(fresh["fork"])
    interp = Stats.of(fresh["interpreter"])
    ours_run, fork_run = Stats.of(in_run["ours"]), Stats.of(in_run["fork"])
    reference_name = (
        "bare no-op child forked from a warm process started as the zygote is"
        " (python -P -c, same env, fd via SCM_RIGHTS)"
    )
    return [
        Row(
            id="P5a",
            what=(
                "acquire -> ready, 1k-entry fixture, after the first acquisition (its"
                " zygote holds that fixture only); the floor read strictly"
            ),
            unit="ms",
            ours=ours,
            reference=fork,
            reference_name=reference_name,
            ratio=ours.median / fork.median,
            ratio_means="ours / forked no-op child",
            op="<=",
            bound=2.0,
            note="In a fresh process: " + _note(fresh, one),
            extra={"steps_s": _steps(fresh, one), "samples_s": fresh},
        ),
        Row(
            id="P5b",
            what="P5a vs a fresh interpreter (how actors used to be started: loose reading)",
            unit="ms",
            ours=ours,
            reference=interp,
            reference_name="bare no-op interpreter, same Popen + env, waited for ready",
            ratio=ours.median / interp.median,
            ratio_means="ours / fresh interpreter",
            op="<=",
            bound=2.0,
        ),
        Row(
            id="P5c",
            what=(
                "acquire -> ready, 1k-entry fixture, in this run: its zygote also caches"
                " the 100, 10k and 100k fixtures (strict reading)"
            ),
            unit="ms",
            ours=ours_run,
            reference=fork_run,
            reference_name="the same forked no-op child as P5a",
            ratio=ours_run.median / fork_run.median,
            ratio_means="ours / forked no-op child",
            op="<=",
            bound=2.0,
            note="In this run's process: " + _note(in_run, four),
            extra={"steps_s": _steps(in_run, four), "samples_s": in_run},
        ),
    ]


def _on_cpu_ns(pid: int) -> int:
    """Nanoseconds ``pid`` has run on a CPU."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0])
    except OSError:
        times = psutil.Process(pid).cpu_times()
        return int((times.user + times.system) * 1e9)


def _kill_once(path: str) -> tuple[float, float]:
    """One owner SIGKILL; seconds until (the actor, the owner) had exited."""
    owner = Owner()
    try:
        provider = acquire(path, owner_pid=owner.pid)
        try:
            actor_fd = os.pidfd_open(provider.actor_pid)
            owner_fd = os.pidfd_open(owner.pid)
            try:
                start = time.perf_counter()
                owner.popen.send_signal(signal.SIGKILL)
                owner_gone = wait_exit(owner_fd, 5.0)
                owner_at = time.perf_counter() - start
                actor_gone = wait_exit(actor_fd, 5.0)
                actor_at = time.perf_counter() - start
            finally:
                os.close(actor_fd)
                os.close(owner_fd)
        finally:
            provider.release()
    finally:
        owner.close()
    if not (owner_gone and actor_gone):
        return float("inf"), owner_at
    return actor_at, owner_at


def run_owner_death(cfg: Config) -> list[Row]:
    """P7: kill latency p50/p99 over >= 30 kills; idle CPU of an untouched actor."""
    path = str(fixture(100))
    window = cfg.span(10.0, 5.0)
    kills = cfg.rounds(40, 10)
    idle: ReplayProvider = acquire(path)
    try:
        pid = idle.actor_pid
        proc = psutil.Process(pid)
        idle.snapshot()  # one exchange, then nothing more for the whole window
        cpu0 = _on_cpu_ns(pid)
        ticks0 = proc.cpu_times()
        switches0 = proc.num_ctx_switches()
        started = time.perf_counter()
        actor: list[float] = []
        owner: list[float] = []
        sleep: Callable[[float], None] = time.sleep
        for _ in range(kills):
            a, o = _kill_once(path)
            actor.append(a)
            owner.append(o)
        sleep(max(0.0, window - (time.perf_counter() - started)))
        elapsed = time.perf_counter() - started
        cpu1 = _on_cpu_ns(pid)
        ticks1 = proc.cpu_times()
        switches1 = proc.num_ctx_switches()
    finally:
        idle.release()
    per_10s_ms = (cpu1 - cpu0) / 1e6 * (10.0 / elapsed)
    ticks_ms = (ticks1.user + ticks1.system - ticks0.user - ticks0.system) * 1e3
    wakeups = (
        switches1.voluntary + switches1.involuntary - switches0.voluntary - switches0.involuntary
    )
    p50, p99 = percentile(actor, 50), percentile(actor, 99)
    return [
        Row(
            id="P7a",
            what=f"owner SIGKILL -> actor gone ({len(actor)} kills; p50 {p50 * 1e3:.2f} ms)",
            unit="ms",
            ours=Stats.of(actor),
            reference=Stats.of(owner),
            reference_name="the owner's own SIGKILL -> exit (kernel)",
            ratio=p99 * 1e3,
            ratio_means="p99 in ms (absolute)",
            op="<=",
            bound=50.0,
            extra={"p50_s": p50, "p99_s": p99, "samples_s": actor},
        ),
        Row(
            id="P7b",
            what=f"idle actor CPU, per 10 s (window {elapsed:.1f} s, {wakeups} wake-ups)",
            unit="ms",
            ours=Stats.of([per_10s_ms / 1e3]),
            reference=None,
            reference_name=f"psutil cpu_times: {max(ticks_ms, 0.0):.0f} ms (10 ms ticks)",
            ratio=per_10s_ms,
            ratio_means="ms of CPU per 10 s (absolute)",
            op="<=",
            bound=1.0,
            extra={"window_s": elapsed, "context_switches": wakeups},
        ),
    ]


if __name__ == "__main__":
    _acquire_worker(int(sys.argv[1]))
