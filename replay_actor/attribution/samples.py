"""A run log's calls grouped into samples, and each sample's calls into steps (a call and
its retries).

Runs in: the ``replay-actor compare`` process.

The rules (docs/attribution.md, "How calls become samples"), first that holds:

1. **An eval row** (the log's ``row``: Inspect's sample id and epoch, the pytest test id)
   is one sample, whatever its calls ask.
2. **A retry**: a call asking exactly what the last step of a sample asked, after that
   step failed (a miss, an exhausted sequence, a refusal, a failure), is another attempt
   of that step, not a new call (CrewAI retries a failed call three times).
3. **Conversation lineage**: a call joins the sample of the latest earlier call *of the
   same scope* whose messages its own extend (the next turn of one conversation); a call
   that extends none starts a sample.
4. A call without messages (an embedding, a completion) or whose request neither
   sidecar holds belongs to its scope's conversation if the scope has exactly one.
   Otherwise a call without messages is a sample of its own (lm_eval's completions:
   one document each), and one whose request is unknown joins its scope's **bag**:
   calls that cannot be told apart by conversation, compared as a set.

Only the content of the calls and the order of each conversation's own calls decide;
the order in which concurrent samples interleave in the log never does.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from .read import Call, LogRead
from .requests import Shape

__all__ = ["FAILED", "Sample", "Step", "retries", "samples_of"]

#: The outcomes of a call that failed closed: a retry of it is another attempt.
FAILED: Final = frozenset({"miss", "exhausted", "invalid", "blocked", "failed"})


class Step(msgspec.Struct):
    """One call of a sample: its first attempt and its last (whose outcome is the call's)."""

    call: Call
    last: Call
    attempts: int
    #: What makes two steps the same call, as text (what samples are ordered by): the
    #: request hash; in a private log, the fixture line and element and the outcome.
    key: str

    @classmethod
    def of(cls, call: Call) -> Step:
        key = call.request_hash or f"{call.line}:{call.element}:{call.outcome}"
        return cls(call, call, 1, key)

    @property
    def outcome(self) -> str:
        return self.last.outcome


class Sample(msgspec.Struct):
    """One sample of one log."""

    #: ``conversation`` (lineage; a call without messages alone is one too), ``row`` (an
    #: eval row), ``bag`` (calls of unknown requests, compared as a set) or ``eval`` (an
    #: eval framework's own sample, ``--eval``); ``single`` while grouping only.
    kind: str
    group: str | None  #: the scope's text: samples pair within a scope
    steps: list[Step]
    row: str | None = None  #: the eval row's text
    question: str | None = None  #: the first request's first user message, shortened
    label: str | None = None  #: an eval sample's own name (``--eval``)
    scores: dict[str, Any] | None = None  #: an eval sample's scores (``--eval``)
    error: str | None = None  #: an eval sample's error (``--eval``)
    #: A conversation's first request, when calls without lineage joined it (rule 4).
    anchor: str | None = None
    ordered: tuple[str, ...] | None = None  #: ``order()``, once asked (grouping is done)

    @property
    def first(self) -> str | None:
        """The first request's hash (None: a bag, or a private log)."""
        if self.anchor is not None:
            return self.anchor
        return self.steps[0].call.request_hash if self.steps else None

    def order(self) -> tuple[str, ...]:
        """The sample's content as text, to order samples by (never by the log's order);
        asked once grouping is done, and kept."""
        if self.ordered is None:
            orders = tuple(step.key for step in self.steps)
            self.ordered = tuple(sorted(orders)) if self.kind == "bag" else orders
        return self.ordered

    def add(self, call: Call) -> None:
        """Append a call: a new step, or another attempt of the last one (rule 2)."""
        if self.steps and retries(self.steps[-1], call):
            last = self.steps[-1]
            last.last = call
            last.attempts += 1
        else:
            self.steps.append(Step.of(call))


def retries(step: Step, call: Call) -> bool:
    """Whether ``call`` is another attempt of ``step``: the same request after a failure."""
    return (
        call.request_hash is not None
        and step.call.request_hash == call.request_hash
        and step.outcome in FAILED
    )


class _Grouping:
    """The state of one pass over a log's calls."""

    def __init__(self, shapes: dict[str, Shape]) -> None:
        self.shapes = shapes
        self.samples: list[Sample] = []
        self.rows: dict[tuple[str | None, str], Sample] = {}
        self.bags: dict[str | None, Sample] = {}
        # (scope, a whole message run of an earlier call) -> the sample it is in
        self.owner: dict[tuple[str | None, int], Sample] = {}
        # (scope, hash) -> the sample whose last step asked it and failed
        self.failed: dict[tuple[str | None, str], Sample] = {}

    def _new(self, kind: str, group: str | None, row: str | None = None) -> Sample:
        sample = Sample(kind, group, [], row)
        self.samples.append(sample)
        return sample

    def _conversation(self, call: Call, steps: tuple[int, ...]) -> Sample:
        group = call.scope
        owners = self.owner
        found = None
        for index in range(len(steps) - 2, -1, -1):
            found = owners.get((group, steps[index]))
            if found is not None:
                break
        if found is None:
            found = self._new("conversation", group)
        owners[(group, steps[-1])] = found
        return found

    def add(self, call: Call) -> None:
        group, digest = call.scope, call.request_hash
        if call.row is not None:
            sample = self.rows.get((group, call.row))
            if sample is None:
                sample = self.rows[(group, call.row)] = self._new("row", group, call.row)
        elif digest is not None and (group, digest) in self.failed:
            sample = self.failed[(group, digest)]
        else:
            shape = self.shapes.get(digest) if digest is not None else None
            if shape is None:
                sample = self.bags.get(group) or self.bags.setdefault(
                    group, self._new("bag", group)
                )
            elif not shape.messages:  # an embedding, a completion: one call of its own
                sample = self._new("single", group)
            else:
                sample = self._conversation(call, shape.prefixes)
        before = sample.steps[-1] if sample.steps else None
        sample.add(call)
        if before is not None and before.call.request_hash is not None:
            self.failed.pop((group, before.call.request_hash), None)
        if digest is not None and call.outcome in FAILED and sample.kind != "row":
            self.failed[(group, digest)] = sample

    def finish(self) -> list[Sample]:
        """The samples: in a scope of one conversation, the calls without messages and
        the bag folded into it (rule 4); elsewhere a call without messages is a sample
        of its own."""
        conversations: dict[str | None, list[Sample]] = {}
        for sample in self.samples:
            if sample.kind == "conversation":
                conversations.setdefault(sample.group, []).append(sample)
        out = []
        for sample in self.samples:
            only = conversations.get(sample.group, [])
            if sample.kind in ("bag", "single") and sample.group is not None and len(only) == 1:
                only[0].anchor = only[0].first
                merged = only[0].steps + sample.steps
                only[0].steps = sorted(merged, key=lambda step: step.call.number)
                continue
            if sample.kind == "single":
                sample.kind = "conversation"
            out.append(sample)
        return out


def samples_of(log: LogRead, shapes: dict[str, Shape]) -> list[Sample]:
    """The log's samples (``shapes``: what the sidecars say of each hash)."""
    grouping = _Grouping(shapes)
    for call in log.calls:
        grouping.add(call)
    return grouping.finish()
