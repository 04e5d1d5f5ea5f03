"""The replay provider: semantics, diagnostics, privacy, lifecycle.

The rules: docs/architecture.md and docs/privacy.md.
"""

from __future__ import annotations

import gc
import json
import os
import pickle
import signal
import stat
import subprocess
import sys
import textwrap
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from replay_actor import (
    ActorLost,
    Ceilings,
    FixtureError,
    ProviderClosed,
    ReplayError,
    ReplayMiss,
    ReplayProvider,
    RequestError,
    SequenceExhausted,
    Supervisor,
    acquire,
    entry_line,
    request_hash,
)
from tests.support.procs import is_gone, wait_gone

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(60)]


def req(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


@pytest.fixture
def fixture_path(tmp_path: Path) -> Path:
    """hello -> single; retry -> sequence of 3; big -> sequence of 400."""
    path = tmp_path / "fixture.jsonl"
    lines = [
        entry_line(request_hash(req("hello")), response={"content": "frozen", "n": 1.5}),
        entry_line(
            request_hash(req("retry")),
            responses=[{"content": "first"}, {"content": "second"}, {"content": "third"}],
        ),
        entry_line(request_hash(req("big")), responses=[{"i": i} for i in range(400)]),
        entry_line(request_hash(req("unused")), response={"content": "never asked"}),
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


@pytest.fixture
def provider(fixture_path: Path) -> Iterator[Any]:
    with acquire(fixture_path, timeout=10) as handle:
        yield handle


def test_single_response_answers_every_time(provider: ReplayProvider) -> None:
    assert provider.complete(req("hello")) == {"content": "frozen", "n": 1.5}
    assert provider.complete(req("hello")) == {"content": "frozen", "n": 1.5}


def test_sequence_in_order_then_exhausted_forever(provider: ReplayProvider) -> None:
    answers = [provider.complete(req("retry"))["content"] for _ in range(3)]
    assert answers == ["first", "second", "third"]
    digest = request_hash(req("retry"))
    for _ in range(2):
        with pytest.raises(SequenceExhausted) as info:
            provider.complete(req("retry"))
        assert str(info.value) == (
            f"replay sequence exhausted for this request (request_hash: {digest})"
        )
        assert info.value.request_hash == digest


def test_miss_message_is_exact_and_carries_the_hash(provider: ReplayProvider) -> None:
    digest = request_hash(req("nobody wrote this"))
    with pytest.raises(ReplayMiss) as info:
        provider.complete(req("nobody wrote this"))
    assert str(info.value) == (f"no replay fixture matches this request (request_hash: {digest})")
    assert info.value.request_hash == digest
    assert isinstance(info.value, ReplayError)


def test_returned_responses_are_fresh_objects(provider: ReplayProvider) -> None:
    first = provider.complete(req("hello"))
    first["content"] = "mutated"
    first["extra"] = True
    assert provider.complete(req("hello")) == {"content": "frozen", "n": 1.5}


def test_mapping_and_struct_requests_hit_the_same_entry(provider: ReplayProvider) -> None:
    from replay_actor import Message, Request

    assert provider.complete(Request(messages=[Message("user", "hello")]))["content"] == "frozen"


def test_invalid_request_raises_request_error_and_sends_nothing(provider: ReplayProvider) -> None:
    with pytest.raises(RequestError):
        provider.complete({"messages": []})
    with pytest.raises(ValueError):
        provider.complete({"messages": [{"role": "wizard", "content": "x"}]})
    assert provider.snapshot()["served"] == 0


def test_snapshot_counts_and_carries_no_payload_or_hash(
    provider: ReplayProvider, fixture_path: Path
) -> None:
    provider.complete(req("hello"))
    with pytest.raises(ReplayMiss):
        provider.complete(req("missing"))
    drain_retry(provider)
    snap = provider.snapshot()
    assert snap["served"] == 4 and snap["misses"] == 1 and snap["exhausted"] == 1
    assert snap["entries"] == 4 and snap["sequence_entries"] == 2 and snap["responses"] == 405
    assert snap["kind"] == "replay"
    text = json.dumps(snap)
    assert "frozen" not in text and snap["fixture_set_hash"].startswith("sha256:")
    for digest in (request_hash(req("hello")), request_hash(req("missing"))):
        assert digest not in text
    assert str(fixture_path) not in text


def test_inspect_lists_hashes_of_misses_and_exhaustions(provider: ReplayProvider) -> None:
    with pytest.raises(ReplayMiss):
        provider.complete(req("missing"))
    with pytest.raises(ReplayMiss):
        provider.complete(req("missing"))
    drain_retry(provider)
    report = provider.inspect()
    assert report["misses"] == [{"request_hash": request_hash(req("missing")), "count": 2}]
    assert report["exhausted"] == [{"request_hash": request_hash(req("retry")), "served": 3}]
    assert report["unused_entries"] == 3  # hello, big and unused were never asked
    assert "frozen" not in json.dumps(report)


def drain_retry(provider: ReplayProvider) -> None:
    """Ask "retry" four times: its three elements, then one exhaustion."""
    for _ in range(4):
        try:
            provider.complete(req("retry"))
        except SequenceExhausted:
            pass


def _all_text(exc: BaseException) -> str:
    parts = [str(exc), repr(exc), repr(exc.args), repr(vars(exc))]
    parts.append("".join(traceback.format_exception(exc)))
    parts.append(repr(exc.__cause__) + repr(exc.__context__))
    return "\n".join(parts)


def test_private_mode_keeps_hashes_out_of_exceptions(fixture_path: Path, tmp_path: Path) -> None:
    record = tmp_path / "state" / "misses.jsonl"
    record.parent.mkdir()
    with acquire(fixture_path, private=True, inspection_path=record, timeout=10) as provider:
        provider.complete(req("hello"))
        with pytest.raises(ReplayMiss) as miss:
            provider.complete(req("secret prompt"))
        for _ in range(3):
            provider.complete(req("retry"))
        with pytest.raises(SequenceExhausted) as exhausted:
            provider.complete(req("retry"))
        assert str(miss.value) == "no replay fixture matches this request"
        assert str(exhausted.value) == "replay sequence exhausted for this request"
        for exc, digest in (
            (miss.value, request_hash(req("secret prompt"))),
            (exhausted.value, request_hash(req("retry"))),
        ):
            assert exc.request_hash is None
            assert exc.__cause__ is None and exc.__context__ is None
            text = _all_text(exc)
            assert digest not in text and "sha256:" not in text
        # The owner-only channels have them.
        report = provider.inspect()
        assert report["misses"][0]["request_hash"] == request_hash(req("secret prompt"))
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert lines == [
        {"event": "miss", "request_hash": request_hash(req("secret prompt")), "call": 2},
        {"event": "exhausted", "request_hash": request_hash(req("retry")), "call": 6},
    ]
    assert stat.S_IMODE(record.stat().st_mode) == 0o600


def test_inspection_path_refuses_a_symbolic_link(fixture_path: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep me\n")
    link = tmp_path / "record.jsonl"
    link.symlink_to(target)
    with pytest.raises(ReplayError) as info:
        acquire(fixture_path, private=True, inspection_path=link, timeout=10)
    # the path the user gave is named (paths belong in errors), the hash never
    assert str(info.value) == f"the inspection record path {link} is a symbolic link (refused)"
    assert target.read_text() == "keep me\n"


def test_rejected_fixture_raises_reason_and_line_only(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    good = entry_line(request_hash(req("a")), response={"content": "ok"})
    path.write_bytes(good + b'\n\n{"schema_version":1,"SECRET-KEY-41":"SECRET-VALUE-41"}\n')
    with pytest.raises(FixtureError) as info:
        acquire(path, timeout=10)
    assert (info.value.reason, info.value.line) == ("unknown_key", 3)
    assert str(info.value) == "fixture rejected: unknown_key at line 3"
    assert "SECRET" not in _all_text(info.value)
    assert info.value.__context__ is None


def test_missing_fixture_is_file_missing(tmp_path: Path) -> None:
    with pytest.raises(FixtureError) as info:
        acquire(tmp_path / "nope.jsonl", timeout=10)
    assert (info.value.reason, info.value.line) == ("file_missing", None)


def test_ceilings_reach_the_actor(fixture_path: Path) -> None:
    with pytest.raises(FixtureError) as info:
        acquire(fixture_path, ceilings=Ceilings(max_entries=2), timeout=10)
    assert (info.value.reason, info.value.line) == ("too_many_entries", 3)


def test_owner_not_alive_is_refused(fixture_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with pytest.raises(ReplayError, match="not alive"):
        acquire(fixture_path, owner_pid=dead.pid, timeout=10)


def test_release_is_idempotent_and_closes(fixture_path: Path) -> None:
    provider = acquire(fixture_path, timeout=10)
    actor = provider.actor_pid
    assert provider.owner_pid == os.getpid() and not provider.closed
    provider.release()
    provider.release()
    assert provider.closed
    assert wait_gone(actor)
    with pytest.raises(ProviderClosed):
        provider.complete(req("hello"))
    with pytest.raises(ProviderClosed):
        provider.snapshot()


def test_acquisitions_never_share_cursors(fixture_path: Path) -> None:
    with acquire(fixture_path, timeout=10) as one, acquire(fixture_path, timeout=10) as two:
        assert one.actor_pid != two.actor_pid
        assert one.complete(req("retry"))["content"] == "first"
        assert one.complete(req("retry"))["content"] == "second"
        assert two.complete(req("retry"))["content"] == "first"


def test_copy_shares_cursors_and_release_of_copy_closes_only_it(provider: ReplayProvider) -> None:
    copy = pickle.loads(pickle.dumps(provider))
    assert provider.complete(req("retry"))["content"] == "first"
    assert copy.complete(req("retry"))["content"] == "second"
    copy.release()
    assert copy.closed and not provider.closed
    with pytest.raises(ProviderClosed):
        copy.complete(req("retry"))
    assert provider.complete(req("retry"))["content"] == "third"


def test_acquirer_release_closes_every_copy(fixture_path: Path) -> None:
    provider = acquire(fixture_path, timeout=10)
    copy = pickle.loads(pickle.dumps(provider))
    assert copy.complete(req("hello"))["content"] == "frozen"
    provider.release()
    with pytest.raises(ProviderClosed):
        copy.complete(req("hello"))
    assert copy.closed


def test_dropped_handle_warns_and_the_actor_exits(fixture_path: Path) -> None:
    provider = acquire(fixture_path, timeout=10)
    actor = provider.actor_pid
    with pytest.warns(ResourceWarning, match="unreleased ReplayProvider"):
        del provider
        gc.collect()
    assert wait_gone(actor)


def test_killed_actor_gives_actor_lost_promptly_and_for_good(provider: ReplayProvider) -> None:
    provider.complete(req("hello"))
    os.kill(provider.actor_pid, signal.SIGKILL)
    with pytest.raises(ActorLost):
        provider.complete(req("hello"))
    with pytest.raises(ActorLost):
        provider.complete(req("hello"))
    assert wait_gone(provider.actor_pid)


def test_hung_actor_gives_actor_lost_after_the_timeout(fixture_path: Path) -> None:
    provider = acquire(fixture_path, timeout=2.0)
    try:
        os.kill(provider.actor_pid, signal.SIGSTOP)
        with pytest.raises(ActorLost, match="in time"):
            provider.complete(req("hello"))
        with pytest.raises(ActorLost):  # the handle is broken, not silently reused
            provider.complete(req("hello"))
    finally:
        os.kill(provider.actor_pid, signal.SIGKILL)  # a stopped process dies of it too
        provider.release()


def test_supervisor_bounds_lists_and_shuts_down(fixture_path: Path) -> None:
    with Supervisor(max_actors=2) as supervisor:
        one = supervisor.acquire(fixture_path, timeout=10)
        two = supervisor.acquire(fixture_path, timeout=10)
        with pytest.raises(ReplayError, match="max_actors"):
            supervisor.acquire(fixture_path, timeout=10)
        one.complete(req("hello"))
        active = supervisor.active()
        assert {a["actor_pid"] for a in active} == {one.actor_pid, two.actor_pid}
        assert all(a["owner_pid"] == os.getpid() for a in active)
        assert sorted(a["snapshot"]["served"] for a in active) == [0, 1]
        one.release()  # frees a slot
        three = supervisor.acquire(fixture_path, timeout=10)
        pids = [two.actor_pid, three.actor_pid]
    assert two.closed and three.closed
    assert all(wait_gone(pid) for pid in pids)


def test_supervisor_reaps_a_crashed_actor_without_being_called(fixture_path: Path) -> None:
    with Supervisor() as supervisor:
        provider = supervisor.acquire(fixture_path, timeout=10)
        os.kill(provider.actor_pid, signal.SIGKILL)
        # No call on the provider or the supervisor: the reaper collects the zombie.
        assert wait_gone(provider.actor_pid)
        proc_gone = not psutil.pid_exists(provider.actor_pid)
        if not proc_gone:
            assert psutil.Process(provider.actor_pid).status() != psutil.STATUS_ZOMBIE
        assert supervisor.active() == []


def test_acquire_from_python_c_and_an_unguarded_script(fixture_path: Path, tmp_path: Path) -> None:
    code = textwrap.dedent(
        f"""
        from replay_actor import acquire
        p = acquire({str(fixture_path)!r}, timeout=10)
        print(p.complete({{"messages": [{{"role": "user", "content": "hello"}}]}})["content"])
        p.release()
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "frozen"
    script = tmp_path / "unguarded.py"
    script.write_text(code + "print('top-level ran')\n")
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=True
    )
    # The actor never imports the caller's __main__: the top level ran exactly once.
    assert out.stdout.split() == ["frozen", "top-level", "ran"]


def test_owner_watch_fallback_without_pidfd(
    fixture_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPLAY_ACTOR_OWNER_WATCH", "poll")
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        provider = acquire(fixture_path, owner_pid=owner.pid, timeout=10)
        assert provider.complete(req("hello"))["content"] == "frozen"
        owner.kill()
        owner.wait()
        assert wait_gone(provider.actor_pid)
        with pytest.raises(ActorLost):
            provider.complete(req("hello"))
        provider.release()
    finally:
        owner.kill()
        owner.wait()


def test_actor_does_not_outlive_a_killed_owner(fixture_path: Path) -> None:
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        provider = acquire(fixture_path, owner_pid=owner.pid, timeout=10)
        owner.kill()
        owner.wait()
        assert wait_gone(provider.actor_pid)
        assert is_gone(provider.actor_pid)
        provider.release()
    finally:
        owner.kill()
        owner.wait()


def test_copy_sees_actor_lost_when_the_actor_dies(fixture_path: Path) -> None:
    provider = acquire(fixture_path, timeout=10)
    copy = pickle.loads(pickle.dumps(provider))
    os.kill(provider.actor_pid, signal.SIGKILL)
    with pytest.raises(ActorLost):
        copy.complete(req("hello"))
    copy.release()
    provider.release()
    assert wait_gone(provider.actor_pid)


def test_copy_unpickled_after_release_is_closed(fixture_path: Path) -> None:
    provider = acquire(fixture_path, timeout=10)
    data = pickle.dumps(provider)
    provider.release()
    copy = pickle.loads(data)
    assert copy.closed
    with pytest.raises(ProviderClosed):
        copy.complete(req("hello"))
    with pytest.raises(ProviderClosed):
        pickle.dumps(provider)
