"""Each baseline sample paired with the candidate sample that is the same question, by
content, never by the order the samples ran or finished in.

Runs in: the ``replay-actor compare`` process.

Within one scope (docs/attribution.md, "How samples pair"):

1. samples that asked exactly the same calls pair (the same row first, where two did);
2. samples whose first requests are identical pair, those sharing the most leading
   calls first;
3. the rest pair by least difference: fewest differing paths of the first request, then
   fewest differing messages and fields of the later ones, then the same eval row, then
   the smallest whole-request distance of the first request (``nearest``'s), then the
   requests' canonical bytes. The assignment is greedy over the sorted costs: the
   cheapest pair first, each sample once, so it is stable (no two samples would rather
   have each other) and the same whatever order the logs list them in.

Step 3 compares every pair while there are at most ``PAIR_BUDGET`` of them; beyond, each
candidate sample is compared with the ``WINDOW`` baseline samples nearest to it in the
sorted order of their first requests' bytes, read forward and backward (an edit at either
end of a prompt keeps it beside its original), so a hostile log costs seconds, not hours.

What is left is unpaired: the candidate made ``fewer`` or ``extra`` samples. A scope's bag
pairs with the other log's bag of that scope.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from ..authoring.nearest import canonical_bytes, differences, request_distance
from .requests import Shape
from .samples import Sample

__all__ = [
    "PAIR_BUDGET",
    "WINDOW",
    "Pair",
    "needs_splits",
    "pair_by_calls",
    "pair_by_difference",
]

#: Step 3 compares every pair up to this many.
PAIR_BUDGET: Final = 10_000
#: Beyond it, each candidate sample meets this many neighbours per order and side.
WINDOW: Final = 8

Pair = tuple[Sample | None, Sample | None]


def _by_group(samples: list[Sample]) -> dict[str | None, list[Sample]]:
    groups: dict[str | None, list[Sample]] = {}
    for sample in samples:
        groups.setdefault(sample.group, []).append(sample)
    return groups


def _order(sample: Sample) -> tuple[str, tuple[str, ...]]:
    """A content order among samples (their rows first), never the log's."""
    return (sample.row or "", sample.order())


def _exact(base: list[Sample], cand: list[Sample]) -> tuple[list[Pair], list[Sample], list[Sample]]:
    """Step 1: the same calls; among equals, the same row first, then in row order."""
    pairs: list[Pair] = []
    waiting: dict[tuple[str, ...], list[Sample]] = {}
    for sample in sorted(cand, key=_order):
        waiting.setdefault(sample.order(), []).append(sample)
    left: list[Sample] = []
    for sample in sorted(base, key=_order):
        same = waiting.get(sample.order())
        if not same:
            left.append(sample)
            continue
        match = next((s for s in same if s.row is not None and s.row == sample.row), same[0])
        same.remove(match)
        pairs.append((sample, match))
    rest = [s for group in waiting.values() for s in group]
    return pairs, left, rest


def _shared_calls(a: Sample, b: Sample) -> int:
    shared = 0
    for x, y in zip(a.steps, b.steps, strict=False):
        if x.key != y.key:
            break
        shared += 1
    return shared


def _greedy(costs: list[tuple[Any, Sample, Sample]]) -> tuple[list[Pair], set[int]]:
    """The cheapest pair first, each sample once."""
    costs.sort(key=lambda item: item[0])
    taken: set[int] = set()
    pairs: list[Pair] = []
    for _, a, b in costs:
        if id(a) in taken or id(b) in taken:
            continue
        taken.update((id(a), id(b)))
        pairs.append((a, b))
    return pairs, taken


def _same_first(
    base: list[Sample], cand: list[Sample]
) -> tuple[list[Pair], list[Sample], list[Sample]]:
    """Step 2: identical first requests, the most leading calls in common first."""
    buckets: dict[Any, tuple[list[Sample], list[Sample]]] = {}
    for side, samples in ((0, base), (1, cand)):
        for sample in samples:
            key = sample.first or (sample.steps[0].key if sample.steps else None)
            buckets.setdefault(key, ([], []))[side].append(sample)
    costs: list[tuple[Any, Sample, Sample]] = []
    for key, (mine, theirs) in buckets.items():
        if key is None or not mine or not theirs:
            continue
        if len(mine) * len(theirs) > PAIR_BUDGET:  # sorted, then side by side
            side_by_side = zip(sorted(mine, key=_order), sorted(theirs, key=_order), strict=False)
            costs.extend(((0, i), a, b) for i, (a, b) in enumerate(side_by_side))
            continue
        for a in mine:
            for b in theirs:
                cost = (-_shared_calls(a, b), a.row != b.row, _order(a), _order(b))
                costs.append((cost, a, b))
    pairs, taken = _greedy(costs)
    return (
        pairs,
        [s for s in base if id(s) not in taken],
        [s for s in cand if id(s) not in taken],
    )


class _First:
    """What step 3 knows of a sample's first request."""

    def __init__(self, sample: Sample, split: Any) -> None:
        self.sample = sample
        self.split = split
        self.bytes = canonical_bytes(split)


def _later(a: Sample, b: Sample, shapes: dict[str, Shape]) -> int:
    """Differing messages and fields of the later requests, step by step (a step one
    sample lacks counts its messages)."""
    count = 0
    for index in range(1, max(len(a.steps), len(b.steps))):
        x = shapes.get(a.steps[index].call.request_hash or "") if index < len(a.steps) else None
        y = shapes.get(b.steps[index].call.request_hash or "") if index < len(b.steps) else None
        if x is None or y is None:
            one = x if x is not None else y
            count += 1 + (len(one.messages) if one is not None else 0)
            continue
        count += x.rest != y.rest
        count += sum(m != n for m, n in zip(x.messages, y.messages, strict=False))
        count += abs(len(x.messages) - len(y.messages))
    return count


def _candidates(base: list[_First], cand: list[_First]) -> set[tuple[int, int]]:
    """(base index, candidate index) pairs worth comparing in step 3."""
    if len(base) * len(cand) <= PAIR_BUDGET:
        return {(i, j) for i in range(len(base)) for j in range(len(cand))}
    wanted: set[tuple[int, int]] = set()
    orders: list[Callable[[_First], bytes]] = [lambda f: f.bytes, lambda f: f.bytes[::-1]]
    for order in orders:
        merged = sorted(
            [(order(f), 0, i) for i, f in enumerate(base)]
            + [(order(f), 1, j) for j, f in enumerate(cand)]
        )
        for at, (_, side, j) in enumerate(merged):
            if side != 1:
                continue
            for step in (-1, 1):
                found, k = 0, at + step
                while 0 <= k < len(merged) and found < WINDOW:
                    if merged[k][1] == 0:
                        wanted.add((merged[k][2], j))
                        found += 1
                    k += step
    return wanted


def _by_difference(
    base: list[_First], cand: list[_First], shapes: dict[str, Shape]
) -> tuple[list[Pair], set[int]]:
    """Step 3: least difference, cheapest pair first."""
    costs: list[tuple[Any, Sample, Sample]] = []
    for i, j in _candidates(base, cand):
        a, b = base[i], cand[j]
        cost = (
            len(differences(a.split, b.split)),
            _later(a.sample, b.sample, shapes),
            a.sample.row is None or a.sample.row != b.sample.row,
            request_distance(a.split, b.split),
            a.bytes,
            b.bytes,
        )
        costs.append((cost, a.sample, b.sample))
    return _greedy(costs)


def pair_by_calls(
    base: list[Sample], cand: list[Sample]
) -> tuple[list[Pair], list[tuple[list[Sample], list[Sample]]]]:
    """Steps 1 and 2 (and the bags), from the calls' keys alone: the pairs, and per scope
    the samples left for step 3 (baseline's, candidate's)."""
    pairs: list[Pair] = []
    waiting: list[tuple[list[Sample], list[Sample]]] = []
    cand_groups = _by_group(cand)
    for group, in_base in _by_group(base).items():
        in_cand = cand_groups.pop(group, [])
        bags = [s for s in in_base if s.kind == "bag"], [s for s in in_cand if s.kind == "bag"]
        pairs.extend(_bags(*bags))
        mine = [s for s in in_base if s.kind != "bag"]
        theirs = [s for s in in_cand if s.kind != "bag"]
        found, mine, theirs = _exact(mine, theirs)
        pairs.extend(found)
        found, mine, theirs = _same_first(mine, theirs)
        pairs.extend(found)
        waiting.append((mine, theirs))
    for rest in cand_groups.values():
        pairs.extend(_bags([], [s for s in rest if s.kind == "bag"]))
        waiting.append(([], [s for s in rest if s.kind != "bag"]))
    return pairs, waiting


def needs_splits(waiting: list[tuple[list[Sample], list[Sample]]]) -> set[str]:
    """The first requests step 3 compares: those of scopes with samples on both sides."""
    both = [(mine, theirs) for mine, theirs in waiting if mine and theirs]
    return {s.first for mine, theirs in both for s in (*mine, *theirs) if s.first}


def pair_by_difference(
    waiting: list[tuple[list[Sample], list[Sample]]],
    splits: dict[str, Any],
    shapes: dict[str, Shape],
) -> list[Pair]:
    """Step 3 over what steps 1 and 2 left (``splits``: the first requests, by hash);
    the rest unpaired."""
    pairs: list[Pair] = []
    for mine, theirs in waiting:
        firsts = [_First(s, splits[s.first]) for s in mine if s.first in splits]
        others = [_First(s, splits[s.first]) for s in theirs if s.first in splits]
        found, taken = _by_difference(firsts, others, shapes) if firsts and others else ([], set())
        pairs.extend(found)
        pairs.extend((s, None) for s in mine if id(s) not in taken)
        pairs.extend((None, s) for s in theirs if id(s) not in taken)
    return pairs


def _bags(mine: list[Sample], theirs: list[Sample]) -> list[Pair]:
    if mine and theirs:
        return [(mine[0], theirs[0])]
    return [(s, None) for s in mine] + [(None, s) for s in theirs]
