"""The comparison of two run logs as text, JSON and one self-contained HTML page.

Runs in: the ``replay-actor compare`` process.

The text leads with the counts (identical, diverged with a histogram by call index,
missed, fewer and extra calls) and then each sample that is not identical (or whose
score changed), named by its eval row or its question, with its score change, the call
where it parted and the paths that differ (baseline → candidate, as ``explain`` shows
them). The JSON holds the same, every sample included. The HTML page carries its own
style and an inline SVG plot of the histogram; it loads nothing (no script at all, and a
Content-Security-Policy that forbids fetching anything), every value from a log or a
request is escaped, and values are shortened as in the text (a megabyte prompt is a line
around where it differs, not a megabyte of page).
"""

from __future__ import annotations

import html
import json
from collections import Counter
from typing import Any, Final

from ..authoring.nearest import ABSENT, Difference
from ..authoring.present import show_value
from .align import STATUSES, SampleResult
from .read import LogRead
from .samples import Sample, Step

__all__ = [
    "Comparison",
    "headline",
    "html_page",
    "json_document",
    "score_change",
    "text_report",
]

_WORDS: Final = {
    "identical": "identical",
    "diverged": "diverged",
    "missed": "missed",
    "fewer": "fewer calls",
    "extra": "extra calls",
}


class Comparison:
    """The results of ``align`` with the two logs they came from; ``sidecars``: whether
    each log had its request sidecar; ``evals``: whether samples are an eval's own."""

    def __init__(
        self,
        base: LogRead,
        cand: LogRead,
        results: list[SampleResult],
        *,
        sidecars: tuple[bool, bool] = (True, True),
        evals: bool = False,
    ) -> None:
        self.base = base
        self.cand = cand
        self.results = results
        self.sidecars = sidecars
        self.evals = evals
        self.counts = Counter(r.status for r in results)
        self.histogram: Counter[int] = Counter(
            r.call for r in results if r.status == "diverged" and r.call is not None
        )
        self.rescored = sum(1 for r in results if score_change(r) is not None)

    @property
    def identical(self) -> bool:
        return all(r.status == "identical" for r in self.results)

    def shown(self) -> list[SampleResult]:
        """The samples the text and the page detail: not identical, or rescored."""
        return [r for r in self.results if r.status != "identical" or score_change(r)]


# -- scores ------------------------------------------------------------------------------------


def _score_text(sample: Sample | None) -> str:
    if sample is None:
        return "absent"
    if sample.scores is None or not sample.scores:
        return "error" if sample.error is not None else "none"
    values = [show_value(value, None) for value in sample.scores.values()]
    if len(values) == 1:
        return values[0].strip('"')
    return ", ".join(f"{name} {v}" for name, v in zip(sample.scores, values, strict=True))


def score_change(r: SampleResult) -> str | None:
    """``C → I`` when an eval sample's score changed, else None."""
    sides = (r.base_sample, r.cand_sample)
    if not any(s is not None and s.kind == "eval" for s in sides):
        return None
    before, after = (_score_text(s) for s in sides)
    return None if before == after else f"{before} → {after}"


def _scores_json(sample: Sample | None) -> dict[str, Any] | None:
    if sample is None or sample.kind != "eval":
        return None
    return {"scores": sample.scores, "error": sample.error}


# -- JSON ---------------------------------------------------------------------------------------


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


def _call_json(step: Step | None) -> dict[str, Any] | None:
    if step is None:
        return None
    call = step.call
    return {
        "seq": call.seq,
        "outcome": step.outcome,
        "attempts": step.attempts,
        "request_hash": call.request_hash,
        "line": step.last.line,
        "element": step.last.element,
        "path": call.path,
    }


def _log_json(log: LogRead, sidecar: bool) -> dict[str, Any]:
    return {
        "path": log.path,
        "calls": len(log.calls),
        "skipped": dict(sorted(log.skipped.items())),
        "sidecar": sidecar,
    }


def _sample_json(r: SampleResult) -> dict[str, Any]:
    b, c = r.base_sample, r.cand_sample
    row = (b or c).row if (b or c) is not None else None  # type: ignore[union-attr]
    return {
        "sample": r.name,
        "status": r.status,
        "call": r.call,
        "baseline_calls": r.baseline_calls,
        "candidate_calls": r.candidate_calls,
        "question": {
            "baseline": b.question if b else None,
            "candidate": c.question if c else None,
        },
        "row": None if row is None else json.loads(row),
        "score": None
        if not any(s is not None and s.kind == "eval" for s in (b, c))
        else {"baseline": _scores_json(b), "candidate": _scores_json(c), "change": score_change(r)},
        "baseline": _call_json(r.baseline),
        "candidate": _call_json(r.candidate),
        "differences": None
        if r.differences is None
        else [_difference_json(d) for d in r.differences],
    }


def json_document(c: Comparison) -> dict[str, Any]:
    """``compare --json``'s document."""
    summary: dict[str, Any] = {"samples": len(c.results)}
    summary.update({s: c.counts.get(s, 0) for s in STATUSES})
    if c.evals:
        summary["score_changed"] = c.rescored
    return {
        "identical": c.identical,
        "baseline": _log_json(c.base, c.sidecars[0]),
        "candidate": _log_json(c.cand, c.sidecars[1]),
        "summary": summary,
        "histogram": {str(k): n for k, n in sorted(c.histogram.items())},
        "samples": [_sample_json(r) for r in c.results],
    }


# -- text ------------------------------------------------------------------------------------


def _value_pair(d: Difference) -> str:
    if d.recorded is ABSENT:
        return f"only in the candidate: {show_value(d.requested, None)}"
    if d.requested is ABSENT:
        return f"only in the baseline: {show_value(d.recorded, None)}"
    return f"{show_value(d.recorded, d.requested)} → {show_value(d.requested, d.recorded)}"


def _who(step: Step | None) -> str:
    if step is None:
        return "(no call)"
    call = step.call
    line = step.last.line
    what = call.request_hash or (f"fixture line {line}" if line else "(no hash)")
    attempts = f", {step.attempts} attempts" if step.attempts > 1 else ""
    return f"{what} ({step.outcome}{attempts})"


def _calls(n: int) -> str:
    return f"{n} call" if n == 1 else f"{n} calls"


def _skipped(log: LogRead) -> str:
    total = sum(log.skipped.values())
    if not total:
        return "0"
    parts = ", ".join(f"{reason} {n}" for reason, n in sorted(log.skipped.items()))
    return f"{total} ({parts})"


def headline(r: SampleResult) -> str:
    """``sample q17 (epoch 1): score C → I; diverged at call 3: messages[5].content``."""
    parts = []
    change = score_change(r)
    if change is not None:
        parts.append(f"score {change}")
    where = _WORDS[r.status] + (f" at call {r.call}" if r.call is not None else "")
    if r.differences:
        paths = ", ".join(d.path for d in r.differences[:3])
        more = len(r.differences) - 3
        where += f": {paths}" + (f" and {more} more" if more > 0 else "")
    parts.append(where)
    return f"sample {r.name}: " + "; ".join(parts)


def _asks(r: SampleResult) -> list[str]:
    b, c = r.base_sample, r.cand_sample
    mine = b.question if b is not None else None
    theirs = c.question if c is not None else None
    if mine is None and theirs is None:
        return []
    if mine == theirs or b is None or c is None:
        named = (b or c).kind == "conversation"  # type: ignore[union-attr]
        text = mine if mine is not None else theirs
        return [] if named else [f"  asks: {json.dumps(text, ensure_ascii=False)}"]
    return [
        f"  baseline asks:  {json.dumps(mine, ensure_ascii=False)}",
        f"  candidate asks: {json.dumps(theirs, ensure_ascii=False)}",
    ]


def _sample_text(r: SampleResult) -> list[str]:
    lines = [
        headline(r),
        f"  (baseline {_calls(r.baseline_calls)}, candidate {r.candidate_calls})",
        *_asks(r),
        f"  baseline:  {_who(r.baseline)}",
        f"  candidate: {_who(r.candidate)}",
    ]
    if r.status == "diverged":
        if r.differences is None:
            lines.append("  (no request sidecar holds both requests: paths unavailable)")
        else:
            lines.append("  differing paths (baseline → candidate):")
            lines.extend(f"    {d.path}: {_value_pair(d)}" for d in r.differences)
    return lines


def _log_line(who: str, log: LogRead, sidecar: bool) -> str:
    note = "" if sidecar else "; no request sidecar"
    return f"{who} {log.path} ({len(log.calls)} calls, skipped lines {_skipped(log)}{note})"


def text_report(c: Comparison) -> str:
    """``compare``'s human-readable report."""
    counts = ", ".join(f"{c.counts.get(s, 0)} {_WORDS[s]}" for s in STATUSES)
    lines = [
        _log_line("baseline: ", c.base, c.sidecars[0]),
        _log_line("candidate:", c.cand, c.sidecars[1]),
        f"samples: {len(c.results)}: {counts}",
    ]
    if c.evals:
        lines.append(f"scores: {c.rescored} changed")
    if not all(c.sidecars):
        lines.append(
            "(a log without its request sidecar: its calls are read from the other's where "
            "both asked the same; elsewhere paths are unavailable)"
        )
    if c.histogram:
        lines.append("diverged at call (histogram):")
        widest = max(c.histogram.values())
        for call, n in sorted(c.histogram.items()):
            bar = "#" * max(1, round(40 * n / widest))
            lines.append(f"  {call:>5} {bar} {n}")
    for r in c.shown():
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
.diverged,.missed,.fewer,.extra{color:#b00020}.identical{color:#1b5e20}
.score{font-weight:bold}
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


def _html_value(value: Any, other: Any) -> str:
    if value is ABSENT:
        return "<i>absent</i>"
    return _e(show_value(value, None if other is ABSENT else other))


def _html_sample(r: SampleResult) -> str:
    change = score_change(r)
    score = f'<span class="score">score {_e(change)}</span>; ' if change else ""
    where = f" at call {r.call}" if r.call is not None else ""
    asks = "".join(f"{_e(line.strip())}<br>" for line in _asks(r))
    parts = [
        f'<h3>sample <code>{_e(r.name)}</code>: {score}<span class="{_e(r.status)}">'
        f"{_e(_WORDS[r.status])}{_e(where)}</span></h3>",
        f"<p>{asks}baseline: {_calls(r.baseline_calls)}, <code>{_e(_who(r.baseline))}</code><br>"
        f"candidate: {_calls(r.candidate_calls)}, <code>{_e(_who(r.candidate))}</code></p>",
    ]
    if r.differences:
        rows = "".join(
            f"<tr><td><code>{_e(d.path)}</code></td>"
            f'<td class="v">{_html_value(d.recorded, d.requested)}</td>'
            f'<td class="v">{_html_value(d.requested, d.recorded)}</td></tr>'
            for d in r.differences
        )
        parts.append(
            "<table><tr><th>path</th><th>baseline</th><th>candidate</th></tr>" + rows + "</table>"
        )
    elif r.status == "diverged":
        parts.append("<p>No request sidecar holds both requests: the paths are unavailable.</p>")
    return "\n".join(parts)


def html_page(c: Comparison) -> str:
    """``compare --html``'s page: summary, plot, each sample that differs."""
    rows = "".join(
        f'<tr><td class="{s}">{_e(_WORDS[s])}</td><td>{c.counts.get(s, 0)}</td></tr>'
        for s in STATUSES
    )
    if c.evals:
        rows += f"<tr><td>score changed</td><td>{c.rescored}</td></tr>"
    logs = "".join(
        f"<tr><td>{who}</td><td><code>{_e(log.path)}</code></td><td>{len(log.calls)}</td>"
        f"<td>{_e(_skipped(log))}</td><td>{'yes' if sidecar else 'no'}</td></tr>"
        for who, log, sidecar in (
            ("baseline", c.base, c.sidecars[0]),
            ("candidate", c.cand, c.sidecars[1]),
        )
    )
    samples = "\n".join(_html_sample(r) for r in c.shown())
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{_CSP}">
<title>replay-actor compare</title><style>{_STYLE}</style></head>
<body>
<h1>replay-actor compare</h1>
<table><tr><th>log</th><th>path</th><th>calls</th><th>skipped lines</th>
<th>request sidecar</th></tr>{logs}</table>
<h2>Summary: {len(c.results)} samples</h2>
<table><tr><th>status</th><th>samples</th></tr>{rows}</table>
<h2>Diverged samples by call index</h2>
{_plot(c.histogram)}
<h2>Samples that differ</h2>
{samples or "<p>Every sample is identical.</p>"}
</body></html>
"""
