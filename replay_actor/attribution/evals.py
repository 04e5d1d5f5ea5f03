"""An eval framework's own samples (``compare --eval``), matched to a run log's calls.

Runs in: the ``replay-actor compare`` process. The framework's log is read by its
integration (Inspect's: ``integrations/inspect_eval.py``, with Inspect's own log API)
into :class:`EvalRow` values; this module knows no framework.

A call belongs to the eval sample whose row it carries (the Inspect provider writes the
sample id and epoch into the run log), else to the eval sample that asked its request:
each model call of a sample gives the hashes its request can have (through the Inspect
provider, with and without the epoch's scope; through an SDK client), and a call takes
the first eval sample, in (epoch, id) order, that asked its hash and has not been given
as many calls of it as it asked. A retry of a call goes where the call went. Calls no
eval sample asked stay the log's own samples (``samples``).
"""

from __future__ import annotations

from typing import Any

import msgspec

from .._canonical import canonical_json
from .read import Call, LogRead
from .requests import Shape
from .samples import Sample, retries, samples_of

__all__ = ["EvalRow", "eval_samples_of"]


class EvalRow(msgspec.Struct):
    """One sample of an eval framework's log."""

    id: str | int
    epoch: int
    scores: dict[str, Any]  #: scorer name -> its value
    error: str | None = None  #: why the sample failed, if it did
    #: Per model call, in order: the hashes its request may have.
    requests: list[tuple[str, ...]] = msgspec.field(default_factory=list)
    question: str | None = None  #: the sample's input, shortened

    @property
    def row(self) -> str:
        """The run log's ``row`` text for this sample (what the Inspect provider writes)."""
        return canonical_json({"epoch": self.epoch, "sample": self.id}).decode("utf-8")

    @property
    def label(self) -> str:
        return f"{self.id} (epoch {self.epoch})"


def _sample(row: EvalRow) -> Sample:
    return Sample(
        "eval",
        f"epoch {row.epoch}",
        [],
        row.row,
        question=row.question,
        label=row.label,
        scores=row.scores,
        error=row.error,
    )


def _natural_id(row: EvalRow) -> tuple[int, Any, str]:
    return (row.epoch, 0 if isinstance(row.id, int) else 1, str(row.id).zfill(12))


def eval_samples_of(log: LogRead, rows: list[EvalRow], shapes: dict[str, Shape]) -> list[Sample]:
    """The eval's samples with the log's calls each asked, then the log's other calls
    grouped as ``samples_of`` groups them."""
    ordered = sorted(rows, key=_natural_id)
    samples = {row.row: _sample(row) for row in ordered}
    present = {c.request_hash for c in log.calls if c.request_hash}
    # hash -> [sample, how many calls of it the sample asked]: in (epoch, id) order
    asked: dict[str, list[list[Any]]] = {}
    for row in ordered:
        for hashes in row.requests:
            digest = next((h for h in hashes if h in present), None)
            if digest is None:
                continue
            slots = asked.setdefault(digest, [])
            mine = next((slot for slot in slots if slot[0] is samples[row.row]), None)
            if mine is None:
                slots.append([samples[row.row], 1])
            else:
                mine[1] += 1
    rest: list[Call] = []
    for call in log.calls:
        target = samples.get(call.row) if call.row is not None else None
        if target is None and call.request_hash is not None:
            target = _take(asked.get(call.request_hash), call)
        if target is None:
            rest.append(call)
        else:
            target.add(call)
    others = samples_of(LogRead(log.path, rest, log.skipped, log.source), shapes)
    return [*samples.values(), *others]


def _take(slots: list[list[Any]] | None, call: Call) -> Sample | None:
    """The first sample that asked this hash and still has a call of it to give; a retry
    of a sample's last call goes to that sample."""
    if not slots:
        return None
    for slot in slots:
        sample: Sample = slot[0]
        if sample.steps and retries(sample.steps[-1], call):
            return sample
    for slot in slots:
        if slot[1] > 0:
            slot[1] -= 1
            found: Sample = slot[0]
            return found
    return None
