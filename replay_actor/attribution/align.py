"""Two run logs compared: their calls grouped into samples (``samples``), each baseline
sample paired with the candidate's same question (``pairing``), each pair walked call
by call to the first place they part.

Runs in: the ``replay-actor compare`` process.

Per pair, the first rule that holds (a call is a step: its retries are attempts of it;
two steps are the same call when their ``Step.key`` is, the request hash, or in a
private log the fixture line and element):

=============  =================================================================
status         meaning (``call``: the 1-based index where it shows)
=============  =================================================================
``diverged``   at ``call`` the candidate asked something else
``fewer``      the candidate stopped after ``call - 1`` of the baseline's calls
``extra``      the candidate made calls past the baseline's last
``missed``     the same calls, but the candidate's ``call`` failed closed (a miss…)
``identical``  the same calls, all served
=============  =================================================================

A bag (calls no conversation claims) is compared as a set: its calls in key order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from json.encoder import encode_basestring
from typing import Any, Final

import msgspec

from ..authoring.nearest import Difference, differences
from .evals import EvalRow, eval_samples_of
from .pairing import needs_splits, pair_by_calls, pair_by_difference
from .read import LogRead
from .requests import Requests, shorten
from .samples import Sample, Step, samples_of

__all__ = ["STATUSES", "UNSCOPED", "SampleResult", "align", "label_of", "sort_key"]

STATUSES: Final = ("identical", "diverged", "missed", "fewer", "extra")
UNSCOPED: Final = "(unscoped)"


class SampleResult(msgspec.Struct):
    """One pair of samples compared."""

    name: str
    status: str
    call: int | None
    baseline_calls: int
    candidate_calls: int
    baseline: Step | None = None  #: the baseline's call at ``call``
    candidate: Step | None = None  #: the candidate's call at ``call``
    differences: list[Difference] | None = None  #: None: no sidecar holds both requests
    base_sample: Sample | None = None
    cand_sample: Sample | None = None


def _row_label(row: str) -> str:
    try:
        value = json.loads(row)
    except ValueError:
        return row
    if isinstance(value, dict) and set(value) == {"sample", "epoch"}:
        return f"{value['sample']} (epoch {value['epoch']})"
    if isinstance(value, dict) and set(value) == {"test"}:
        return str(value["test"])
    return row


def label_of(sample: Sample) -> str:
    """How the report names a sample: an eval sample or row by its own id, a conversation
    by its question (and scope), a bag by its scope."""
    if sample.label is not None:
        return shorten(sample.label)
    if sample.row is not None:
        return shorten(_row_label(sample.row))
    group = None if sample.group is None else shorten(sample.group)
    if sample.kind == "bag":
        return group if group is not None else UNSCOPED
    asked = encode_basestring(sample.question) if sample.question else "(no text)"
    return asked if group is None else f"{group} {asked}"


def _natural(text: str) -> tuple[Any, ...]:
    """Numbers within a name compare as numbers (sample 2 before sample 10)."""
    parts = re.split(r"(\d+)", text)
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts))


def sort_key(result: SampleResult) -> tuple[Any, ...]:
    """The report's order: by name, then by what each side asked (never by log order)."""
    sides = (result.base_sample, result.cand_sample)
    return (_natural(result.name), *(s.order() if s else () for s in sides))


def _steps(sample: Sample | None) -> list[Step]:
    if sample is None:
        return []
    if sample.kind == "bag":
        return sorted(sample.steps, key=lambda step: step.key)
    return sample.steps


def _compare(base: Sample | None, cand: Sample | None) -> SampleResult:
    name = label_of(base) if base is not None else label_of(cand) if cand is not None else ""
    b, c = _steps(base), _steps(cand)
    status, at, x, y = _first_difference(b, c, base is not None, cand is not None)
    return SampleResult(name, status, at, len(b), len(c), x, y, None, base, cand)


def _first_difference(
    b: list[Step], c: list[Step], in_base: bool, in_cand: bool
) -> tuple[str, int | None, Step | None, Step | None]:
    """(status, call, baseline's step, candidate's step) of two samples' steps."""
    for index, (mine, theirs) in enumerate(zip(b, c, strict=False)):
        if mine.key != theirs.key:
            return "diverged", index + 1, mine, theirs
    if len(c) < len(b) or (in_base and not in_cand):
        return "fewer", len(c) + 1, b[len(c)] if len(c) < len(b) else None, None
    if len(c) > len(b) or (in_cand and not in_base):
        return "extra", len(b) + 1, None, c[len(b)] if len(b) < len(c) else None
    for index, theirs in enumerate(c):
        if theirs.outcome != "served":
            return "missed", index + 1, b[index], theirs
    return "identical", None, None, None


def _diverged_hashes(results: Iterable[SampleResult]) -> set[str]:
    return {
        digest
        for r in results
        if r.status == "diverged"
        for step in (r.baseline, r.candidate)
        if step is not None and (digest := step.call.request_hash) is not None
    }


def _explain(results: Iterable[SampleResult], splits: dict[str, Any]) -> None:
    """Fill in the differing paths of each diverged pair, from either sidecar."""
    for result in results:
        if result.status != "diverged":
            continue
        assert result.baseline is not None and result.candidate is not None
        a = splits.get(result.baseline.call.request_hash or "")
        b = splits.get(result.candidate.call.request_hash or "")
        if a is not None and b is not None:
            result.differences = differences(a, b)


def align(
    base: LogRead,
    cand: LogRead,
    *,
    evals: tuple[list[EvalRow], list[EvalRow]] | None = None,
) -> list[SampleResult]:
    """Every sample of either log, compared, in the report's order. ``evals``: the eval
    framework's own samples of each run (``--eval``), which then are the samples."""
    # Two passes over the sidecars: every hash's shape and question; then the requests
    # of the first calls left to pair by difference and of the calls where pairs part.
    # (A pair made by difference has different first requests: it parts at its first.)
    requests = Requests([base.source, cand.source])
    wanted = {c.request_hash for log in (base, cand) for c in log.calls if c.request_hash}
    shapes, questions = requests.shapes(wanted)
    if evals is None:
        samples = samples_of(base, shapes), samples_of(cand, shapes)
    else:
        samples = eval_samples_of(base, evals[0], shapes), eval_samples_of(cand, evals[1], shapes)
    for sample in (*samples[0], *samples[1]):
        if sample.question is None and sample.first is not None:  # an eval's brings its own
            sample.question = questions.get(sample.first)
    pairs, waiting = pair_by_calls(*samples)
    results = [_compare(b, c) for b, c in pairs]
    splits = requests.fetch(needs_splits(waiting) | _diverged_hashes(results))
    later = [_compare(b, c) for b, c in pair_by_difference(waiting, splits, shapes)]
    missing = _diverged_hashes(later) - splits.keys()
    if missing:  # not first requests after all: read them too
        splits.update(requests.fetch(missing))
    results.extend(later)
    _explain(results, splits)
    results.sort(key=sort_key)
    return results
