"""``python -m benchmarks [--quick] [--only P1,P3,...]``: run the benchmarks (docs/benchmarks.md).

A full run prints the table, writes ``benchmarks/results/latest.json`` and rewrites
``docs/benchmarks.md`` and ``docs/benchmarks.png``. ``--quick`` (a smoke run) and
``--only`` (a subset) print the table and write their raw results to the cache
directory instead, so that the published numbers always come from one full run.
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
    loading,
    raybackend,
    recording,
    report,
    sdk,
    slowpeer,
    vcr_peer,
)
from .procs import Hogs, actors_alive, stop_resource_tracker, stop_zygote
from .timing import Config, Row, over_runs
from .workload import cache_dir

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
        )
        print(f"rewrote {DOCS.relative_to(ROOT)} and {PLOT.relative_to(ROOT)}")


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a fast smoke run")
    parser.add_argument(
        "--only",
        default="",
        help=(
            "comma-separated sections: P1 ... P19, P12r, P12g, E1 (or EXPLAIN), "
            "P6b/P6c, P5d/P8c (or LARGE), P1L/P12L/P14L (or LOGGING), P19 (or RECORDING)"
        ),
    )
    parser.add_argument(
        "--hog",
        action="store_true",
        help=(
            "run with one busy-looping process per core for the whole run (no idle core;"
            " the published numbers come from a run without)"
        ),
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=5,
        help=(
            "how many times to run the sections of the targets whose ratio a single run"
            " cannot be trusted for (P1, P1b, P4, P6b, P6c, P9, P18); each row shows the"
            " median run, with the lowest and highest ratio (default 5)"
        ),
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    hogs = Hogs(os.cpu_count() or 1) if args.hog else None
    cfg = Config(quick=args.quick)
    only = {s.strip().upper() for s in args.only.split(",") if s.strip()}
    started = time.perf_counter()
    load_start = os.getloadavg()
    rows: list[Row] = []
    extra: dict[str, Any] = {"hog": len(hogs.procs) if hogs is not None else 0}
    errors: list[str] = []

    def calls_section() -> list[Row]:
        found, extra["calls"] = calls.run_calls(cfg)
        return found

    def profile_section() -> list[Row]:
        steps = hotpath.profile()
        extra["profile"] = {"steps": steps, "groups": hotpath.GROUPS}
        return []

    def vcr_section() -> list[Row]:
        found, extra["vcr"] = vcr_peer.run_vcr(cfg)
        return found

    def large_section() -> list[Row]:
        # The plot is published by a full run only, like docs/benchmarks.png.
        plot = large.PLOT if not cfg.quick and not only else cache_dir() / "large.png"
        found, extra["large"] = large.run_large(cfg, plot)
        return found

    def repeated(produce: Callable[[], list[Row]]) -> Callable[[], list[Row]]:
        return lambda: over_runs(produce, max(1, args.runs))

    sections: list[tuple[set[str], str, Callable[[], list[Row]]]] = [
        (
            {"P1", "P1B", "P2", "P8"},
            "per-call cost and memory (P1, P1b, P2, P8)",
            repeated(calls_section),
        ),
        ({"PROFILE"}, "where a call's time goes (profile)", profile_section),
        ({"P4"}, "request hashing (P4)", repeated(lambda: calls.run_hashing(cfg))),
        (
            {"P6B", "P6C"},
            "fixture load of another layout, and its first acquisition (P6b, P6c)",
            repeated(lambda: [large.run_p6b(cfg), large.run_first_acquisition(cfg)]),
        ),
        ({"P3"}, "VCR.py playback (P3)", vcr_section),
        ({"P5"}, "acquire -> ready (P5)", lambda: lifecycle.run_acquire(cfg)),
        ({"P7"}, "owner death and idle CPU (P7)", lambda: lifecycle.run_owner_death(cfg)),
        ({"P6"}, "fixture load (P6)", lambda: loading.run_loading(cfg)),
        ({"P9"}, "concurrency (P9)", repeated(lambda: concurrency.run_concurrency(cfg))),
        ({"P10"}, "pipelined batch (P10)", lambda: concurrency.run_pipeline(cfg)),
        ({"P11"}, "a slow peer (P11)", lambda: slowpeer.run_slow_peer(cfg)),
        ({"P12"}, "the SDK path (P12)", lambda: sdk.run_sdk(cfg)),
        ({"P12", "P12R"}, "the SDK path, Responses API (P12r)", lambda: sdk.run_sdk_responses(cfg)),
        ({"P12", "P12G"}, "the Gemini SDK path (P12g)", lambda: sdk.run_sdk_gemini(cfg)),
        ({"P13"}, "Ray backend (P13)", lambda: raybackend.run_ray(cfg)),
        ({"P14"}, "the front door (P14)", lambda: frontdoor.run_frontdoor(cfg)),
        (
            {"P15"},
            "embeddings through the front door (P15)",
            lambda: embeddings.run_embeddings(cfg),
        ),
        ({"P17"}, "a sealed run's start-up (P17)", lambda: frontdoor.run_sealed_startup(cfg)),
        ({"P16", "P16M"}, "compare two run logs (P16)", lambda: attribution.run_compare(cfg)),
        (
            {"P1L", "P12L", "P14L", "LOGGING"},
            "the run log's overhead (P1L, P12L, P14L)",
            lambda: attribution.run_logging(cfg),
        ),
        (
            {"P18"},
            "the front door vs the LiteLLM proxy's cache (P18)",
            lambda: litellm_peer.run_litellm(cfg, max(1, args.runs)),
        ),
        ({"E1", "EXPLAIN"}, "explain a miss (E1)", lambda: explaining.run_explain(cfg)),
        ({"P5D", "P8C", "LARGE"}, "large fixtures (P5d, P8c)", large_section),
        (
            {"P19", "P19M", "P19H", "RECORDING"},
            "recording at scale (P19)",
            lambda: recording.run_recording(cfg),
        ),
    ]
    try:
        for ids, title, run in sections:
            if only and not ids & only:
                continue
            t0 = time.perf_counter()
            print(f"-- {title} ...", flush=True)
            try:
                rows.extend(run())
            except Exception:
                errors.append(f"{title}: {traceback.format_exc()}")
                print(errors[-1], file=sys.stderr, flush=True)
            print(f"   done in {time.perf_counter() - t0:.1f} s", flush=True)
    finally:
        stop_resource_tracker()
        if hogs is not None:
            hogs.stop()
    # By number (P12 after P9), then by suffix (P4a before P4b); E rows after P rows.
    rows.sort(key=_order)
    duration = time.perf_counter() - started
    errors.extend(_clean_up())

    print()
    print(report.console_table(rows))
    print(f"\n{'quick ' if cfg.quick else ''}run took {duration:.0f} s")
    full = not cfg.quick and not only and not errors and not args.hog
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
