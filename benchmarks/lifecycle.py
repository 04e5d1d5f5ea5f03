"""Process lifecycle: P5 (acquire -> ready) and P7 (owner SIGKILL -> actor gone; idle CPU).

P5's floor is a no-op interpreter started exactly as ``acquire`` starts the actor
(``subprocess.Popen`` of ``sys.executable -c``, the same environment, a passed socket
fd) and waited for until it signals ready. The first acquisition of the run is not
counted (it warms the page cache and the reaper thread).

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
import time
from collections.abc import Callable

import psutil

from replay_actor import ReplayProvider, acquire

from .procs import Owner, bare_child_ready, child_env, wait_exit
from .timing import Config, Row, Stats, interleave, percentile
from .workload import fixture

__all__ = ["run_acquire", "run_owner_death"]


def run_acquire(cfg: Config) -> list[Row]:
    """P5: acquire -> ready on a 1k-entry fixture vs a bare no-op child."""
    path = fixture(1_000)
    env = child_env()
    acquire(path).release()  # the first acquisition, not counted

    def ours() -> float:
        start = time.perf_counter()
        provider = acquire(path)
        elapsed = time.perf_counter() - start
        provider.release()
        return elapsed

    samples = interleave(
        {"ours": ours, "bare": lambda: bare_child_ready(env)},
        reps=cfg.pick(21, 5),
        warmup=1,
    )
    mine = Stats.of(samples["ours"])
    bare = Stats.of(samples["bare"])
    return [
        Row(
            id="P5",
            what="acquire -> ready, 1k-entry fixture (after the first acquisition)",
            unit="ms",
            ours=mine,
            reference=bare,
            reference_name="bare no-op child, same Popen + env, waited for ready",
            ratio=mine.median / bare.median,
            ratio_means="ours / bare child",
            op="<=",
            bound=2.0,
        )
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
    window = cfg.pickf(10.0, 5.0)
    kills = cfg.pick(40, 10)
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
