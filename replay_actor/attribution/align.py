"""Two run logs' calls grouped into samples, each baseline sample aligned with its
candidate, and the first place they part.

Runs in: the ``replay-actor compare`` process.

Samples (docs/attribution.md, "How calls become samples"): a call belongs to the sample
of the latest earlier call *of the same scope* whose messages its own messages extend (a
longer turn of the same conversation); a call that extends none (and one whose messages
equal an earlier call's: a repeated first turn is another sample more often than a
retry) starts a sample. Calls without a ``scope`` form conversations among themselves
(``conversation N``); a scope's conversations are named by the scope (``{"sample":2}``,
then ``{"epoch":1} #2``…), so an Inspect epoch, whose scope names no sample, still splits
into its samples. Conversations need the log's request sidecar: without one (a private
log) a scope is one sample and the unscoped calls are one, ``(unscoped)``.

Within a scope, conversations pair by their first request (the same hash), then in order
of first appearance; scopes pair by their text. Each pair is walked call by call; a call is
the same call when its ``Call.key`` is (the request hash; in a private log, the fixture
line and element). Per sample, the first rule that holds:

=============  =================================================================
status         meaning (``call``: the 1-based index where it shows)
=============  =================================================================
``diverged``   at ``call`` the candidate asked something else
``fewer``      the candidate stopped after ``call - 1`` of the baseline's calls
``extra``      the candidate made calls past the baseline's last
``missed``     the same calls, but the candidate's ``call`` failed closed (a miss…)
``identical``  the same calls, all served
=============  =================================================================
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

import msgspec

from .._errors import ReplayError
from ..authoring.nearest import Difference, differences
from ..files.sidecar import read_sidecar
from .log import sidecar_of
from .read import Call, LogRead

__all__ = ["STATUSES", "Sample", "SampleResult", "align", "samples_of"]

STATUSES: Final = ("identical", "diverged", "missed", "fewer", "extra")
UNSCOPED: Final = "(unscoped)"


class Sample(msgspec.Struct):
    """One sample of one log: its name and its calls in log order."""

    name: str
    calls: list[Call]
    first: str | None = None  #: its first call's hash (how conversations pair)
    group: str | None = None  #: its scope's text (samples pair within a scope)


class SampleResult(msgspec.Struct):
    """One sample compared."""

    name: str
    status: str
    call: int | None
    baseline_calls: int
    candidate_calls: int
    baseline: Call | None = None  #: the baseline's call at ``call``
    candidate: Call | None = None  #: the candidate's call at ``call``
    differences: list[Difference] | None = None  #: None: no sidecar to say


def _prefixes(log: LogRead) -> dict[str, list[int]]:
    """Each hash of the log's sidecar -> the digest of each leading run of its messages
    (``[0..1)``, ``[0..2)``…); empty without a sidecar."""
    out: dict[str, list[int]] = {}
    wanted = {call.request_hash for call in log.calls}
    wanted.discard(None)
    if not wanted:
        return out
    try:
        for digest, split in read_sidecar(sidecar_of(log.path)):
            if digest not in wanted:
                continue
            # Each leading run of messages as one number: Python's own hash of the
            # running pair (the messages are canonical bytes, so equal runs are equal
            # numbers; within one process, and 64 bits over a log's requests).
            step = 0
            steps: list[int] = []
            for message in split.messages:
                step = hash((step, bytes(message)))
                steps.append(step)
            out[digest] = steps
    except (OSError, ReplayError):
        pass  # no sidecar, or a corrupt one: calls group by scope alone
    return out


def _name(group: str | None, number: int) -> str:
    if group is None:
        return f"conversation {number}"
    return group if number == 1 else f"{group} #{number}"


def samples_of(log: LogRead) -> list[Sample]:
    """The log's samples, in order of first appearance."""
    by_name: dict[str, Sample] = {}
    prefixes = _prefixes(log)
    # (scope, a request's whole message run) -> its sample
    owner: dict[tuple[str | None, int], Sample] = {}
    numbers: dict[str | None, int] = {}
    for call in log.calls:
        group = call.scope
        steps = prefixes.get(call.request_hash) if call.request_hash else None
        if not steps:
            name = UNSCOPED if group is None else group
            sample = by_name.get(name) or by_name.setdefault(name, Sample(name, [], group=group))
        else:
            found = next(
                (owner[(group, p)] for p in reversed(steps[:-1]) if (group, p) in owner), None
            )
            if found is None:
                numbers[group] = number = numbers.get(group, 0) + 1
                name = _name(group, number)
                found = by_name.get(name)
                if found is None:
                    found = by_name[name] = Sample(name, [], call.request_hash, group)
                elif found.first is None:  # the scope's calls without messages came first
                    found.first = call.request_hash
            sample = found
            owner[(group, steps[-1])] = sample
        sample.calls.append(call)
    return list(by_name.values())


def _pair_group(
    base: list[Sample], cand: list[Sample]
) -> list[tuple[Sample | None, Sample | None]]:
    """One scope's samples (or the unscoped ones): those without lineage by name, the
    conversations by their first request, then in order."""
    cand_by_name = {s.name: s for s in cand if s.first is None}
    cand_lineage = [s for s in cand if s.first is not None]
    by_first: dict[str | None, list[Sample]] = {}
    for sample in reversed(cand_lineage):  # popped from the end: first appearance first
        by_first.setdefault(sample.first, []).append(sample)
    used: set[int] = set()
    pairs: list[tuple[Sample | None, Sample | None]] = []
    waiting: list[Sample] = []
    for sample in base:
        if sample.first is None:
            pairs.append((sample, cand_by_name.pop(sample.name, None)))
            continue
        same = by_first.get(sample.first)
        if same:
            match = same.pop()
            used.add(id(match))
            pairs.append((sample, match))
        else:
            waiting.append(sample)
    rest = [s for s in cand_lineage if id(s) not in used]
    for index, sample in enumerate(waiting):
        pairs.append((sample, rest[index] if index < len(rest) else None))
    pairs.extend((None, s) for s in rest[len(waiting) :])
    pairs.extend((None, s) for s in cand_by_name.values())
    return pairs


def _pairs(base: list[Sample], cand: list[Sample]) -> list[tuple[Sample | None, Sample | None]]:
    """Samples paired within their scope (docs: "How samples pair")."""
    groups: dict[str | None, tuple[list[Sample], list[Sample]]] = {}
    for side, samples in ((0, base), (1, cand)):
        for sample in samples:
            groups.setdefault(sample.group, ([], []))[side].append(sample)
    pairs: list[tuple[Sample | None, Sample | None]] = []
    for mine, theirs in groups.values():
        pairs.extend(_pair_group(mine, theirs))
    return pairs


def _compare(base: Sample | None, cand: Sample | None) -> SampleResult:
    name = base.name if base is not None else cand.name if cand is not None else ""
    b = base.calls if base else []
    c = cand.calls if cand else []
    for index, (mine, theirs) in enumerate(zip(b, c, strict=False)):
        if mine.key != theirs.key:
            return SampleResult(name, "diverged", index + 1, len(b), len(c), mine, theirs)
    if len(c) < len(b):
        return SampleResult(name, "fewer", len(c) + 1, len(b), len(c), b[len(c)], None)
    if len(c) > len(b):
        return SampleResult(name, "extra", len(b) + 1, len(b), len(c), None, c[len(b)])
    for index, theirs in enumerate(c):
        if theirs.outcome != "served":
            return SampleResult(name, "missed", index + 1, len(b), len(c), b[index], theirs)
    return SampleResult(name, "identical", None, len(b), len(c))


def _requests(path: str, hashes: set[str]) -> dict[str, Any]:
    """The split requests of ``hashes`` from a log's sidecar (those it has)."""
    found: dict[str, Any] = {}
    if not hashes:
        return found
    try:
        for digest, split in read_sidecar(sidecar_of(path)):
            if digest in hashes:
                found[digest] = split
                if len(found) == len(hashes):
                    break
    except (OSError, ReplayError):
        pass
    return found


def _explain(results: Iterable[SampleResult], base: LogRead, cand: LogRead) -> None:
    """Fill in the differing paths of each diverged sample, from both sidecars."""
    diverged = [r for r in results if r.status == "diverged"]
    mine = _requests(
        base.path, {h for r in diverged if r.baseline and (h := r.baseline.request_hash)}
    )
    theirs = _requests(
        cand.path, {h for r in diverged if r.candidate and (h := r.candidate.request_hash)}
    )
    for result in diverged:
        assert result.baseline is not None and result.candidate is not None
        a = mine.get(result.baseline.request_hash or "")
        b = theirs.get(result.candidate.request_hash or "")
        if a is not None and b is not None:
            result.differences = differences(a, b)


def align(base: LogRead, cand: LogRead) -> list[SampleResult]:
    """Every sample of either log, compared (baseline order, then candidate-only ones)."""
    results = [_compare(b, c) for b, c in _pairs(samples_of(base), samples_of(cand))]
    _explain(results, base, cand)
    return results
