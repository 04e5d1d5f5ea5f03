"""P9: concurrency. Threads sharing one handle, evaluations in their own processes, and
asyncio tasks on ``acomplete``; P10: a pipelined ``complete_many`` batch.

- threads: 8 threads on one handle, started together on a barrier, vs one thread making
  the same number of calls; throughput ratio.
- processes: 4 worker processes (``python -m benchmarks.concurrency FIXTURE CALLS``),
  each with its own acquisition, told to go together; aggregate throughput is all calls
  over (last end - first start), against one of the same workers going alone.
- asyncio (P9c): 64 tasks on one event loop, each making calls on ``acomplete`` in a
  loop (no worker thread: one connection, many requests in flight) through P10's 1,000
  distinct requests, against P10's in-process floor over the same requests; throughput
  ratio.
- pipelined (P10): ``complete_many`` of 1,000 distinct realistic requests (each hits
  its own entry) against the in-process floor: ``request_hash`` + a dict lookup + a
  decode of the same requests' stored response bytes, no actor; throughput ratio.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import msgspec

from replay_actor import acquire, entry_line, request_hash

from .procs import start_worker, stop
from .timing import Config, Row, Stats, interleave, paired_ratio, per_call
from .workload import _publish, cache_dir, fixture, realistic_request, response_for

__all__ = ["run_concurrency"]

_THREADS = 8
_PROCESSES = 4
_TASKS = 64
_BATCH = 1000


def _worker_main(path: str, calls: int) -> None:
    """One evaluation in its own process: acquire, then run ``calls`` calls per ``go``."""
    req = realistic_request()
    with acquire(path) as provider:
        for _ in range(50):
            provider.complete(req)
        print("ready", flush=True)
        for line in sys.stdin:
            if line.strip() != "go":
                break
            start = time.perf_counter()
            for _ in range(calls):
                provider.complete(req)
            print(f"{start:.9f} {time.perf_counter():.9f}", flush=True)


class _Worker:
    def __init__(self, path: str, calls: int) -> None:
        self.popen = start_worker("benchmarks.concurrency", path, str(calls))

    def _read(self) -> str:
        assert self.popen.stdout is not None
        line = self.popen.stdout.readline().decode().strip()
        if not line:
            raise RuntimeError("a P9 worker process ended early")
        return line

    def wait_ready(self) -> None:
        if self._read() != "ready":
            raise RuntimeError("a P9 worker did not start")

    def go(self) -> None:
        assert self.popen.stdin is not None
        self.popen.stdin.write(b"go\n")
        self.popen.stdin.flush()

    def span(self) -> tuple[float, float]:
        start, end = self._read().split()
        return float(start), float(end)

    def close(self) -> None:
        if self.popen.stdin is not None:
            self.popen.stdin.close()  # EOF: the worker releases and exits
        try:
            self.popen.wait(10.0)
        except subprocess.TimeoutExpired:
            pass
        if self.popen.stdout is not None:
            self.popen.stdout.close()
        stop(self.popen)


def _threads_row(cfg: Config, path: str) -> Row:
    req = realistic_request()
    calls = cfg.pick(1600, 400)
    with acquire(path) as provider:

        def spread() -> float:
            barrier = threading.Barrier(_THREADS + 1)

            def run() -> None:
                barrier.wait()
                for _ in range(calls // _THREADS):
                    provider.complete(req)

            threads = [threading.Thread(target=run) for _ in range(_THREADS)]
            for t in threads:
                t.start()
            barrier.wait()
            start = time.perf_counter()
            for t in threads:
                t.join()
            return (time.perf_counter() - start) / calls

        samples = interleave(
            {"one": per_call(lambda: provider.complete(req), calls), "eight": spread},
            reps=cfg.rounds(9, 3),
        )
    one, eight = Stats.of(samples["one"]), Stats.of(samples["eight"])
    return Row(
        id="P9a",
        what=f"{_THREADS} threads on one handle vs one thread (time per call)",
        unit="us",
        ours=eight,
        reference=one,
        reference_name="one thread, same handle",
        ratio=one.median / eight.median,
        ratio_means="throughput, 8 threads / 1",
        op=">=",
        bound=1.0,
    )


def _processes_row(cfg: Config, path: str) -> Row:
    calls = cfg.pick(2000, 500)
    workers = [_Worker(path, calls) for _ in range(_PROCESSES)]
    try:
        for w in workers:
            w.wait_ready()

        def alone() -> float:
            workers[0].go()
            start, end = workers[0].span()
            return (end - start) / calls

        def together() -> float:
            for w in workers:
                w.go()
            spans = [w.span() for w in workers]
            first = min(s for s, _ in spans)
            last = max(e for _, e in spans)
            return (last - first) / (calls * len(workers))

        samples = interleave({"one": alone, "four": together}, reps=cfg.rounds(7, 2))
    finally:
        for w in workers:
            w.close()
    one, four = Stats.of(samples["one"]), Stats.of(samples["four"])
    return Row(
        id="P9b",
        what=f"{_PROCESSES} concurrent evaluations (own processes + actors) vs one",
        unit="us",
        ours=four,
        reference=one,
        reference_name="one evaluation alone (time per call)",
        ratio=one.median / four.median,
        ratio_means="aggregate throughput, 4 / 1",
        op=">=",
        bound=1.5,
    )


def _asyncio_row(cfg: Config) -> Row:
    """P9c: 64 tasks on one loop, each calling ``acomplete`` in turn, through the 1,000
    distinct realistic requests of P10 (task k takes requests k, k + 64, ...), against
    P10's in-process floor over the same requests."""
    path, requests = _batch_fixture()
    batch = requests[: cfg.pick(_BATCH, 256)]
    floor = _floor(batch)
    with acquire(path) as provider:

        async def gather() -> None:
            async def task(k: int) -> None:
                for request in batch[k::_TASKS]:
                    await provider.acomplete(request)

            await asyncio.gather(*(task(k) for k in range(_TASKS)))

        def tasks() -> float:
            start = time.perf_counter()
            asyncio.run(gather())
            return (time.perf_counter() - start) / len(batch)

        samples = interleave({"floor": floor, "tasks": tasks}, reps=cfg.rounds(9, 3))
    base, ours = Stats.of(samples["floor"]), Stats.of(samples["tasks"])
    return Row(
        id="P9c",
        what=f"{_TASKS} asyncio tasks on acomplete() (no worker thread), one handle",
        unit="us",
        ours=ours,
        reference=base,
        reference_name="in-process floor: request_hash + dict lookup + decode (as P10)",
        ratio=base.median / ours.median,
        ratio_means="throughput, tasks / floor",
        op=">=",
        bound=0.7,
        extra={"paired_median_ratio": paired_ratio(samples["floor"], samples["tasks"])},
    )


def _floor(batch: list[dict[str, object]]) -> Callable[[], float]:
    """The in-process floor of P9c and P10: ``request_hash``, a dict lookup of the stored
    response's bytes (what the actor holds) and a decode, per request; seconds each."""
    table = {request_hash(r): msgspec.json.encode(response_for(k)) for k, r in enumerate(batch)}
    decode = msgspec.json.decode

    def floor() -> float:
        start = time.perf_counter()
        for r in batch:
            decode(table[request_hash(r)])
        return (time.perf_counter() - start) / len(batch)

    return floor


def _batch_fixture() -> tuple[str, list[dict[str, object]]]:
    """A fixture holding 1,000 distinct realistic requests, each with its own response."""
    requests = [realistic_request(variant) for variant in range(1, _BATCH + 1)]
    path = cache_dir() / f"fixture-batch-{_BATCH}.jsonl"
    if not path.exists():
        lines = [
            entry_line(request_hash(r), response=response_for(k)) for k, r in enumerate(requests)
        ]
        _publish(path, b"\n".join(lines) + b"\n")
    return str(path), requests


def _pipeline_row(cfg: Config) -> Row:
    path, requests = _batch_fixture()
    batch = requests[: cfg.pick(_BATCH, 200)]
    floor = _floor(batch)
    with acquire(path) as provider:

        def many() -> float:
            start = time.perf_counter()
            got = provider.complete_many(batch)
            elapsed = time.perf_counter() - start
            if not all(isinstance(g, dict) for g in got):
                raise RuntimeError("P10: complete_many did not answer every request")
            return elapsed / len(batch)

        samples = interleave({"floor": floor, "many": many}, reps=cfg.rounds(9, 3))
    base, ours = Stats.of(samples["floor"]), Stats.of(samples["many"])
    return Row(
        id="P10",
        what=f"complete_many() of {len(batch):,} realistic requests, one thread",
        unit="us",
        ours=ours,
        reference=base,
        reference_name="in-process floor: request_hash + dict lookup + decode",
        ratio=base.median / ours.median,
        ratio_means="throughput, pipelined / floor",
        op=">=",
        bound=0.7,
    )


def run_concurrency(cfg: Config) -> list[Row]:
    path = str(fixture(1_000))
    return [_threads_row(cfg, path), _processes_row(cfg, path), _asyncio_row(cfg)]


def run_pipeline(cfg: Config) -> list[Row]:
    return [_pipeline_row(cfg)]


if __name__ == "__main__":
    _worker_main(sys.argv[1], int(sys.argv[2]))
