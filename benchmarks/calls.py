"""Per-call cost: P1 and P1b (vs floors), P2 and the size series, P4 (hashing), P8 (memory).

P8 reads the 100k actor's RSS twice: in a fresh worker process that acquires only that
fixture (P8a: its zygote caches nothing else), and the P1 run's own 100k actor (P8b:
forked from a zygote that also caches the three smaller fixtures). RSS counts every page
the actor shares with its zygote (copy-on-write), so USS (pages only it maps) and PSS
are recorded beside it, with the zygote's RSS.

P1/P2/P8 share one set of acquisitions, one per fixture size, all held at once and
measured in the same interleaved rounds as the floors' parts (local ``request_hash``; a
bare ``multiprocessing.Pipe`` echo of 100 bytes to a spawned child; for P1b, a raw
AF_UNIX socketpair exchange with a child of the very request frame ``complete()`` sends
and the reply frame the actor sends back). The floor of a round is the sum of its parts
measured in that round.
"""

from __future__ import annotations

import hashlib
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
import psutil
import rfc8785

from replay_actor import acquire, request_hash
from replay_actor._request import canonical_request
from replay_actor.replay.core import protocol

from .procs import EchoPeer, RawEcho, baseline_rss, child_env, start_worker, stop
from .timing import Config, Row, Stats, interleave, paired_ratio, per_call
from .workload import fixture, realistic_request

__all__ = ["SIZES", "run_calls", "run_hashing"]

SIZES = (100, 1_000, 10_000, 100_000)


def run_calls(cfg: Config) -> tuple[list[Row], dict[str, Any]]:
    """P1, P2, P8 and the replay-actor side of the plot's series."""
    req = realistic_request()
    calls = cfg.pick(300, 100)
    reps = cfg.rounds(21, 5)
    paths = {n: fixture(n) for n in SIZES}
    providers = {}
    echo = EchoPeer()
    raw: RawEcho | None = None
    try:
        for n, path in paths.items():
            providers[n] = acquire(path, timeout=120.0)
        raw = _raw_echo(req, providers[SIZES[-1]].complete(req))
        sides = {
            f"ours@{n}": per_call(lambda p=p: p.complete(req), calls)  # type: ignore[misc]
            for n, p in providers.items()
        }
        sides["request_hash"] = per_call(lambda: request_hash(req), calls)
        sides["pipe_echo"] = per_call(echo.round_trip, calls)
        sides["raw_echo"] = per_call(raw.round_trip, calls)
        samples = interleave(sides, reps=reps, warmup=2)
        in_run = _memory(providers[SIZES[-1]].actor_pid)
    finally:
        for provider in providers.values():
            provider.release()
        echo.close()
        if raw is not None:
            raw.close()
    base_rss = baseline_rss(child_env())
    alone = _memory_alone(paths[SIZES[-1]], calls)
    file_bytes = paths[SIZES[-1]].stat().st_size

    floor = [h + e for h, e in zip(samples["request_hash"], samples["pipe_echo"], strict=True)]
    raw_floor = [h + e for h, e in zip(samples["request_hash"], samples["raw_echo"], strict=True)]
    big = Stats.of(samples[f"ours@{SIZES[-1]}"])
    small = Stats.of(samples[f"ours@{SIZES[0]}"])
    floor_stats = Stats.of(floor)
    hash_stats = Stats.of(samples["request_hash"])
    echo_stats = Stats.of(samples["pipe_echo"])
    ours_big = samples[f"ours@{SIZES[-1]}"]
    ours_small = samples[f"ours@{SIZES[0]}"]
    paired_p1 = paired_ratio(ours_big, floor)
    paired_p2 = statistics.median(b / m for b, m in zip(ours_big, ours_small, strict=True))
    raw_stats = Stats.of(samples["raw_echo"])
    raw_floor_stats = Stats.of(raw_floor)
    paired_p1b = paired_ratio(ours_big, raw_floor)
    rows = [
        Row(
            id="P1",
            what=(
                "complete(), realistic request, 100k-entry fixture"
                f" (median of per-round ratios: {paired_p1:.2f})"
            ),
            unit="us",
            ours=big,
            reference=floor_stats,
            reference_name=(
                f"floor: request_hash {hash_stats.median * 1e6:.1f} us"
                f" + Pipe echo {echo_stats.median * 1e6:.1f} us"
            ),
            ratio=big.median / floor_stats.median,
            ratio_means="ours / floor",
            op="<=",
            bound=1.25,
            extra={
                "request_hash": hash_stats,
                "pipe_echo": echo_stats,
                "paired_ratio_median": paired_p1,
                "samples_s": samples,
            },
        ),
        Row(
            id="P1b",
            what=(
                "complete(), realistic request, 100k-entry fixture, against a raw socketpair"
                f" exchange of the same frames (median of per-round ratios: {paired_p1b:.2f})"
            ),
            unit="us",
            ours=big,
            reference=raw_floor_stats,
            reference_name=(
                f"floor: request_hash {hash_stats.median * 1e6:.1f} us"
                f" + raw socketpair echo {raw_stats.median * 1e6:.1f} us"
            ),
            ratio=big.median / raw_floor_stats.median,
            ratio_means="ours / floor",
            op="<=",
            bound=2.0,
            extra={"raw_echo": raw_stats, "paired_ratio_median": paired_p1b},
        ),
        Row(
            id="P2",
            what=(
                "complete() at 100k entries vs at 100 entries"
                f" (median of per-round ratios: {paired_p2:.2f})"
            ),
            unit="us",
            ours=big,
            reference=small,
            reference_name="ours at 100 entries",
            ratio=big.median / small.median,
            ratio_means="100k / 100",
            op="<=",
            bound=1.2,
        ),
        _memory_row(
            "P8a",
            "actor RSS, 100k-entry fixture, its own acquisition in a fresh process",
            alone,
            base_rss=base_rss,
            file_bytes=file_bytes,
            setting="the process's zygote holds only this fixture",
        ),
        _memory_row(
            "P8b",
            "actor RSS, 100k-entry fixture, the P1 run's actor",
            in_run,
            base_rss=base_rss,
            file_bytes=file_bytes,
            setting="the zygote also holds the 100, 1k and 10k fixtures, shared into this actor",
        ),
    ]
    series = {
        "sizes": list(SIZES),
        "ours": {str(n): Stats.of(samples[f"ours@{n}"]) for n in SIZES},
        "floor": floor_stats,
        "calls_per_batch": calls,
        "reps": reps,
    }
    return rows, series


def _raw_echo(req: dict[str, Any], response: dict[str, Any]) -> RawEcho:
    """The P1b floor's peer: it receives the request frame ``complete(req)`` sends and
    answers the reply frame the actor sends for it (the response's stored bytes; its
    canonical form is what the fixture holds, so re-encoding it gives the same length)."""
    request = protocol.frame(protocol.complete_request(request_hash(req)))
    reply = protocol.frame(protocol.RESPONSE + msgspec.json.encode(response))
    return RawEcho(request, reply)


def _memory(actor_pid: int) -> dict[str, int]:
    """The actor's RSS, USS and PSS, and its parent's RSS and USS (bytes): the zygote's,
    or for a fixture over the zygote's cache bound the holder's that forked it
    (docs/architecture.md, "Large fixtures"). The keys keep their historical names."""
    actor = psutil.Process(actor_pid)
    if actor.name() != "replay-actor":
        raise RuntimeError(f"pid {actor_pid} is not a replay-actor")
    zygote = actor.parent()
    if zygote is None or zygote.name() not in ("replay-zygote", "replay-holder"):
        raise RuntimeError("the actor's parent is neither a replay-zygote nor a replay-holder")
    mine, theirs = actor.memory_full_info(), zygote.memory_full_info()
    return {
        "actor_rss": int(mine.rss),
        "actor_uss": int(mine.uss),
        "actor_pss": int(mine.pss),
        "zygote_rss": int(theirs.rss),
        "zygote_uss": int(theirs.uss),
    }


def _memory_alone(path: Path, calls: int) -> dict[str, int]:
    """``_memory`` of a 100k actor acquired alone, by a fresh worker process (so its
    zygote caches nothing else), after ``calls`` calls."""
    worker = start_worker("benchmarks.calls", str(path), str(calls))
    try:
        assert worker.stdout is not None
        line = worker.stdout.readline()
        if not line:
            raise RuntimeError("the P8 worker ended early")
        found: dict[str, int] = msgspec.json.decode(line, type=dict[str, int])
    finally:
        if worker.stdin is not None:
            worker.stdin.close()  # EOF: the worker releases and exits
        try:
            worker.wait(10.0)
        except subprocess.TimeoutExpired:
            pass
        if worker.stdout is not None:
            worker.stdout.close()
        stop(worker)
    return found


def _memory_worker(path: str, calls: int) -> None:
    """The P8 worker's body: acquire, call, print ``_memory`` as JSON, wait for EOF."""
    req = realistic_request()
    with acquire(path, timeout=120.0) as provider:
        for _ in range(calls):
            provider.complete(req)
        sys.stdout.write(msgspec.json.encode(_memory(provider.actor_pid)).decode() + "\n")
        sys.stdout.flush()
        sys.stdin.read()


def _memory_row(
    row_id: str, what: str, found: dict[str, int], *, base_rss: int, file_bytes: int, setting: str
) -> Row:
    rss = found["actor_rss"]
    return Row(
        id=row_id,
        what=(
            f"{what} (USS {found['actor_uss'] / 1e6:.1f} MB, PSS {found['actor_pss'] / 1e6:.1f}"
            f" MB; its parent's RSS {found['zygote_rss'] / 1e6:.1f} MB; {setting})"
        ),
        unit="MB",
        ours=Stats.of([rss / 1e6]),
        reference=Stats.of([base_rss / 1e6]),
        reference_name=(
            "interpreter started as the zygote is, replay_actor.replay.forked.zygote imported;"
            f" fixture {file_bytes / 1e6:.1f} MB"
        ),
        ratio=(rss - base_rss) / file_bytes,
        ratio_means="(actor RSS - baseline) / file size",
        op="<=",
        bound=1.5,
        extra={**found, "baseline_rss": base_rss, "file_bytes": file_bytes},
    )


def run_hashing(cfg: Config) -> list[Row]:
    """P4: request_hash vs msgspec sorted encode + sha256, and vs rfc8785 + sha256."""
    req = realistic_request()
    # The realistic request holds no field equal to its default, so normalising it is
    # the identity; checked here so the comparison below is of the same value.
    plain = msgspec.json.decode(canonical_request(req))
    if plain != req:
        raise AssertionError("the realistic request is not already normalised")
    ours_bytes = canonical_request(req)
    reference_bytes = rfc8785.dumps(req)
    identical = ours_bytes == reference_bytes
    if not identical:
        raise AssertionError("canonical bytes differ from rfc8785.dumps")

    def msgspec_hash() -> str:
        return "sha256:" + hashlib.sha256(msgspec.json.encode(req, order="sorted")).hexdigest()

    def rfc_hash() -> str:
        return "sha256:" + hashlib.sha256(rfc8785.dumps(req)).hexdigest()

    if rfc_hash() != request_hash(req):
        raise AssertionError("request_hash differs from the rfc8785 hash")
    # Short batches, many of them: a batch of ~1 ms is rarely cut by another process's
    # time slice on a shared machine, so the medians (and their ratios) hold still.
    calls = cfg.pick(30, 10)
    reps = cfg.rounds(150, 20)
    start = time.perf_counter()
    rfc_hash()
    rfc_calls = max(2, min(calls, int(0.002 / max(time.perf_counter() - start, 1e-6))))
    # The collector off in the batches (as timeit does): rfc8785 allocates much more
    # than the others, so a collection whose cost depends on the rest of this process's
    # heap would land on it, and the ratio swung with whatever ran before (12 to 19).
    samples = interleave(
        {
            "ours": per_call(lambda: request_hash(req), calls, no_gc=True),
            "msgspec": per_call(msgspec_hash, calls, no_gc=True),
            "rfc8785": per_call(rfc_hash, rfc_calls, no_gc=True),
        },
        reps=reps,
        warmup=1,
    )
    ours = Stats.of(samples["ours"])
    fast = Stats.of(samples["msgspec"])
    slow = Stats.of(samples["rfc8785"])
    size = len(ours_bytes)
    cold, cold_floor = _first_sight(req, calls, reps)
    return [
        Row(
            id="P4a",
            what=f"request_hash, realistic request ({size / 1000:.1f} KB canonical)",
            unit="us",
            ours=ours,
            reference=fast,
            reference_name="msgspec sorted encode + sha256",
            ratio=paired_ratio(samples["ours"], samples["msgspec"]),
            ratio_means="ours / msgspec, median of per-round ratios",
            op="<=",
            bound=1.5,
        ),
        Row(
            id="P4b",
            what="request_hash vs the rfc8785 package (byte-identical: "
            + ("yes" if identical else "NO")
            + ")",
            unit="us",
            ours=ours,
            reference=slow,
            reference_name="rfc8785.dumps + sha256",
            ratio=paired_ratio(samples["rfc8785"], samples["ours"]),
            ratio_means="speed-up (rfc8785 / ours), median of per-round ratios",
            op=">=",
            bound=15.0,
            extra={"byte_identical": identical},
        ),
        Row(
            id="P4c",
            what="request_hash when the configuration is new on every call (first sight:"
            " each call's tools differ, so nothing is remembered)",
            unit="us",
            ours=cold,
            reference=cold_floor,
            reference_name="msgspec sorted encode + sha256 of the same requests",
            ratio=cold.median / cold_floor.median,
            ratio_means="ours / msgspec",
            op="",
            bound=None,
            note="report only: the cost before request_hash remembers a configuration",
        ),
    ]


def _first_sight(req: dict[str, Any], calls: int, reps: int) -> tuple[Stats, Stats]:
    """P4c: the realistic request with a tool description that differs on every call, so
    request_hash checks and encodes the whole configuration each time (docs/request.md,
    "What hashing costs"); the floor hashes the very same requests."""
    total = calls * (reps + 1)
    variants = []
    for i in range(total):
        tools = [dict(tool) for tool in req["tools"]]
        tools[0]["description"] = f"{tools[0]['description']} (variant {i})"
        variants.append({**req, "tools": tools})
    ours_next = iter(variants).__next__
    floor_next = iter(list(variants)).__next__

    def ours() -> str:
        return request_hash(ours_next())

    def floor() -> str:
        encoded = msgspec.json.encode(floor_next(), order="sorted")
        return "sha256:" + hashlib.sha256(encoded).hexdigest()

    samples = interleave(
        {"ours": per_call(ours, calls), "msgspec": per_call(floor, calls)},
        reps=reps,
        warmup=1,
    )
    return Stats.of(samples["ours"]), Stats.of(samples["msgspec"])


if __name__ == "__main__":
    _memory_worker(sys.argv[1], int(sys.argv[2]))
