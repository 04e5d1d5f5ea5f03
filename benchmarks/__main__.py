"""``python -m benchmarks [--quick] [--only P1,P3,...] [--passes both|idle|hog]``: run the
benchmarks (docs/benchmarks.md).

Every target is measured in ``--runs`` runs (5), in two passes: idle (the machine as it
is), then with ``--hog`` (``procs.Hogs``: one busy process pinned to the last core); each
row shows the median run and the lowest and highest ratio of the runs, for both passes.
A full run prints the table, writes ``benchmarks/results/latest.json`` and rewrites
``docs/benchmarks.md`` and its plots. ``--quick`` (a smoke run), ``--only`` (a subset)
and a single pass print the table and write their raw results to the cache directory
instead, so that the published numbers always come from one full run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import psutil

from . import (
    attribution,
    calls,
    concurrency,
    embeddings,
    explaining,
    frontdoor,
    hotpath,
    large,
    lifecycle,
    litellm_peer,
    load,
    loading,
    raybackend,
    recording,
    report,
    sdk,
    slowpeer,
    tools,
    vcr_peer,
)
from .procs import Hogs, actors_alive, stop_resource_tracker, stop_zygote
from .timing import Config, Row, over_runs
from .workload import cache_dir

#: What one run of a section does of a full run's repetitions, for a section measured
#: once before the runs were five: five runs then cost about twice its one run.
_SHARE = 0.4

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "latest.json"
DOCS = ROOT / "docs" / "benchmarks.md"
PLOT = ROOT / "docs" / "benchmarks.png"


def _leftover_children() -> list[psutil.Process]:
    me = psutil.Process()
    alive = []
    for child in me.children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                alive.append(child)
        except psutil.NoSuchProcess:
            pass
    return alive


def _order(row: Row) -> tuple[bool, int, str]:
    """The product targets (P1, P9a, ...) in number order, then the others (E1, ...)."""
    number = re.match(r"\D*(\d+)", row.id)
    return (row.id[0] != "P", int(number.group(1)) if number else 0, row.id)


def _clean_up() -> list[str]:
    """End what the run left behind; an error line for each process left running."""
    errors = []
    # Every provider was released, so every actor has exited (release waits for it);
    # give a late one a moment, then end the run's zygote, which the library keeps
    # for the life of this process.
    deadline = time.monotonic() + 2.0
    while actors_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    for actor in actors_alive():
        errors.append(f"an actor was left running: pid {actor.pid}")
        actor.kill()  # our descendant (the zygote's child), stopped by its PID
    stop_zygote()
    for child in _leftover_children():
        errors.append(f"a child process was left running: pid {child.pid}")
        child.kill()  # ours (a child of this process), stopped by its PID
        child.wait(5)
    return errors


#: The profiles before the physical-floor work and after it, measured side by side
#: (``python -m benchmarks.before``), drawn above this run's.
PROFILE_BEFORE = ROOT / "benchmarks" / "results" / "profile-before.json"


def _profile_bars(profile: dict[str, Any] | None) -> dict[str, Any] | None:
    """This run's profile with the bars to draw: the recorded before/after pair, then
    this run."""
    if profile is None:
        return None
    recorded: dict[str, dict[str, float]] = {}
    if PROFILE_BEFORE.exists():
        recorded = json.loads(PROFILE_BEFORE.read_text())["profiles"]
    bars = {label: hotpath.grouped(steps) for label, steps in recorded.items()}
    bars["this run"] = hotpath.grouped(profile["steps"])
    return {**profile, "bars": bars, "recorded": recorded}


def _publish(
    full: bool,
    *,
    rows: list[Row],
    extra: dict[str, Any],
    load_start: tuple[float, float, float],
    duration: float,
    errors: list[str],
    cfg: Config,
    only: set[str],
) -> None:
    """Write the raw results; a full run also rewrites the docs and their plots."""
    info = report.machine()
    info["load_average"] = {"start": load_start, "end": os.getloadavg()}
    payload = {
        "machine": info,
        "quick": cfg.quick,
        "only": sorted(only),
        "duration_s": duration,
        "errors": errors,
        **extra,
    }
    target = RESULTS if full else cache_dir() / "partial.json"
    report.write_json(target, payload, rows)
    print(f"raw results: {target}")
    if full:
        report.write_docs(
            DOCS,
            PLOT,
            rows=rows,
            calls=extra.get("calls"),
            vcr_points=extra.get("vcr"),
            info=info,
            duration=duration,
            profile=_profile_bars(extra.get("profile")),
            runs=extra["runs"],
            extra=extra,
        )
        print(f"rewrote {DOCS.relative_to(ROOT)} and {PLOT.relative_to(ROOT)}")


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a fast smoke run")
    parser.add_argument(
        "--only",
        default="",
        help=(
            "comma-separated sections: P1 ... P19, P21, P12r, P12g, E1 (or EXPLAIN), "
            "P6b/P6c, P5d/P8c (or LARGE), P1L/P12L/P14L (or LOGGING), P19 (or RECORDING)"
        ),
    )
    parser.add_argument(
        "--passes",
        choices=("both", "idle", "hog"),
        default="both",
        help=(
            "idle: the machine as it is; hog: with one busy process pinned to the last"
            " core for the whole pass (another job on the other core); both (the"
            " default, what the docs publish): idle, then hog"
        ),
    )
    parser.add_argument(
        "--hog",
        dest="passes",
        action="store_const",
        const="hog",
        help="the hog pass only (--passes hog)",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=5,
        help=(
            "how many runs of each target (each with its own warm-up and rounds); a row"
            " shows the median run's numbers, with the lowest and highest ratio (default 5)"
        ),
    )
    return parser.parse_args(argv)


@dataclass(frozen=True)
class Section:
    """A part of the run: the targets it measures (for ``--only``), and how: ``share``
    is what each of the ``--runs`` runs does of a full run's repetitions
    (``Config.share``); ``runs_itself`` for a section that measures its runs itself
    (the LiteLLM proxy starts once)."""

    ids: frozenset[str]
    title: str
    produce: Callable[[Config], list[Row]]
    share: float = _SHARE
    runs_itself: bool = False


def _sections(extra: dict[str, Any], only: set[str], runs: int) -> list[Section]:
    """Every section, in the order they run; ``extra`` gathers what run 0 of the idle
    pass draws (the plots' points, the profile)."""

    def keep(key: str, cfg: Config, value: Any) -> None:
        if cfg.run == 0 and key not in extra:
            extra[key] = value

    def calls_section(cfg: Config) -> list[Row]:
        found, points = calls.run_calls(cfg)
        keep("calls", cfg, points)
        return found

    def profile_section(cfg: Config) -> list[Row]:
        if "profile" not in extra:
            steps = hotpath.profile()
            extra["profile"] = {"steps": steps, "groups": hotpath.GROUPS}
        return []

    def vcr_section(cfg: Config) -> list[Row]:
        found, points = vcr_peer.run_vcr(cfg)
        keep("vcr", cfg, points)
        return found

    def large_section(cfg: Config) -> list[Row]:
        # The plot is published by a full run only, like docs/benchmarks.png.
        plot = large.PLOT if not cfg.quick and not only else cache_dir() / "large.png"
        found, points = large.run_large(
            cfg, plot if cfg.run == 0 and "large" not in extra else None
        )
        keep("large", cfg, points)
        return found

    def frontdoor_load(cfg: Config) -> list[Row]:
        found, points = load.run_load(cfg)
        keep("load", cfg, points)
        return found

    S = Section
    return [
        S(
            frozenset({"P1", "P1B", "P2", "P8"}),
            "per-call cost and memory (P1, P1b, P2, P8)",
            calls_section,
            1.0,
        ),
        S(frozenset({"PROFILE"}), "where a call's time goes (profile)", profile_section),
        S(frozenset({"P4"}), "request hashing (P4)", calls.run_hashing, 1.0),
        S(
            frozenset({"P6B", "P6C"}),
            "fixture load of every layout, and its first acquisition (P6b, P6c)",
            lambda cfg: [large.run_p6b(cfg), large.run_first_acquisition(cfg)],
            1.0,
        ),
        S(frozenset({"P3"}), "VCR.py playback (P3)", vcr_section),
        S(frozenset({"P5"}), "acquire -> ready (P5)", lifecycle.run_acquire),
        S(frozenset({"P7"}), "owner death and idle CPU (P7)", lifecycle.run_owner_death),
        S(frozenset({"P6"}), "fixture load (P6)", loading.run_loading),
        S(frozenset({"P9"}), "concurrency (P9)", concurrency.run_concurrency, 1.0),
        S(frozenset({"P10"}), "pipelined batch (P10)", concurrency.run_pipeline),
        S(frozenset({"P11"}), "a slow peer (P11)", slowpeer.run_slow_peer),
        S(frozenset({"P12"}), "the SDK path (P12)", sdk.run_sdk),
        S(frozenset({"P12", "P12R"}), "the SDK path, Responses API (P12r)", sdk.run_sdk_responses),
        S(frozenset({"P12", "P12G"}), "the Gemini SDK path (P12g)", sdk.run_sdk_gemini),
        S(frozenset({"P13"}), "Ray backend (P13)", raybackend.run_ray),
        S(frozenset({"P14"}), "the front door (P14)", frontdoor.run_frontdoor),
        S(frozenset({"P20"}), "the front door under load (P20)", frontdoor_load, 1.0),
        S(frozenset({"P15"}), "embeddings through the front door (P15)", embeddings.run_embeddings),
        S(frozenset({"P17"}), "a sealed run's start-up (P17)", frontdoor.run_sealed_startup),
        S(frozenset({"P16", "P16M"}), "compare two run logs (P16)", attribution.run_compare),
        S(
            frozenset({"P1L", "P12L", "P14L", "LOGGING"}),
            "the run log's overhead (P1L, P12L, P14L)",
            attribution.run_logging,
        ),
        S(
            frozenset({"P18"}),
            "the front door vs the LiteLLM proxy's cache (P18)",
            lambda cfg: litellm_peer.run_litellm(cfg, runs),
            runs_itself=True,
        ),
        S(frozenset({"P21"}), "a frozen tool call (P21)", tools.run_tools),
        S(frozenset({"E1", "EXPLAIN"}), "explain a miss (E1)", explaining.run_explain),
        S(frozenset({"P5D", "P8C", "LARGE"}), "large fixtures (P5d, P8c)", large_section),
        S(
            frozenset({"P19", "P19M", "P19H", "RECORDING"}),
            "recording at scale (P19)",
            recording.run_recording,
        ),
    ]


def _run_pass(
    name: str, sections: list[Section], cfg: Config, runs: int, errors: list[str]
) -> tuple[list[Row], dict[str, float]]:
    """Every selected section, each over ``runs`` runs; the rows and each section's
    seconds."""
    rows: list[Row] = []
    seconds: dict[str, float] = {}
    for section in sections:
        t0 = time.perf_counter()
        print(f"-- [{name}] {section.title} ...", flush=True)
        each = replace(cfg, share=1.0 if cfg.quick else section.share)
        try:
            if section.runs_itself:
                rows.extend(section.produce(each))
            else:
                rows.extend(over_runs(_runner(section.produce, each), runs))
        except Exception:
            errors.append(f"[{name}] {section.title}: {traceback.format_exc()}")
            print(errors[-1], file=sys.stderr, flush=True)
        seconds[section.title] = time.perf_counter() - t0
        print(f"   done in {seconds[section.title]:.1f} s", flush=True)
    return rows, seconds


def _runner(produce: Callable[[Config], list[Row]], cfg: Config) -> Callable[[int], list[Row]]:
    """``produce`` for run ``run`` of ``over_runs``."""
    return lambda run: produce(replace(cfg, run=run))


def _with_hog(idle: list[Row], hog: list[Row]) -> list[Row]:
    """The idle pass's rows, each with its ``--hog`` twin (``Row.hog``); a target only
    the hog pass measured stands on its own."""
    twins = {row.id: row for row in hog}
    for row in idle:
        row.hog = twins.pop(row.id, None)
    return [*idle, *twins.values()]


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    cfg = Config(quick=args.quick)
    runs = max(1, args.runs)
    only = {s.strip().upper() for s in args.only.split(",") if s.strip()}
    started = time.perf_counter()
    load_start = os.getloadavg()
    extra: dict[str, Any] = {"runs": runs}
    errors: list[str] = []
    sections = [s for s in _sections(extra, only, runs) if not only or s.ids & only]
    passes = ["idle", "hog"] if args.passes == "both" else [args.passes]
    found: dict[str, list[Row]] = {}
    timings: dict[str, dict[str, float]] = {}
    loads: dict[str, tuple[float, ...]] = {}
    try:
        for name in passes:
            hogs = Hogs() if name == "hog" else None
            loads[name] = os.getloadavg()
            try:
                found[name], timings[name] = _run_pass(name, sections, cfg, runs, errors)
            finally:
                if hogs is not None:
                    hogs.stop()
    finally:
        stop_resource_tracker()
    rows = _with_hog(found.get("idle", []), found.get("hog", []))
    # By number (P12 after P9), then by suffix (P4a before P4b); E rows after P rows.
    rows.sort(key=_order)
    duration = time.perf_counter() - started
    errors.extend(_clean_up())
    extra["seconds"] = timings
    extra["load_average_at_pass_start"] = loads

    print()
    print(report.console_table(rows))
    print(f"\n{'quick ' if cfg.quick else ''}run took {duration:.0f} s")
    full = not cfg.quick and not only and not errors and passes == ["idle", "hog"]
    _publish(
        full,
        rows=rows,
        extra=extra,
        load_start=load_start,
        duration=duration,
        errors=errors,
        cfg=cfg,
        only=only,
    )
    for error in errors:
        print(f"error: {error.splitlines()[0]}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
