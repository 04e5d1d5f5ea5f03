"""``make soak``: the random-kill soak. Not part of ``make test`` (it takes minutes).

    .venv/bin/python -m tests.support.soak [--cycles 1000] [--seed N]

Each cycle plays an orchestrator's life with one acquisition: a ``Supervisor`` in this
process acquires for a fresh *owner* process, passes the handle to it (over a
``Connection``) and to a *copy holder* (as a ``Process`` argument), and all three take
elements of one sequence at once (``complete``, ``acomplete`` with many tasks,
``complete_many``). At a random moment one of them is SIGKILLed, or the actor, or this
process's zygote (also in the middle of an acquisition), or the acquirer releases while
the others call, or nothing happens; the cycle ends with a release or without one (as a
crashed run would). After every cycle:

- no element twice: every element any process received is distinct;
- no hang: every process ends, every call returns, within bounds;
- no survivor: the cycle's actor and processes are gone;
- no zombie: nothing of ours waits to be reaped;
- flat descriptors: this process's fd count does not grow over the run.

It prints one line per 100 cycles and a summary; exit status 0 only if every invariant
held in every cycle.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import random
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Sequence
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path

import psutil

from replay_actor import ReplayError, ReplayProvider, Supervisor, entry_line, request_hash
from replay_actor.replay.caller.zygote_client import zygote

LOOP = {"messages": [{"role": "user", "content": "soak"}]}
LENGTH = 1024
CALLS = 30  # per role per cycle
VICTIMS = ("none", "owner", "copy", "actor", "zygote", "zygote-in-acquire", "early-release")
HANG = 30.0  # seconds: anything slower than this is a hang


def _fixture(folder: Path) -> Path:
    path = folder / "soak.jsonl"
    line = entry_line(request_hash(LOOP), responses=[{"i": i} for i in range(LENGTH)])
    path.write_bytes(line + b"\n")
    return path


# -- the roles (each in a process of its own) ----------------------------------------------


def _take(provider: ReplayProvider, out: Connection, style: str) -> None:
    """Take up to CALLS elements, streaming each id to ``out`` as soon as it arrives."""
    if style == "async":

        async def one() -> None:
            try:
                got = await provider.acomplete(LOOP)
            except ReplayError:
                return
            out.send(got["i"])

        async def main() -> None:
            await asyncio.gather(*(one() for _ in range(CALLS)))

        asyncio.run(main())
        return
    if style == "many":
        for got in provider.complete_many([LOOP] * CALLS):
            if isinstance(got, dict):
                out.send(got["i"])
        return
    for _ in range(CALLS):
        try:
            out.send(provider.complete(LOOP)["i"])
        except ReplayError:
            return


def _owner_main(inbox: Connection, out: Connection, style: str) -> None:
    try:
        provider = inbox.recv()  # the handle, unpickled here: a copy
        _take(provider, out, style)
        provider.release()
    except EOFError:
        pass  # the orchestrator gave up on this cycle before sending the handle
    except BaseException:
        traceback.print_exc()
        os._exit(3)


def _copy_main(provider: ReplayProvider, out: Connection, style: str) -> None:
    try:
        _take(provider, out, style)
        provider.release()
    except BaseException:
        traceback.print_exc()
        os._exit(3)


# -- the orchestrator ------------------------------------------------------------------------


class Soak:
    def __init__(self, fixture: Path, seed: int) -> None:
        self.fixture = fixture
        self.rng = random.Random(seed)
        self.ctx = multiprocessing.get_context("forkserver")
        self.ctx.set_forkserver_preload(["replay_actor"])
        self.supervisor = Supervisor()
        self.failures: list[str] = []
        self.victims: Counter[str] = Counter()
        self.acquire_failures = 0
        self.elements = 0

    def fail(self, cycle: int, what: str) -> None:
        self.failures.append(f"cycle {cycle}: {what}")
        print(f"FAIL cycle {cycle}: {what}", flush=True)

    def _kill_zygote(self) -> None:
        pid = zygote.pid
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)  # our own child, by its PID
            except ProcessLookupError:
                pass

    def _acquire(self, victim: str, owner: BaseProcess) -> ReplayProvider | None:
        """Acquire for ``owner``, killing the zygote meanwhile when that is the victim."""
        timer = None
        if victim == "zygote-in-acquire":
            timer = threading.Timer(self.rng.uniform(0, 0.004), self._kill_zygote)
            timer.start()
        provider: ReplayProvider | None = None
        try:
            provider = self.supervisor.acquire(self.fixture, owner_pid=owner.pid, timeout=5)
        except ReplayError:
            self.acquire_failures += 1  # a zygote killed mid-acquisition: a clean error
        if timer is not None:
            timer.join()
        return provider

    def cycle(self, n: int) -> None:
        rng = self.rng
        victim = rng.choice(VICTIMS)
        self.victims[victim] += 1
        styles = ["sync", "async", "many"]
        inbox_r, inbox_w = self.ctx.Pipe(duplex=False)
        owner_r, owner_w = self.ctx.Pipe(duplex=False)
        copy_r, copy_w = self.ctx.Pipe(duplex=False)
        owner = self.ctx.Process(
            target=_owner_main, args=(inbox_r, owner_w, rng.choice(styles)), daemon=True
        )
        owner.start()
        inbox_r.close()
        owner_w.close()
        provider = self._acquire(victim, owner)
        processes = [owner]
        pipes = [owner_r]
        got: list[int] = []
        actor_pid = None
        if provider is not None:
            actor_pid = provider.actor_pid
            try:
                inbox_w.send(provider)
            except (OSError, ReplayError):
                pass
            copy = self.ctx.Process(
                target=_copy_main, args=(provider, copy_w, rng.choice(styles)), daemon=True
            )
            try:
                copy.start()
                processes.append(copy)
            except ReplayError:
                pass  # the acquisition ended before the copy could be made
            copy_w.close()
            pipes.append(copy_r)
            time.sleep(rng.uniform(0, 0.03))
            self._strike(victim, owner, processes, provider)
            self._calls(provider, got)
        else:
            copy_w.close()
            copy_r.close()
        inbox_w.close()
        self._join(n, victim, processes)
        for pipe in pipes:
            got.extend(_drain(pipe))
            pipe.close()
        for proc in processes:
            proc.close()
        if provider is not None and rng.random() < 0.5:
            provider.release()  # else: left as a crashed run leaves it
        self._check(n, victim, got, actor_pid)

    def _check(self, n: int, victim: str, got: list[int], actor_pid: int | None) -> None:
        """Each element handed out once, and the actor gone with its cycle."""
        self.elements += len(got)
        twice = [i for i, k in Counter(got).items() if k > 1]
        if twice:
            self.fail(n, f"elements handed out twice: {twice[:5]} (victim {victim})")
        if actor_pid is not None and not _gone(actor_pid, 10.0):
            self.fail(n, f"the actor {actor_pid} survived its cycle (victim {victim})")

    def _join(self, n: int, victim: str, processes: Sequence[BaseProcess]) -> None:
        """Wait for the cycle's role processes; a hung or failed one is a failure."""
        deadline = time.monotonic() + HANG
        for proc in processes:
            proc.join(max(0.1, deadline - time.monotonic()))
            if proc.is_alive():
                self.fail(n, f"a role process hung (victim {victim})")
                proc.kill()
                proc.join(5)
            elif proc.exitcode not in (0, -signal.SIGKILL):
                self.fail(n, f"a role process failed with {proc.exitcode} (victim {victim})")

    def _strike(
        self,
        victim: str,
        owner: multiprocessing.process.BaseProcess,
        processes: Sequence[multiprocessing.process.BaseProcess],
        provider: ReplayProvider,
    ) -> None:
        if victim == "owner":
            owner.kill()
        elif victim == "copy" and len(processes) > 1:
            processes[1].kill()
        elif victim == "actor":
            try:
                os.kill(provider.actor_pid, signal.SIGKILL)  # the zygote's child, by PID
            except ProcessLookupError:
                pass
        elif victim == "zygote":
            self._kill_zygote()
        elif victim == "early-release":
            provider.release()  # the acquirer ends it while the others call

    def _calls(self, provider: ReplayProvider, got: list[int]) -> None:
        """The orchestrator takes elements too, with a batch and single calls."""
        for answer in provider.complete_many([LOOP] * (CALLS // 2)):
            if isinstance(answer, dict):
                got.append(answer["i"])
        for _ in range(CALLS // 2):
            try:
                got.append(provider.complete(LOOP)["i"])
            except ReplayError:
                break


def _drain(pipe: Connection) -> list[int]:
    got: list[int] = []
    try:
        while pipe.poll(0):
            got.append(pipe.recv())
    except (EOFError, OSError):
        pass
    return got


def _gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while True:
        try:
            proc = psutil.Process(pid)
            if proc.status() == psutil.STATUS_ZOMBIE and proc.ppid() != os.getpid():
                return True  # dead; its parent (a zygote, or init) collects it
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _zombies() -> list[int]:
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() == psutil.STATUS_ZOMBIE and child.ppid() == os.getpid():
                found.append(child.pid)
        except psutil.NoSuchProcess:
            pass
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.soak", description=__doc__)
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    args = parser.parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as folder:
        soak = Soak(_fixture(Path(folder)), args.seed)
        print(f"soak: {args.cycles} cycles, seed {args.seed}", flush=True)
        baseline = None
        peak = 0
        for n in range(1, args.cycles + 1):
            try:
                soak.cycle(n)
            except Exception:
                soak.fail(n, "the orchestrator raised:\n" + traceback.format_exc())
            if n == min(50, args.cycles):
                baseline = _fds()  # after warm-up: zygote, forkserver, watcher thread
            if baseline is not None:
                peak = max(peak, _fds())
            if n % 100 == 0:
                elapsed = time.monotonic() - started
                print(
                    f"  {n:5d} cycles  {elapsed:6.1f} s  fds {_fds()}  "
                    f"elements {soak.elements}  failures {len(soak.failures)}",
                    flush=True,
                )
        soak.supervisor.shutdown()
        time.sleep(0.2)
        zombies = _zombies()
        if zombies:
            soak.fail(args.cycles, f"zombies left: {zombies}")
        end_fds = _fds()
        if baseline is not None and end_fds > baseline + 4:
            soak.fail(args.cycles, f"descriptors grew: {baseline} after warm-up, {end_fds} at end")
    elapsed = time.monotonic() - started
    print(
        f"soak: {args.cycles} cycles in {elapsed:.0f} s; victims {dict(soak.victims)}; "
        f"{soak.elements} elements taken, none twice"
        * (not soak.failures)
        + (f"{len(soak.failures)} FAILURES" if soak.failures else "")
    )
    print(
        f"soak: fds after warm-up {baseline}, peak {peak}, at end {end_fds}; "
        f"acquisitions refused cleanly (zygote killed mid-way): {soak.acquire_failures}; "
        f"zombies: {len(zombies)}"
    )
    return 1 if soak.failures else 0


if __name__ == "__main__":
    sys.exit(main())
