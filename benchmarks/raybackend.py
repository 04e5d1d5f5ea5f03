"""P13: ``complete()`` through the Ray backend, from a Ray task on a local cluster.

The section starts its own single-node cluster (``ray.init(address="local")`` in a fresh
temporary directory) and stops it at the end, waiting until every process it started is
gone. One Ray task does all the timing, so both sides run in the same worker process:

- ours: ``complete(realistic request)`` on a ``replay_actor.ray`` handle passed to the
  task (validate + hash the ~17 KB request here, one actor round trip, decode);
- floor: a bare Ray actor method round trip (``num_cpus=0``, like the cursor actor) that
  takes the same hash string and returns the same response bytes, not decoded.

Interleaved rounds (``timing.interleave``); the ratio is ours / floor. A report-only row
shows ``complete_many`` per request: one round trip for a batch, the answer to the extra
network round trip per call that a multi-node cluster adds (docs/ray.md).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from typing import Any

import psutil

from replay_actor import load_fixture, request_hash

from .timing import Config, Row, Stats, interleave, per_call
from .workload import fixture, realistic_request

__all__ = ["run_ray"]

_ENTRIES = 1_000
_BATCH = 100


class _Bare:
    """The floor's actor: one method, returning fixed bytes for any hash."""

    def __init__(self, reply: bytes) -> None:
        self.reply = reply

    def echo(self, digest: str) -> bytes:
        return self.reply


def _measure(llm: Any, bare: Any, calls: int, reps: int) -> dict[str, list[float]]:
    """Runs inside the Ray task: both sides, interleaved, in this worker."""
    import ray

    req = realistic_request()
    digest = request_hash(req)
    batch = [req] * _BATCH
    if llm.complete(req) is None:
        raise AssertionError("no answer")

    def many() -> float:
        start = time.perf_counter_ns()
        llm.complete_many(batch)
        return (time.perf_counter_ns() - start) / _BATCH / 1e9

    return interleave(
        {
            "ours": per_call(lambda: llm.complete(req), calls),
            "floor": per_call(lambda: ray.get(bare.echo.remote(digest)), calls),
            "many": many,
        },
        reps=reps,
        warmup=2,
    )


def _wait_children_gone(before: set[int], within: float) -> list[int]:
    deadline = time.monotonic() + within
    left: list[int] = []
    while time.monotonic() < deadline:
        left = []
        for child in psutil.Process().children(recursive=True):
            try:
                if child.pid not in before and child.status() != psutil.STATUS_ZOMBIE:
                    left.append(child.pid)
            except psutil.NoSuchProcess:
                pass
        if not left:
            return []
        time.sleep(0.1)
    return left


def run_ray(cfg: Config) -> list[Row]:
    import ray

    from replay_actor.ray import acquire

    path = fixture(_ENTRIES)
    req = realistic_request()
    stored = load_fixture(path).stored(request_hash(req))
    if not isinstance(stored, bytes):
        raise AssertionError("the realistic request's entry is not a single response")
    before = {c.pid for c in psutil.Process().children(recursive=True)}
    temp_dir = tempfile.mkdtemp(prefix="ra-bench-", dir="/tmp")
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.ERROR,
        _temp_dir=temp_dir,
    )
    try:
        bare: Any = ray.remote(num_cpus=0)(_Bare).remote(b"R" + stored)
        measure = ray.remote(num_cpus=1)(_measure)
        with acquire(path) as llm:
            samples = ray.get(
                measure.remote(llm, bare, cfg.pick(300, 60), cfg.rounds(15, 4)), timeout=600
            )
        ray.kill(bare)
    finally:
        ray.shutdown()
        left = _wait_children_gone(before, 20.0)
        shutil.rmtree(temp_dir, ignore_errors=True)
    if left:
        raise RuntimeError(f"Ray processes outlived the P13 cluster: {left}")
    ours = Stats.of(samples["ours"])
    floor = Stats.of(samples["floor"])
    many = Stats.of(samples["many"])
    return [
        Row(
            id="P13",
            what="complete() from a Ray task, local cluster, realistic request",
            unit="us",
            ours=ours,
            reference=floor,
            reference_name="bare Ray actor method round trip, same response bytes",
            ratio=ours.median / floor.median,
            ratio_means="ours / floor",
            op="<=",
            bound=1.5,
        ),
        Row(
            id="P13b",
            what=f"complete_many() of {_BATCH} from a Ray task, per request",
            unit="us",
            ours=many,
            reference=floor,
            reference_name="one bare Ray actor round trip",
            ratio=many.median / floor.median,
            ratio_means="per request / one round trip",
            op="",
            bound=None,
            note="report only: batching amortises the round trip (docs/ray.md)",
        ),
    ]
