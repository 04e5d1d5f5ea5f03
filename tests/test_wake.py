"""``Waker`` (replay/caller/wake.py): a channel sends ``WAKE`` before its calls only
while that is the faster way, and keeps checking, less often while it stays slower."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

from replay_actor import acquire, entry_line, request_hash
from replay_actor.replay.caller.wake import Waker

FAST, SLOW = 50_000, 150_000


def run(waker: Waker, calls: int, cost: dict[bool, int]) -> list[bool]:
    """Make ``calls`` calls, each taking ``cost[woke]`` ns; the choices made."""
    made = []
    for _ in range(calls):
        woke = waker.choose()
        waker.record(woke, cost[woke])
        made.append(woke)
    return made


def test_it_tries_both_ways_then_keeps_the_faster() -> None:
    waker = Waker()
    made = run(waker, 200, {True: FAST, False: SLOW})
    assert made[:2] == [False, True]
    assert made[2:].count(False) <= 5  # a few checks of the slower way, no more
    waker = Waker()
    made = run(waker, 200, {True: SLOW, False: FAST})
    assert made[2:].count(True) <= 5


def test_the_checks_of_the_slower_way_thin_out_and_follow_a_change() -> None:
    waker = Waker()
    made = run(waker, 4000, {True: SLOW, False: FAST})
    tries = [i for i, woke in enumerate(made) if woke and i >= 2]
    gaps = [b - a for a, b in pairwise(tries)]
    assert gaps == sorted(gaps) and gaps[-1] >= 512  # less and less often
    # The machine changes (its cores go idle): the other way wins from then on.
    made = run(waker, 3000, {True: FAST, False: SLOW})
    assert made[-500:].count(True) >= 495


def test_a_handle_answers_the_same_whichever_way_it_calls(tmp_path: Path) -> None:
    request = {"messages": [{"role": "user", "content": "hello"}]}
    sequence = {"messages": [{"role": "user", "content": "again"}]}
    path = tmp_path / "f.jsonl"
    path.write_bytes(
        entry_line(request_hash(request), response={"content": "hi"})
        + b"\n"
        + entry_line(request_hash(sequence), responses=[{"n": i} for i in range(300)])
        + b"\n"
    )
    with acquire(path, timeout=10) as provider:
        for i in range(300):  # both ways are taken along the way
            assert provider.complete(request) == {"content": "hi"}
            assert provider.complete(sequence) == {"n": i}
        snapshot = provider.snapshot()
    assert (snapshot["served"], snapshot["misses"]) == (600, 0)
