"""The comparison of two run logs as text, JSON and one self-contained HTML page.

Runs in: the ``replay-actor compare`` process.

The text leads with the counts (identical, diverged with a histogram by call index,
missed, fewer and extra calls) and then each sample that is not identical, with the
paths that differ (baseline → candidate, as ``explain`` shows them). The JSON holds the
same, every sample included. The HTML page carries its own style and an inline SVG plot
of the histogram; it loads nothing (no script at all, and a Content-Security-Policy that
forbids fetching anything), and every value from a log or a request is escaped.
"""

from __future__ import annotations

import html
import json
from collections import Counter
from typing import Any, Final

from ..authoring.nearest import ABSENT, TOO_DEEP, Difference
from ..authoring.present import show_value
from .align import STATUSES, SampleResult
from .read import Call, LogRead

__all__ = ["Comparison", "html_page", "json_document", "text_report"]

_WORDS: Final = {
    "identical": "identical",
    "diverged": "diverged",
    "missed": "missed",
    "fewer": "fewer calls",
    "extra": "extra calls",
}


class Comparison:
    """The results of ``align`` with the two logs they came from."""

    def __init__(self, base: LogRead, cand: LogRead, results: list[SampleResult]) -> None:
        self.base = base
        self.cand = cand
        self.results = results
        self.counts = Counter(r.status for r in results)
        self.histogram: Counter[int] = Counter(
            r.call for r in results if r.status == "diverged" and r.call is not None
        )

    @property
    def identical(self) -> bool:
        return all(r.status == "identical" for r in self.results)


def _difference_json(d: Difference) -> dict[str, Any]:
    out = d.as_json()
    shown: dict[str, Any] = {
        "path": out["path"],
        "baseline": out["recorded"],
        "candidate": out["requested"],
    }
    if out.get("truncated"):
        shown["truncated"] = True
    return shown


def _call_json(call: Call | None) -> dict[str, Any] | None:
    if call is None:
        return None
    return {
        "seq": call.seq,
        "outcome": call.outcome,
        "request_hash": call.request_hash,
        "line": call.line,
        "element": call.element,
        "path": call.path,
    }


def _log_json(log: LogRead) -> dict[str, Any]:
    return {"path": log.path, "calls": len(log.calls), "skipped": dict(sorted(log.skipped.items()))}


def json_document(c: Comparison) -> dict[str, Any]:
    """``compare --json``'s document."""
    return {
        "identical": c.identical,
        "baseline": _log_json(c.base),
        "candidate": _log_json(c.cand),
        "summary": {"samples": len(c.results), **{s: c.counts.get(s, 0) for s in STATUSES}},
        "histogram": {str(k): n for k, n in sorted(c.histogram.items())},
        "samples": [
            {
                "sample": r.name,
                "status": r.status,
                "call": r.call,
                "baseline_calls": r.baseline_calls,
                "candidate_calls": r.candidate_calls,
                "baseline": _call_json(r.baseline),
                "candidate": _call_json(r.candidate),
                "differences": None
                if r.differences is None
                else [_difference_json(d) for d in r.differences],
            }
            for r in c.results
        ],
    }


# -- text ------------------------------------------------------------------------------------


def _value_pair(d: Difference) -> str:
    if d.recorded is ABSENT:
        return f"only in the candidate: {show_value(d.requested, None)}"
    if d.requested is ABSENT:
        return f"only in the baseline: {show_value(d.recorded, None)}"
    return f"{show_value(d.recorded, d.requested)} → {show_value(d.requested, d.recorded)}"


def _who(call: Call | None) -> str:
    if call is None:
        return "(no call)"
    what = call.request_hash or (f"fixture line {call.line}" if call.line else "(no hash)")
    return f"{what} ({call.outcome})"


def _skipped(log: LogRead) -> str:
    total = sum(log.skipped.values())
    if not total:
        return "0"
    parts = ", ".join(f"{reason} {n}" for reason, n in sorted(log.skipped.items()))
    return f"{total} ({parts})"


def _sample_text(r: SampleResult) -> list[str]:
    head = f"sample {r.name}: {_WORDS[r.status]}"
    if r.call is not None:
        head += f" at call {r.call}"
    head += f" (baseline {r.baseline_calls} calls, candidate {r.candidate_calls})"
    lines = [head, f"  baseline:  {_who(r.baseline)}", f"  candidate: {_who(r.candidate)}"]
    if r.status == "diverged":
        if r.differences is None:
            lines.append("  (no request sidecar holds both requests: paths unknown)")
        else:
            lines.append("  differing paths (baseline → candidate):")
            lines.extend(f"    {d.path}: {_value_pair(d)}" for d in r.differences)
    return lines


def text_report(c: Comparison) -> str:
    """``compare``'s human-readable report."""
    counts = ", ".join(f"{c.counts.get(s, 0)} {_WORDS[s]}" for s in STATUSES)
    lines = [
        f"baseline:  {c.base.path} ({len(c.base.calls)} calls, skipped lines {_skipped(c.base)})",
        f"candidate: {c.cand.path} ({len(c.cand.calls)} calls, skipped lines {_skipped(c.cand)})",
        f"samples: {len(c.results)}: {counts}",
    ]
    if c.histogram:
        lines.append("diverged at call (histogram):")
        widest = max(c.histogram.values())
        for call, n in sorted(c.histogram.items()):
            bar = "#" * max(1, round(40 * n / widest))
            lines.append(f"  {call:>5} {bar} {n}")
    for r in c.results:
        if r.status != "identical":
            lines.append("")
            lines.extend(_sample_text(r))
    return "\n".join(lines) + "\n"


# -- HTML -------------------------------------------------------------------------------------

_STYLE: Final = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:72em}
table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f3f3f3} code,.v{font-family:ui-monospace,monospace;font-size:.9em}
.v{white-space:pre-wrap;word-break:break-all;max-width:34em}
.diverged{color:#b00020}.identical{color:#1b5e20}
h2{margin-top:1.5em;border-bottom:1px solid #ddd}
"""
_CSP: Final = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _plot(histogram: Counter[int]) -> str:
    """The histogram of divergence call indexes as an inline SVG bar chart."""
    if not histogram:
        return "<p>No sample diverged.</p>"
    items = sorted(histogram.items())
    width, height, pad = 40 * len(items) + 60, 200, 30
    top = max(n for _, n in items)
    bars = []
    for index, (call, n) in enumerate(items):
        h = round((height - 2 * pad) * n / top)
        x = pad + 40 * index + 10
        y = height - pad - h
        bars.append(
            f'<rect x="{x}" y="{y}" width="28" height="{h}" fill="#b00020"/>'
            f'<text x="{x + 14}" y="{y - 4}" text-anchor="middle" font-size="12">{n}</text>'
            f'<text x="{x + 14}" y="{height - pad + 14}" text-anchor="middle" '
            f'font-size="12">{call}</text>'
        )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'role="img" aria-label="samples diverged, by call index">'
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - 10}" y2="{height - pad}" '
        'stroke="#444"/>' + "".join(bars) + f'<text x="{width // 2}" y="{height - 2}" '
        'text-anchor="middle" font-size="12">call index</text></svg>'
    )


def _html_value(value: Any) -> str:
    if value is ABSENT:
        return "<i>absent</i>"
    if value is TOO_DEEP:
        return "<i>nested too deeply to show</i>"
    return _e(json.dumps(value, ensure_ascii=False, indent=1))


def _html_sample(r: SampleResult) -> str:
    where = f" at call {r.call}" if r.call is not None else ""
    parts = [
        f'<h3 class="{_e(r.status)}">sample <code>{_e(r.name)}</code>: '
        f"{_e(_WORDS[r.status])}{_e(where)}</h3>",
        f"<p>baseline: {r.baseline_calls} calls, <code>{_e(_who(r.baseline))}</code><br>"
        f"candidate: {r.candidate_calls} calls, <code>{_e(_who(r.candidate))}</code></p>",
    ]
    if r.differences:
        rows = "".join(
            f'<tr><td><code>{_e(d.path)}</code></td><td class="v">{_html_value(d.recorded)}</td>'
            f'<td class="v">{_html_value(d.requested)}</td></tr>'
            for d in r.differences
        )
        parts.append(
            "<table><tr><th>path</th><th>baseline</th><th>candidate</th></tr>" + rows + "</table>"
        )
    elif r.status == "diverged":
        parts.append("<p>No request sidecar holds both requests: the paths are unknown.</p>")
    return "\n".join(parts)


def html_page(c: Comparison) -> str:
    """``compare --html``'s page: summary, plot, each sample that is not identical."""
    rows = "".join(
        f'<tr><td class="{s}">{_e(_WORDS[s])}</td><td>{c.counts.get(s, 0)}</td></tr>'
        for s in STATUSES
    )
    logs = "".join(
        f"<tr><td>{who}</td><td><code>{_e(log.path)}</code></td><td>{len(log.calls)}</td>"
        f"<td>{_e(_skipped(log))}</td></tr>"
        for who, log in (("baseline", c.base), ("candidate", c.cand))
    )
    samples = "\n".join(_html_sample(r) for r in c.results if r.status != "identical")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{_CSP}">
<title>replay-actor compare</title><style>{_STYLE}</style></head>
<body>
<h1>replay-actor compare</h1>
<table><tr><th>log</th><th>path</th><th>calls</th><th>skipped lines</th></tr>{logs}</table>
<h2>Summary: {len(c.results)} samples</h2>
<table><tr><th>status</th><th>samples</th></tr>{rows}</table>
<h2>Diverged samples by call index</h2>
{_plot(c.histogram)}
<h2>Samples that differ</h2>
{samples or "<p>Every sample is identical.</p>"}
</body></html>
"""
