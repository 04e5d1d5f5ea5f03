"""Presenting a run: the console table, ``results/latest.json``, ``docs/benchmarks.md``
and ``docs/benchmarks.png`` (per-call latency against fixture size, log-log)."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import subprocess
import sys
from dataclasses import asdict, is_dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from .analysis import ANALYSIS, METHOD, PROFILE
from .timing import Row, Stats

__all__ = ["console_table", "machine", "write_docs", "write_json"]

_SCALE = {"us": 1e6, "ms": 1e3, "s": 1.0, "MB": 1.0}


def _fmt(value: float, unit: str) -> str:
    scaled = value * _SCALE.get(unit, 1.0)
    if scaled >= 100:
        return f"{scaled:.0f}"
    if scaled >= 10:
        return f"{scaled:.1f}"
    return f"{scaled:.2f}"


def _time_unit(seconds: float) -> str:
    if seconds < 1e-3:
        return "us"
    return "ms" if seconds < 1.0 else "s"


def _cell(stats: Stats | None, unit: str, *, spread: bool) -> str:
    """Median [q1, q3]; times (seconds) are shown in the unit that suits the median."""
    if stats is None:
        return "—"
    if unit in ("us", "ms", "s"):
        unit = _time_unit(stats.median)
    text = f"{_fmt(stats.median, unit)} {unit}"
    if spread and stats.n > 1:
        text += f" [{_fmt(stats.q1, unit)}, {_fmt(stats.q3, unit)}]"
    return text


def _number(value: float) -> str:
    return f"{value:.3g}" if value < 1000 else f"{value:,.0f}"


def _ratio(row: Row | None) -> str:
    """The ratio; for a row measured over several runs, the median run's, with the
    lowest and highest of the runs."""
    if row is None or row.ratio is None:
        return "—"
    text = _number(row.ratio)
    if row.runs:
        text += f" [{_number(min(row.runs))} to {_number(max(row.runs))}, {len(row.runs)} runs]"
    return text


def _status(row: Row) -> str:
    met = row.met
    if met is None:
        return "report" if row.op == "" else "n/a"
    return "met" if met else "MISSED"


def _hog_status(row: Row) -> str:
    met = row.meets(row.hog.ratio) if row.hog is not None else None
    if row.hog is None:
        return "—"
    if met is None:
        return "report" if row.op == "" else "n/a"
    return "met" if met else "missed"


def console_table(rows: list[Row]) -> str:
    head = (
        "id",
        "ours (median [IQR])",
        "reference",
        "ratio, idle",
        "ratio, --hog",
        "ratio is",
        "target",
        "idle",
        "hog",
    )
    body = [
        (
            r.id,
            _cell(r.ours, r.unit, spread=True),
            _cell(r.reference, r.unit, spread=False),
            _ratio(r),
            _ratio(r.hog),
            r.ratio_means,
            r.target,
            _status(r),
            _hog_status(r),
        )
        for r in rows
    ]
    widths = [max(len(line[i]) for line in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) for line in [head]]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) for line in body]
    return "\n".join(lines)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _git(*args: str) -> str:
    root = Path(__file__).resolve().parent.parent
    try:
        done = subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.rstrip()


def machine() -> dict[str, Any]:
    dirty = [line[3:] for line in _git("status", "--porcelain", "replay_actor").splitlines()]
    return {
        "commit": _git("rev-parse", "--short", "HEAD"),
        "library_changes_not_committed": dirty,
        "platform": platform.platform(),
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "msgspec": _version("msgspec"),
        "psutil": _version("psutil"),
        "vcrpy": _version("vcrpy"),
        "rfc8785": _version("rfc8785"),
        "replay_actor": _version("replay-actor"),
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def _plain(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return {k: _plain(v) for k, v in asdict(value).items()}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, float) and value != value:
        return None
    return value


def _row_json(row: Row) -> dict[str, Any]:
    data: dict[str, Any] = _plain(row)
    data["target"] = row.target
    data["met"] = row.met
    return data


def write_json(path: Path, payload: dict[str, Any], rows: list[Row]) -> None:
    data = dict(payload)
    data["rows"] = [_row_json(r) for r in rows]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(_plain(data), indent=2, allow_nan=False) + "\n")
    os.replace(tmp, path)


def _plot(path: Path, calls: dict[str, Any], vcr_points: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.8), dpi=110)
    sizes = calls["sizes"]
    ours = [calls["ours"][str(n)] for n in sizes]
    ax.errorbar(
        sizes,
        [s.median for s in ours],
        yerr=[[s.median - s.q1 for s in ours], [s.q3 - s.median for s in ours]],
        marker="o",
        capsize=3,
        label="replay-actor complete()",
    )
    reached = [p for p in vcr_points.values() if p["reached"]]
    if reached:
        ax.errorbar(
            [p["interactions"] for p in reached],
            [p["vcr"].median for p in reached],
            yerr=[
                [p["vcr"].median - p["vcr"].min for p in reached],
                [p["vcr"].max - p["vcr"].median for p in reached],
            ],
            marker="s",
            capsize=3,
            color="tab:red",
            label="VCR.py playback (last interaction)",
        )
    missing = [p["interactions"] for p in vcr_points.values() if not p["reached"]]
    for size in missing:
        ax.axvline(size, color="tab:red", linestyle=":", alpha=0.5)
    ax.axhline(
        calls["floor"].median,
        color="gray",
        linestyle="--",
        label="floor: request_hash + Pipe echo",
    )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("fixture entries / cassette interactions")
    ax.set_ylabel("seconds per call (median)")
    ax.set_title("Per-call latency vs fixture size (realistic ~17 KB request)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


#: The colours of the profile's shares, in ``hotpath.GROUPS`` order.
_SHARE_COLOURS = {
    "hash": "tab:blue",
    "framing": "tab:orange",
    "kernel": "tab:gray",
    "actor": "tab:green",
    "wake-ups": "tab:red",
}


def _plot_profile(path: Path, profiles: dict[str, dict[str, float]]) -> None:
    """One stacked bar per profile (label -> ``hotpath.grouped`` shares, in us)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(profiles)
    fig, ax = plt.subplots(figsize=(8.5, 1.2 + 0.9 * len(labels)), dpi=110)
    for y, label in enumerate(labels):
        left = 0.0
        for share, colour in _SHARE_COLOURS.items():
            width = max(0.0, profiles[label].get(share, 0.0))
            ax.barh(y, width, left=left, color=colour, label=share if y == 0 else None)
            if width >= 4:
                ax.text(left + width / 2, y, f"{width:.0f}", ha="center", va="center", fontsize=8)
            left += width
        ax.text(left + 1, y, f"complete() {profiles[label]['complete()']:.0f} us", va="center")
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.set_xlabel("microseconds of one complete() (realistic request, 100k-entry fixture)")
    ax.set_title("Where a call's time goes")
    ax.legend(ncols=5, fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.12))
    ax.set_xlim(0, max(p["complete()"] for p in profiles.values()) * 1.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _profile_section(profile: dict[str, Any] | None) -> list[str]:
    """The measured steps of this run's profile, as a table, after the plot."""
    if not profile:
        return []
    recorded: dict[str, dict[str, float]] = profile.get("recorded", {})
    columns = [*recorded, "this run"]
    out = [
        "![where a call's time goes, by share](benchmarks-profile.png)",
        "",
        "| step (us, best of 15 rounds of 1,000 calls) | " + " | ".join(columns) + " | share |",
        "| --- | " + "--- | " * len(columns) + "--- |",
    ]
    steps: dict[str, float] = profile["steps"]
    group_of = {step: name for name, members in profile["groups"].items() for step in members}
    for step, value in steps.items():
        earlier = [f"{recorded[label].get(step, float('nan')):.1f}" for label in recorded]
        cells = " | ".join([*earlier, f"{value:.1f}"])
        out.append(f"| {step} | {cells} | {group_of.get(step, '')} |")
    out.append("")
    return out


def _passes(extra: dict[str, Any]) -> list[str]:
    """Each pass's length and the load average when it began."""
    out = []
    for name, seconds in extra.get("seconds", {}).items():
        load = extra.get("load_average_at_pass_start", {}).get(name)
        at = f"; load average at its start {', '.join(f'{x:.2f}' for x in load)}" if load else ""
        out.append(f"- the {name} pass took {sum(seconds.values()):.0f} s{at}")
    return out


def _md_row(row: Row) -> str:
    cells = [
        row.id,
        row.what,
        _cell(row.ours, row.unit, spread=True),
        (
            f"{_cell(row.reference, row.unit, spread=True)} — {row.reference_name}"
            if row.reference is not None
            else row.reference_name
        ),
        f"{_ratio(row)} ({row.ratio_means})",
        _ratio(row.hog) + ("" if row.hog is None else f" ({_hog_status(row)})"),
        row.target,
        "**MISSED**" if row.met is False else _status(row),
    ]
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def write_docs(
    md_path: Path,
    png_path: Path,
    *,
    rows: list[Row],
    calls: dict[str, Any] | None,
    vcr_points: dict[str, Any] | None,
    info: dict[str, Any],
    duration: float,
    profile: dict[str, Any] | None = None,
    runs: int = 5,
    extra: dict[str, Any] | None = None,
) -> None:
    """``profile``: this run's ``hotpath`` steps and groups, and the shares of earlier
    profiles to draw beside it (``{"steps", "groups", "bars": {label: shares}}``)."""
    if calls is not None and vcr_points is not None:
        _plot(png_path, calls, vcr_points)
    extra = extra or {}
    if extra.get("load"):
        from .load import plot_load

        plot_load(png_path.with_name("benchmarks-load.png"), extra["load"])
    if profile:
        _plot_profile(png_path.with_name("benchmarks-profile.png"), profile["bars"])
    out = [
        "# Benchmarks",
        "",
        "<!-- Generated by `python -m benchmarks` (benchmarks/report.py): do not edit. -->",
        "",
        "The performance targets (ids P1…), measured on one machine: each target is a ratio",
        "of ours to its reference, both measured in the same run, interleaved (rotating",
        "order, after a warm-up), so that the noise of a shared machine falls on both sides.",
        f"Every target is measured in {runs} runs, each with its own warm-up and rounds, in",
        "two passes: idle (the machine as it is) and with `--hog` (one busy process pinned",
        "to the last core, another job on the other core). The row is the idle pass's",
        "median run: cells are that run's medians with the interquartile range in brackets",
        "(times per call unless stated), and each ratio's brackets give the lowest and the",
        "highest of the runs. The status is the idle median's; the `--hog` column says",
        "whether its median meets the target too. Raw numbers:",
        "`benchmarks/results/latest.json`.",
        "",
        "| id | what | ours | reference | ratio, idle | ratio, --hog | target | status |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        *[_md_row(r) for r in rows],
        "",
        "## Machine",
        "",
        f"- platform: {info['platform']} ({info['implementation']} {info['python']})",
        f"- CPU: {info['cpu_model']}, {info['cores']} cores (shared with other work)",
        f"- msgspec {info['msgspec']}, psutil {info['psutil']}, vcrpy {info['vcrpy']},"
        f" rfc8785 {info['rfc8785']}, replay-actor {info['replay_actor']}",
        f"- date: {info['date']}; the whole run took {duration:.0f} s",
        f"- tree: commit {info['commit']}"
        + (
            "; library files with uncommitted changes (work in progress by others): "
            + ", ".join(f"`{f}`" for f in info["library_changes_not_committed"])
            if info["library_changes_not_committed"]
            else "; no uncommitted library changes"
        ),
        "- load average (1, 5, 15 min) at the start: "
        + ", ".join(f"{x:.2f}" for x in info["load_average"]["start"])
        + "; at the end: "
        + ", ".join(f"{x:.2f}" for x in info["load_average"]["end"]),
        *_passes(extra),
        "",
        "## Rerun",
        "",
        "    make bench                      # installs .[dev,bench] into .venv, then runs:",
        "    .venv/bin/python -m benchmarks  # idle, then --hog, 5 runs each (~35 min, 2 cores)",
        "    .venv/bin/python -m benchmarks --quick  # smoke run; leaves these docs alone",
        "    .venv/bin/python -m benchmarks --only P1,P4 --passes idle  # some targets only",
        "    .venv/bin/python -m benchmarks --hog    # the --hog pass only",
        "",
        "Either run needs the `bench` extra (matplotlib draws the plots; vcrpy, requests and",
        "rfc8785 are the references measured against): `make bench` installs it, or",
        "`.venv/bin/pip install -e '.[bench]'` before a `--quick` run by hand.",
        "",
        "Generated fixtures and cassettes are cached under the system temporary directory",
        "(`replay-actor-bench-v*`); delete it to regenerate them.",
        "",
        "## Per-call latency against fixture size",
        "",
        "![per-call latency vs fixture size, log-log](benchmarks.png)",
        "",
    ]
    if vcr_points:
        out += [
            "| interactions | VCR.py per call | replay-actor per call | cassette | reached |",
            "| --- | --- | --- | --- | --- |",
        ]
        for p in vcr_points.values():
            out.append(
                f"| {p['interactions']:,} | {_cell(p['vcr'], 'ms', spread=True)}"
                f" | {_cell(p['ours'], 'us', spread=True)}"
                f" | {p['cassette_bytes'] / 1e6:.0f} MB"
                f" | {'yes' if p['reached'] else 'no, budget ' + str(p['budget_s']) + ' s'} |"
            )
        out.append("")
    if extra.get("load"):
        out += [
            "## The front door under load",
            "",
            "![requests a second against wrk connections](benchmarks-load.png)",
            "",
            "| connections | " + " | ".join(str(c) for c in extra["load"]["connections"]) + " |",
            "| --- | " + "--- | " * len(extra["load"]["connections"]),
            "| replay-actor serve | "
            + " | ".join(f"{r:,.0f}" for r in extra["load"]["ours"])
            + " |",
            "| bare uvicorn app | " + " | ".join(f"{r:,.0f}" for r in extra["load"]["bare"]) + " |",
            "",
        ]
    noted = [r for r in rows if r.note]
    if noted:
        out += ["## Measured steps", ""]
        out += [f"- **{r.id}**: {r.note}" for r in noted]
        out.append("")
    missed = [r for r in rows if r.met is False]
    out += ["## Missed targets: what limits them", ""]
    if not missed:
        out += ["Every target was met in this run.", ""]
    for row in missed:
        # P5c reads P5's text, P14 its own: the prefix is the number, not two characters.
        family = row.id.rstrip("abcdefghijklmnopqrstuvwxyz")
        text = ANALYSIS.get(row.id) or ANALYSIS.get(family) or "Not analysed yet."
        out += [f"### {row.id}", "", text, ""]
    out += ["## Where a call's time goes", "", *_profile_section(profile), PROFILE, ""]
    out += ["## How each number is taken", "", METHOD, ""]
    md_path.parent.mkdir(parents=True, exist_ok=True)
    md_path.write_text("\n".join(out))
