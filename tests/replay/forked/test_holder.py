"""A large fixture's holder (docs/architecture.md, "Large fixtures"): a fixture over the
zygote's cache bound is kept by a holder process that forks every acquisition's actor.
Later acquisitions share its copy, a file rewritten in place is never served stale (not
even with the same inode, size and mtime), a rejection still names only its reason and
line, and the memory goes once the fixture is released.

Sizes stay small (a few MB, just over the cache bound); speed and big sizes are the
benchmarks' (P5d, P8c in benchmarks/large.py). The loader's fast paths for the same
files: tests/fixture/test_layouts.py.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from replay_actor import FixtureError, acquire, entry_line, load_fixture, request_hash
from replay_actor.replay.caller.zygote_client import Zygote
from replay_actor.replay.forked.zygote import (
    HOLD_SECONDS,
    HOLD_SECONDS_ENV,
    MAX_HOLD_SECONDS,
    hold_seconds,
)
from tests.support.large_fixture import ask, response, write_large
from tests.support.procs import wait_gone

pytestmark = [pytest.mark.timeout(120)]

SECRET = "PLANTED-SECRET-51c0e2"
#: Where memory is compared, a size well above an actor's own pages (~2.5 MB).
MEASURED = 10_000  # about 11 MB


# -- sharing through the holder ----------------------------------------------------------


@pytest.fixture
def fresh_zygote(monkeypatch: pytest.MonkeyPatch) -> Iterator[Zygote]:
    """A zygote of this test's own (its holders keep an unused fixture 0.5 s), and a
    check that nothing it started outlives the test."""
    import replay_actor.replay.caller.acquisition as acquisition_module

    monkeypatch.setenv(HOLD_SECONDS_ENV, "0.5")
    fresh = Zygote()
    monkeypatch.setattr(acquisition_module, "zygote", fresh)
    yield fresh
    pid = fresh.pid
    descendants = []
    if pid is not None:
        try:
            descendants = [p.pid for p in psutil.Process(pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            pass
    fresh.shutdown(wait=10.0)
    if pid is not None:
        assert wait_gone(pid)
    assert all(wait_gone(p) for p in descendants)


def holder_of(actor_pid: int) -> psutil.Process:
    parent = psutil.Process(actor_pid).parent()
    assert parent is not None
    return parent


def answer(provider: Any, i: int) -> str:
    return str(provider.complete(ask(i))["content"])


@pytest.mark.usefixtures("no_leaks")
def test_later_acquisitions_share_the_holders_copy(fresh_zygote: Zygote, tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    write_large(path, entries=MEASURED)
    size = path.stat().st_size
    with acquire(path, timeout=60) as first, acquire(path, timeout=60) as second:
        holder = holder_of(first.actor_pid)
        assert holder.name() == "replay-holder"
        assert holder_of(second.actor_pid).pid == holder.pid
        assert answer(first, 3).startswith("answer 3 one")
        assert answer(second, 3).startswith("answer 3 one")
        # The table is the holder's, shared: neither actor holds a copy of its own
        # (before, each actor parsed the file into a table of its own, ~1.2 x file;
        # an actor's own pages are ~2.5 MB whatever the fixture).
        for provider in (first, second):
            uss = psutil.Process(provider.actor_pid).memory_full_info().uss
            assert uss < 0.4 * size, (uss, size)
    with acquire(path, timeout=60) as third:
        assert holder_of(third.actor_pid).pid == holder.pid  # kept after the release
        assert answer(third, 5).startswith("answer 5 one")


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.parametrize("layout", ["compact", "dumps"])
def test_every_actor_of_a_holder_has_the_fixtures_snapshot(
    fresh_zygote: Zygote, tmp_path: Path, layout: str
) -> None:
    """The holder computes the set hash after forking its first actor (so that the
    first acquisition does not wait for it): that actor computes its own when asked,
    later ones inherit the holder's; all equal a plain load's."""
    path = tmp_path / "big.jsonl"
    write_large(path, layout=layout)
    expected = load_fixture(path).snapshot()
    with acquire(path, timeout=60) as first, acquire(path, timeout=60) as second:
        assert holder_of(second.actor_pid).pid == holder_of(first.actor_pid).pid
        snapshots = [second.snapshot(), first.snapshot()]
    for snapshot in snapshots:
        assert {key: snapshot[key] for key in expected} == expected


@pytest.mark.usefixtures("no_leaks")
def test_cursors_stay_per_acquisition_on_a_shared_copy(
    fresh_zygote: Zygote, tmp_path: Path
) -> None:
    path = tmp_path / "big.jsonl"
    write_large(path)
    with path.open("ab") as f:
        f.write(entry_line(request_hash(ask(-1)), responses=[{"n": k} for k in range(3)]) + b"\n")
    with acquire(path, timeout=60) as a, acquire(path, timeout=60) as b:
        assert holder_of(a.actor_pid).pid == holder_of(b.actor_pid).pid
        assert [a.complete(ask(-1))["n"] for _ in range(2)] == [0, 1]
        assert [b.complete(ask(-1))["n"] for _ in range(3)] == [0, 1, 2]
        assert a.complete(ask(-1))["n"] == 2


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.parametrize("kind", ["large", "small"])
def test_a_fixture_rewritten_in_place_is_never_served_stale(
    fresh_zygote: Zygote, tmp_path: Path, kind: str
) -> None:
    """Same inode, same size, same mtime (restored with os.utime): only the content
    says the file changed, and the content is what is checked."""
    path = tmp_path / "f.jsonl"
    if kind == "large":
        write_large(path, tag="one")
    else:
        path.write_bytes(entry_line(request_hash(ask(1)), response=response(1, "one")) + b"\n")
    with acquire(path, timeout=60) as provider:
        assert answer(provider, 1).startswith("answer 1 one")
    before = path.stat()
    with path.open("r+b") as f:  # in place: the same inode
        data = f.read()
        f.seek(0)
        f.write(data.replace(b" one caf", b" two caf"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino,
        before.st_size,
        before.st_mtime_ns,
    )
    with acquire(path, timeout=60) as provider:
        assert answer(provider, 1).startswith("answer 1 two")


@pytest.mark.usefixtures("no_leaks")
def test_a_changed_large_fixture_is_revalidated_and_refused_by_rule_and_line(
    fresh_zygote: Zygote, tmp_path: Path
) -> None:
    path = tmp_path / "big.jsonl"
    write_large(path)
    with acquire(path, timeout=60) as provider:
        holder = holder_of(provider.actor_pid).pid
        lines = path.read_bytes().count(b"\n")
        # Truncated in place, mid-line, with a secret on the broken line.
        with path.open("r+b") as f:
            data = f.read()
            cut = data.rindex(b"\n", 0, len(data) - 1)
            broken = data[: cut + 1] + b'{"schema_version":1,"' + SECRET.encode() + b'"'
            f.seek(0)
            f.write(broken)
            f.truncate()
        # The acquisition already made keeps its copy.
        assert answer(provider, 2).startswith("answer 2 one")
        with pytest.raises(FixtureError) as info:
            acquire(path, timeout=60)
    assert (info.value.reason, info.value.line) == ("invalid_json", lines)
    shown = repr(info.value) + str(info.value) + repr(info.value.args)
    assert SECRET not in shown and info.value.__cause__ is None
    assert info.value.__context__ is None
    write_large(path, tag="two")
    with acquire(path, timeout=60) as provider:
        assert holder_of(provider.actor_pid).pid == holder  # the same holder reloaded
        assert answer(provider, 2).startswith("answer 2 two")


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (None, HOLD_SECONDS),
        ("", HOLD_SECONDS),
        ("soon", HOLD_SECONDS),
        ("nan", HOLD_SECONDS),
        ("-1", HOLD_SECONDS),
        ("0", 0.0),
        ("2.5", 2.5),
        ("1e6", MAX_HOLD_SECONDS),
        ("1e10", MAX_HOLD_SECONDS),
        ("1e300", MAX_HOLD_SECONDS),
        ("1e400", MAX_HOLD_SECONDS),  # inf as a float
        ("inf", MAX_HOLD_SECONDS),
    ],
)
def test_the_hold_seconds_are_validated_and_clamped(value: str | None, seconds: float) -> None:
    assert hold_seconds(value) == seconds


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.parametrize("value", ["1e10", "1e300"])
def test_a_huge_hold_still_serves_later_acquisitions(
    fresh_zygote: Zygote, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    # Before, the holder's select() raised OverflowError on such a wait, the holder
    # died, and every acquisition of a large fixture failed with ActorLost.
    monkeypatch.setenv(HOLD_SECONDS_ENV, value)  # read when the zygote starts: now
    path = tmp_path / "big.jsonl"
    write_large(path)
    with acquire(path, timeout=60) as first:
        holder = holder_of(first.actor_pid).pid
        assert answer(first, 1).startswith("answer 1 one")
    for i in (2, 3):  # later acquisitions, after the holder waited with nothing to do
        time.sleep(0.2)
        with acquire(path, timeout=60) as later:
            assert holder_of(later.actor_pid).pid == holder  # kept: the hold is long
            assert answer(later, i).startswith(f"answer {i} one")


@pytest.mark.usefixtures("no_leaks")
def test_the_holder_and_its_memory_go_after_release(fresh_zygote: Zygote, tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    write_large(path, entries=MEASURED)
    size = path.stat().st_size
    small = tmp_path / "small.jsonl"
    small.write_bytes(entry_line(request_hash(ask(0)), response={"content": "s"}) + b"\n")
    with acquire(small, timeout=60):
        pass  # the zygote is up: its own memory is the baseline
    assert fresh_zygote.pid is not None
    baseline = psutil.Process(fresh_zygote.pid).memory_full_info().uss
    with acquire(path, timeout=60) as provider:
        holder = holder_of(provider.actor_pid)
        # The one copy is the holder's (resident there, shared with the actor).
        assert holder.memory_info().rss > 0.8 * size
        zygote_pid = fresh_zygote.pid
        assert zygote_pid is not None
    # Released, and unused for its keep time (0.5 s here): the holder exits and the
    # copy goes with it; the zygote never held it.
    assert wait_gone(holder.pid, within=30)
    zygote = psutil.Process(zygote_pid)
    assert zygote.memory_full_info().uss < baseline + 0.25 * size
    assert [c.pid for c in zygote.children()] == []
    # And the next acquisition loads it again in a new holder.
    with acquire(path, timeout=60) as provider:
        assert holder_of(provider.actor_pid).pid != holder.pid
        assert answer(provider, 1).startswith("answer 1 one")


@pytest.mark.usefixtures("no_leaks")
def test_a_killed_holder_leaves_its_actors_serving_and_is_replaced(
    fresh_zygote: Zygote, tmp_path: Path
) -> None:
    import signal

    path = tmp_path / "big.jsonl"
    write_large(path)
    with acquire(path, timeout=60) as survivor:
        holder = holder_of(survivor.actor_pid).pid
        os.kill(holder, signal.SIGKILL)
        assert wait_gone(holder)
        # Its actor lives on, adopted by the zygote (a subreaper), and keeps serving.
        assert answer(survivor, 4).startswith("answer 4 one")
        assert psutil.Process(survivor.actor_pid).ppid() == fresh_zygote.pid
        with acquire(path, timeout=60) as provider:
            assert holder_of(provider.actor_pid).pid not in (holder, fresh_zygote.pid)
            assert answer(provider, 4).startswith("answer 4 one")
