"""Interleaved repetitions, their statistics, and the result rows every module returns.

A benchmark hands ``interleave`` one callable per side (ours, the reference, ...); each
runs one batch and returns its per-operation time. After the warm-up, every repetition
runs each side once, in an order rotated per repetition, so drift and background load on
a shared machine fall on every side alike. Ratios are ratios of medians.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "Config",
    "Row",
    "Stats",
    "interleave",
    "over_runs",
    "paired_ratio",
    "per_call",
    "percentile",
]


@dataclass(frozen=True)
class Stats:
    """Median and spread of a sample, in the sample's unit (seconds for times)."""

    median: float
    q1: float
    q3: float
    min: float
    max: float
    n: int

    @classmethod
    def of(cls, samples: Sequence[float]) -> Stats:
        if not samples:
            raise ValueError("no samples")
        ordered = sorted(samples)
        if len(ordered) >= 2:
            q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
        else:
            q1 = q3 = ordered[0]
        return cls(
            median=statistics.median(ordered),
            q1=q1,
            q3=q3,
            min=ordered[0],
            max=ordered[-1],
            n=len(ordered),
        )


def percentile(samples: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile: the smallest sample with ``pct`` % of samples at or below."""
    ordered = sorted(samples)
    rank = max(1, min(len(ordered), math.ceil(pct / 100 * len(ordered))))
    return ordered[rank - 1]


@dataclass
class Row:
    """One line of the table: a target (docs/benchmarks.md) and what this run measured for it.

    ``ratio`` is defined per row (``ratio_means``) so that the target reads naturally:
    ``<=`` rows want it small (ours / floor), ``>=`` rows want it large (a speed-up or
    a throughput share). ``met`` is None for report-only rows.
    """

    id: str
    what: str
    unit: str  # "us", "ms", "s", "MB", "MB/s", "calls/s", "ms/10s"
    ours: Stats | None
    reference: Stats | None
    reference_name: str
    ratio: float | None
    ratio_means: str
    op: Literal["<=", ">=", ""]
    bound: float | None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    #: The ratio of each run, when the row is the median of several (``over_runs``).
    runs: list[float] = field(default_factory=list)
    #: The same target measured with ``--hog`` (a busy process on the last core).
    hog: Row | None = None

    @property
    def met(self) -> bool | None:
        return self.meets(self.ratio)

    def meets(self, ratio: float | None) -> bool | None:
        """Whether ``ratio`` meets this row's target (None: report only)."""
        if self.op == "" or self.bound is None or ratio is None:
            return None
        return ratio <= self.bound if self.op == "<=" else ratio >= self.bound

    @property
    def target(self) -> str:
        if self.op == "" or self.bound is None:
            return "report only"
        sign = "≤" if self.op == "<=" else "≥"
        return f"{sign} {self.bound:g}"


def per_call(fn: Callable[[], object], calls: int, *, no_gc: bool = False) -> Callable[[], float]:
    """A batch of ``calls`` calls of ``fn``, returning seconds per call. ``no_gc``: with
    the cyclic collector off during the batch, as ``timeit`` does, so that a collection
    of objects made elsewhere (its cost grows with the whole process's heap) does not
    land on whichever side happened to trigger it."""

    def batch() -> float:
        enabled = no_gc and gc.isenabled()
        if enabled:
            gc.disable()
        try:
            start = time.perf_counter_ns()
            for _ in range(calls):
                fn()
            return (time.perf_counter_ns() - start) / calls / 1e9
        finally:
            if enabled:
                gc.enable()

    return batch


def paired_ratio(top: Sequence[float], bottom: Sequence[float]) -> float:
    """The median of per-round ratios ``top[i] / bottom[i]`` of two sides of one
    ``interleave``: each round's two batches ran back to back, so a slow phase of a
    shared machine falls on both sides of the same ratio."""
    return statistics.median(a / b for a, b in zip(top, bottom, strict=True))


def over_runs(produce: Callable[[int], list[Row]], runs: int) -> list[Row]:
    """Call ``produce(run)`` for run 0 ... ``runs`` - 1 (each a whole measurement: its
    own warm-up and rounds) and keep, per row id, the run whose ratio is the median,
    with every run's ratio in ``Row.runs``: the spread of the runs shows how far one run
    can be trusted."""
    by_id: dict[str, list[Row]] = {}
    for run in range(runs):
        for row in produce(run):
            by_id.setdefault(row.id, []).append(row)
    merged = []
    for found in by_id.values():
        ratios = [row.ratio for row in found if row.ratio is not None]
        ranked = sorted(found, key=lambda row: -math.inf if row.ratio is None else row.ratio)
        middle = ranked[(len(ranked) - 1) // 2]
        if not middle.runs:  # (a row that measured its runs itself keeps them)
            middle.runs = ratios if len(ratios) > 1 else []
        merged.append(middle)
    return merged


def interleave(
    sides: Mapping[str, Callable[[], float]], *, reps: int, warmup: int = 1
) -> dict[str, list[float]]:
    """Run every side ``warmup`` times unrecorded, then ``reps`` rotated rounds."""
    names = list(sides)
    for _ in range(warmup):
        for name in names:
            sides[name]()
    samples: dict[str, list[float]] = {name: [] for name in names}
    for rep in range(reps):
        shift = rep % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(sides[name]())
    return samples


@dataclass(frozen=True)
class Config:
    """How hard to measure: the full run or ``--quick`` (a smoke run, not for quoting).

    A target is measured in several runs (``over_runs``); ``share`` is the part of a
    full run's repetitions each run makes (``rounds``, ``span``), so that five runs of a
    target cost about what one long run did, and ``run`` says which run this is (a
    sweep drawn once, for a plot, is made in run 0 only).
    """

    quick: bool = False
    share: float = 1.0
    run: int = 0

    def pick(self, full: int, quick: int) -> int:
        return quick if self.quick else full

    def pickf(self, full: float, quick: float) -> float:
        return quick if self.quick else full

    def rounds(self, full: int, quick: int) -> int:
        """A repetition count: ``full`` scaled by ``share`` (never below ``quick``)."""
        return quick if self.quick else max(quick, math.ceil(full * self.share))

    def span(self, full: float, quick: float) -> float:
        """A measuring window in seconds, scaled as ``rounds``."""
        return quick if self.quick else max(quick, full * self.share)
