"""The Ray backend (docs/ray.md): one acquisition shared by Ray tasks, on a local cluster
that this module starts and stops itself.

The cluster is started once per module: two Ray nodes on this machine (Ray's own
``cluster_utils``, in a temporary directory of ours), so handles cross nodes; a driver
that is SIGKILLed is a separate process connecting to it. Ray keeps worker processes between
tasks by design, so the per-test ``no_leaks`` check does not fit here; instead the
module's teardown shuts the cluster down and asserts that none of its processes (GCS,
raylet, workers, agents) outlived it, and each test that starts a process of its own
waits for it and checks it is gone.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

ray: Any = pytest.importorskip("ray")

from replay_actor import (  # noqa: E402
    ActorLost,
    Ceilings,
    FixtureError,
    Provider,
    ProviderClosed,
    ReplayError,
    ReplayMiss,
    RequestError,
    SequenceExhausted,
    entry_line,
    open_provider,
    request_hash,
)
from replay_actor.ray import RayReplayProvider, acquire  # noqa: E402
from tests.support.frame_locals import captured  # noqa: E402
from tests.support.paths import ROOT  # noqa: E402
from tests.support.raycluster import Cluster, local_cluster  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.timeout(90)]

SEQUENCE = 120  # elements in the "drain" sequence
HASH = re.compile(r"sha256:[0-9a-f]{64}")


def req(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def fixture_bytes() -> bytes:
    lines = [
        entry_line(request_hash(req("hello")), response={"content": "frozen"}),
        entry_line(
            request_hash(req("retry")),
            responses=[{"content": "first"}, {"content": "second"}, {"content": "third"}],
        ),
        entry_line(request_hash(req("drain")), responses=[{"i": i} for i in range(SEQUENCE)]),
        entry_line(request_hash(req("unused")), response={"content": "never asked"}),
    ]
    return b"\n".join(lines) + b"\n"


# -- the cluster --------------------------------------------------------------------------


#: A custom resource only the second node has: tasks asking for it run there.
SECOND_NODE = "replay_actor_second_node"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """Two Ray nodes on this machine (a head with 2 CPUs, a second node with 1), so a
    handle really crosses nodes; Ray's own ``cluster_utils`` starts and stops them."""
    with local_cluster(
        head_cpus=2, second_node={"num_cpus": 1, "resources": {SECOND_NODE: 1}}
    ) as running:
        yield running


@pytest.fixture
def fixture_path(tmp_path: Path, cluster: Cluster) -> Path:
    path = tmp_path / "fixture.jsonl"
    path.write_bytes(fixture_bytes())
    return path


def actor_info(actor_id: str) -> dict[str, Any]:
    """The GCS actor table's row for an actor (no dashboard needed)."""
    from ray._private import state

    info: dict[str, Any] = state.actors(actor_id)
    return info


def death_reason(actor_id: str) -> str:
    """Why Ray ended an actor: ``OWNER_DIED``, ``RAY_KILL``, ``WORKER_DIED``, ..."""
    protocol: Any = importlib.import_module("ray.core.generated.common_pb2")
    context = actor_info(actor_id)["DeathCause"].actor_died_error_context
    name: str = protocol.ActorDiedErrorContext.Reason.Name(context.reason)
    return name


def wait_dead(actor_id: str, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if actor_info(actor_id).get("State") == "DEAD":
            return True
        time.sleep(0.05)
    return actor_info(actor_id).get("State") == "DEAD"


def live_cursor_actors() -> set[str]:
    from ray._private import state

    table: dict[str, dict[str, Any]] = state.actors(actor_state_name="ALIVE")
    return {aid for aid, row in table.items() if row["ActorClassName"] == "CursorActor"}


def remote(**options: Any) -> Callable[[Any], Any]:
    """``ray.remote(**options)`` with a type mypy can follow (the handle is ``Any``)."""

    def wrap(target: Any) -> Any:
        return ray.remote(**options)(target)

    return wrap


class _Gate:
    """A barrier for tasks: they ``arrive``, then ``wait`` until the test opens it."""

    def __init__(self) -> None:
        self.arrived = 0
        self.opened = asyncio.Event()
        self.notes: list[str] = []

    async def arrive(self) -> None:
        self.arrived += 1

    async def count(self) -> int:
        return self.arrived

    async def wait(self) -> None:
        await self.opened.wait()

    async def open(self) -> None:
        self.opened.set()

    async def note(self, text: str) -> None:
        self.notes.append(text)

    async def read(self) -> list[str]:
        return self.notes


Gate: Any = remote(num_cpus=0)(_Gate)


def wait_arrived(gate: Any, n: int, within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while ray.get(gate.count.remote()) < n:
        assert time.monotonic() < deadline, "the tasks did not all start"
        time.sleep(0.02)


def open_when_all_arrived(gate: Any, n: int) -> None:
    wait_arrived(gate, n)
    ray.get(gate.open.remote())


def outcome(call: Callable[[], Any]) -> tuple[str, str]:
    """(exception class name, message), or ("ok", repr of the result)."""
    try:
        return "ok", repr(call())
    except ReplayError as exc:
        return type(exc).__name__, str(exc)


# -- the tasks ----------------------------------------------------------------------------


@remote(num_cpus=0.25)
def drain(llm: RayReplayProvider, gate: Any) -> tuple[list[int], str, str]:
    ray.get(gate.arrive.remote())
    ray.get(gate.wait.remote())
    got: list[int] = []
    while True:
        try:
            got.append(llm.complete(req("drain"))["i"])
        except SequenceExhausted as exc:
            return got, type(exc).__name__, str(exc)


@remote(num_cpus=0.25)
def call(llm: RayReplayProvider, text: str) -> tuple[str, str]:
    return outcome(lambda: llm.complete(req(text)))


@remote(num_cpus=0.25)
def raising_call(llm: RayReplayProvider, text: str) -> dict[str, Any]:
    return llm.complete(req(text))


@remote(num_cpus=0.25)
def call_after_gate(llm: RayReplayProvider, gate: Any) -> tuple[tuple[str, str], tuple[str, str]]:
    before = outcome(lambda: llm.complete(req("hello")))
    ray.get(gate.arrive.remote())
    ray.get(gate.wait.remote())
    return before, outcome(lambda: llm.complete(req("hello")))


@remote(num_cpus=0.25)
def snapshot_in_task(llm: RayReplayProvider) -> dict[str, Any]:
    return llm.snapshot()


@remote(num_cpus=0.25)
def release_copy(llm: RayReplayProvider) -> tuple[str, str]:
    llm.release()
    return outcome(lambda: llm.complete(req("hello")))


@remote(num_cpus=0.25)
def async_calls(llm: RayReplayProvider) -> list[Any]:
    async def main() -> list[Any]:
        return list(await asyncio.gather(*(llm.acomplete(req("retry")) for _ in range(3))))

    return asyncio.run(main())


@remote(num_cpus=0.25)
def print_marker(marker: str) -> None:
    print(marker, flush=True)  # a worker's stdout goes to its log file


@remote(num_cpus=0.25, max_retries=0)
def acquire_then_die(path: str, gate: Any) -> None:
    llm = acquire(path, timeout=30)
    ray.get(gate.note.remote(llm.actor_id))
    os.kill(os.getpid(), signal.SIGKILL)


@remote(num_cpus=0.25)
def where_and_call(llm: RayReplayProvider, text: str) -> tuple[str, tuple[str, str]]:
    node: str = ray.get_runtime_context().get_node_id()
    return node, outcome(lambda: llm.complete(req(text)))


@remote(num_cpus=0.25)
def pass_on(llm: RayReplayProvider) -> tuple[str, tuple[str, str]]:
    """A copy handed on again, to a task on the second node."""
    on_second = where_and_call.options(resources={SECOND_NODE: 0.1})
    result: tuple[str, tuple[str, str]] = ray.get(on_second.remote(llm, "retry"))
    return result


@remote(num_cpus=0.25)
def acquire_here(data: bytes) -> tuple[str, str, tuple[str, str]]:
    """Acquire inside a task: its cursor actor runs on the task's node, owned by it."""
    with acquire(fixture_bytes=data, timeout=30) as llm:
        node: str = ray.get_runtime_context().get_node_id()
        return (
            node,
            actor_info(llm.actor_id)["Address"]["NodeID"],
            outcome(lambda: llm.complete(req("hello"))),
        )


class _EvalWorker:
    """A long-lived Ray actor holding a copy of the handle, as an eval worker would."""

    def __init__(self, llm: RayReplayProvider) -> None:
        self.llm = llm

    def run(self, text: str) -> tuple[str, str]:
        return outcome(lambda: self.llm.complete(req(text)))


EvalWorker: Any = remote(num_cpus=0, resources={SECOND_NODE: 0.1})(_EvalWorker)


# -- exactly once, misses, snapshots ------------------------------------------------------


def test_four_tasks_drain_one_sequence_exactly_once(fixture_path: Path) -> None:
    with acquire(fixture_path, timeout=30) as llm:
        gate = Gate.remote()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        head = ray.get_runtime_context().get_node_id()
        on_head = drain.options(scheduling_strategy=NodeAffinitySchedulingStrategy(head, False))
        on_second = drain.options(resources={SECOND_NODE: 0.1})
        # Four tasks, two on each node, start together on the gate.
        tasks = [(on_head if i % 2 else on_second).remote(llm, gate) for i in range(4)]
        open_when_all_arrived(gate, 4)
        results = ray.get(tasks, timeout=60)
        taken = sorted(i for got, _, _ in results for i in got)
        assert taken == list(range(SEQUENCE))  # every element once, none twice
        digest = request_hash(req("drain"))
        for got, kind, message in results:
            assert got == sorted(got)  # each task saw the sequence in order
            assert kind == "SequenceExhausted"
            assert message == f"replay sequence exhausted for this request (request_hash: {digest})"
        with pytest.raises(SequenceExhausted) as exhausted:
            llm.complete(req("drain"))
        assert exhausted.value.request_hash == digest
        snap = llm.snapshot()
        assert (snap["served"], snap["exhausted"]) == (SEQUENCE, 5)
        ray.kill(gate)


def test_a_miss_has_the_exact_message_in_a_task_and_here(fixture_path: Path) -> None:
    digest = request_hash(req("not recorded"))
    message = f"no replay fixture matches this request (request_hash: {digest})"
    with acquire(fixture_path, timeout=30) as llm:
        assert ray.get(call.remote(llm, "not recorded")) == ("ReplayMiss", message)
        with pytest.raises(ReplayMiss) as miss:
            llm.complete(req("not recorded"))
        assert str(miss.value) == message
        assert miss.value.request_hash == digest
        assert miss.value.__cause__ is None and miss.value.__context__ is None
        # Raised in a task and not caught there: Ray's wrapping is still a ReplayMiss.
        with pytest.raises(ReplayMiss) as wrapped:
            ray.get(raising_call.remote(llm, "not recorded"))
        assert message in str(wrapped.value)
        assert llm.inspect()["misses"] == [{"request_hash": digest, "count": 3}]


def test_snapshot_counts_calls_from_every_task(fixture_path: Path) -> None:
    with acquire(fixture_path, timeout=30) as llm:
        texts = ["hello", "hello", "retry", "retry", "retry", "retry", "nope", "nope"]
        got = ray.get([call.remote(llm, t) for t in texts])
        assert (
            sorted(kind for kind, _ in got)
            == ["ReplayMiss"] * 2 + ["SequenceExhausted"] + ["ok"] * 5
        )
        snap = llm.snapshot()
        assert ray.get(snapshot_in_task.remote(llm)) == snap
        assert (snap["served"], snap["misses"], snap["exhausted"]) == (5, 2, 1)
        assert (snap["kind"], snap["backend"], snap["entries"]) == ("replay", "ray", 4)
        assert snap["fixture_set_hash"].startswith("sha256:")
        inspection = llm.inspect()
        assert inspection["unused_entries"] == 2  # "drain" and "unused"
        assert inspection["exhausted"] == [
            {"request_hash": request_hash(req("retry")), "served": 3}
        ]


def test_threads_and_asyncio_tasks_share_one_handle_exactly_once(fixture_path: Path) -> None:
    with acquire(fixture_path, timeout=30) as llm:
        taken: list[int] = []
        lock = threading.Lock()
        barrier = threading.Barrier(8)

        def worker() -> None:
            barrier.wait()
            while True:
                try:
                    got = llm.complete(req("drain"))["i"]
                except SequenceExhausted:
                    return
                with lock:
                    taken.append(got)

        threads = [threading.Thread(target=worker) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert sorted(taken) == list(range(SEQUENCE))

    with acquire(fixture_path, timeout=30) as llm:

        async def main() -> list[Any]:
            calls = [llm.acomplete(req("drain")) for _ in range(SEQUENCE + 4)]
            return list(await asyncio.gather(*calls, return_exceptions=True))

        results = asyncio.run(main())
        answers = sorted(r["i"] for r in results if isinstance(r, dict))
        assert answers == list(range(SEQUENCE))
        assert [type(r).__name__ for r in results if not isinstance(r, dict)] == [
            "SequenceExhausted"
        ] * 4


def test_acomplete_and_complete_many(fixture_path: Path) -> None:
    with acquire(fixture_path, timeout=30) as llm:
        answers = ray.get(async_calls.remote(llm))
        assert sorted(a["content"] for a in answers) == ["first", "second", "third"]
        assert asyncio.run(llm.acomplete(req("hello"))) == {"content": "frozen"}
        batch = llm.complete_many([req("hello"), req("retry"), {"messages": []}, req("x")])
        assert batch[0] == {"content": "frozen"}
        assert isinstance(batch[1], SequenceExhausted)
        assert isinstance(batch[2], RequestError)
        assert isinstance(batch[3], ReplayMiss)
        assert str(batch[3]).endswith(f"(request_hash: {request_hash(req('x'))})")
        first = llm.complete(req("hello"))
        first["content"] = "changed"
        assert llm.complete(req("hello")) == {"content": "frozen"}  # fresh dicts


def test_the_handle_crosses_nodes_into_tasks_and_actors(fixture_path: Path) -> None:
    here = ray.get_runtime_context().get_node_id()
    with acquire(fixture_path, timeout=30) as llm:
        # The cursor actor runs on the acquirer's node.
        assert actor_info(llm.actor_id)["Address"]["NodeID"] == here
        on_second = where_and_call.options(resources={SECOND_NODE: 0.1})
        node, answer = ray.get(on_second.remote(llm, "retry"))
        assert node != here and answer == ("ok", repr({"content": "first"}))
        node, answer = ray.get(pass_on.remote(llm))  # a copy of a copy
        assert node != here and answer == ("ok", repr({"content": "second"}))
        worker = EvalWorker.remote(llm)
        assert ray.get(worker.run.remote("retry")) == ("ok", repr({"content": "third"}))
        assert ray.get(worker.run.remote("retry"))[0] == "SequenceExhausted"
        assert llm.snapshot()["served"] == 3
        ray.kill(worker)
    # Acquired by a task on the second node: its cursor actor runs there too.
    task_node, actor_node, answer = ray.get(
        acquire_here.options(resources={SECOND_NODE: 0.1}).remote(fixture_bytes())
    )
    assert task_node == actor_node != here
    assert answer == ("ok", repr({"content": "frozen"}))


# -- fixtures: bytes, rejections ----------------------------------------------------------


def test_fixture_bytes_load_without_a_shared_path(cluster: Cluster) -> None:
    with acquire(fixture_bytes=fixture_bytes(), timeout=30) as llm:
        assert ray.get(call.remote(llm, "hello")) == ("ok", repr({"content": "frozen"}))
        assert llm.snapshot()["entries"] == 4


def test_a_rejected_fixture_is_reason_and_line_only(tmp_path: Path, cluster: Cluster) -> None:
    bad = fixture_bytes() + b'\n{"schema_version":1,"SECRET-KEY-41":"SECRET-VALUE-41"}\n'
    path = tmp_path / "bad.jsonl"
    path.write_bytes(bad)
    before = live_cursor_actors()
    attempts: list[Callable[[], Any]] = [
        lambda: acquire(path, timeout=30),
        lambda: acquire(fixture_bytes=bad),
    ]
    for attempt in attempts:
        with pytest.raises(FixtureError) as info:
            attempt()
        assert (info.value.reason, info.value.line) == ("unknown_key", 6)
        assert str(info.value) == "fixture rejected: unknown_key at line 6"
        assert "SECRET" not in _all_text(info.value)
        assert info.value.__cause__ is None and info.value.__context__ is None
    with pytest.raises(FixtureError) as missing:
        acquire(tmp_path / "nope.jsonl")
    assert (missing.value.reason, missing.value.line) == ("file_missing", None)
    with pytest.raises(FixtureError) as small:
        acquire(path, ceilings=Ceilings(max_entries=2))
    assert (small.value.reason, small.value.line) == ("too_many_entries", 3)
    with pytest.raises(FixtureError) as large:
        acquire(fixture_bytes=bad, ceilings=Ceilings(max_file_bytes=10))
    assert (large.value.reason, large.value.line) == ("file_too_large", None)
    # A rejected acquisition leaves no cursor actor running.
    deadline = time.monotonic() + 10
    while live_cursor_actors() - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert live_cursor_actors() - before == set()


def test_an_acquisition_that_outlasts_its_timeout_is_actor_lost(fixture_path: Path) -> None:
    before = live_cursor_actors()
    with pytest.raises(ActorLost) as lost:
        acquire(fixture_path, timeout=0.001)  # no actor comes up within a millisecond
    assert str(lost.value) == "the cursor actor did not come up in time"
    # The actor that was on its way is killed, not left behind.
    deadline = time.monotonic() + 10
    while live_cursor_actors() - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert live_cursor_actors() - before == set()


def test_bad_arguments_are_refused(cluster: Cluster, fixture_path: Path) -> None:
    with pytest.raises(ValueError, match="exactly one"):
        acquire()
    with pytest.raises(ValueError, match="exactly one"):
        acquire(fixture_path, fixture_bytes=b"")
    with pytest.raises(ValueError, match="timeout"):
        acquire(fixture_path, timeout=0)


# -- privacy ------------------------------------------------------------------------------


def _all_text(exc: BaseException) -> str:
    parts = [str(exc), repr(exc), repr(exc.args), repr(vars(exc))]
    parts.append("".join(traceback.format_exception(exc)))
    parts.append(repr(exc.__cause__) + repr(exc.__context__))
    return "\n".join(parts)


def _logs_text(session_dir: str) -> str:
    chunks = []
    for folder, _, files in os.walk(Path(session_dir) / "logs"):
        for name in files:
            try:
                chunks.append((Path(folder) / name).read_bytes().decode("utf-8", "replace"))
            except OSError:
                continue
    return "\n".join(chunks)


def test_private_mode_keeps_hashes_out_of_errors_and_ray_logs(
    fixture_path: Path, cluster: Cluster
) -> None:
    secret = "PLANTED-SECRET-7d1f prompt"
    digest = request_hash(req(secret))
    retry = request_hash(req("retry"))
    with acquire(fixture_path, private=True, timeout=30) as llm:
        assert llm.private
        # Caught inside a task: the same type and the private message.
        assert ray.get(call.remote(llm, secret)) == (
            "ReplayMiss",
            "no replay fixture matches this request",
        )
        # Not caught: Ray wraps it (RayTaskError), the task's traceback text included.
        with pytest.raises(ReplayMiss) as wrapped:
            ray.get(raising_call.remote(llm, secret))
        ray.get([call.remote(llm, "retry") for _ in range(3)])
        with pytest.raises(SequenceExhausted) as wrapped_exhausted:
            ray.get(raising_call.remote(llm, "retry"))
        with pytest.raises(ReplayMiss) as here:
            llm.complete(req(secret))
        assert str(here.value) == "no replay fixture matches this request"
        for exc in (wrapped.value, wrapped_exhausted.value, here.value):
            assert getattr(exc, "request_hash", None) is None
            text = _all_text(exc)
            assert "sha256:" not in text and digest not in text and retry not in text
        # The owner-only channel has the hashes.
        inspection = llm.inspect()
        assert {m["request_hash"] for m in inspection["misses"]} == {digest}
    # A control: a line a worker prints does reach the logs this test reads.
    marker = f"LOG-CONTROL-{os.urandom(8).hex()}"
    ray.get(print_marker.remote(marker))
    deadline = time.monotonic() + 10
    while marker not in (logs := _logs_text(cluster.session_dir)):
        assert time.monotonic() < deadline, "the workers' logs were not found"
        time.sleep(0.1)
    assert digest[7:] not in logs and retry[7:] not in logs
    assert "PLANTED-SECRET" not in logs


def test_private_misses_and_exhaustion_keep_the_hash_out_of_frame_locals(
    fixture_path: Path,
) -> None:
    secret = "PLANTED-SECRET-locals-3b9e"
    digests = [request_hash(req(secret)), request_hash(req("retry"))]
    with acquire(fixture_path, private=True, timeout=30) as llm:
        llm.complete_many([req("retry")] * 3)  # the sequence is used up
        reports = [
            captured(lambda: llm.complete(req(secret))),
            captured(lambda: asyncio.run(llm.acomplete(req(secret)))),
            captured(lambda: llm.complete(req("retry"))),
            captured(lambda: asyncio.run(llm.acomplete(req("retry")))),
        ]
    kinds = ["ReplayMiss", "ReplayMiss", "SequenceExhausted", "SequenceExhausted"]
    for report, kind in zip(reports, kinds, strict=True):
        assert kind in report  # the control: the error and its frames are in the report
        assert "complete" in report
        for digest in digests:
            assert digest not in report and digest[7:] not in report


# -- lifecycle: release, loss, ownership --------------------------------------------------


def test_release_ends_the_acquisition_for_every_task(fixture_path: Path) -> None:
    llm = acquire(fixture_path, timeout=30)
    gate = Gate.remote()
    tasks = [call_after_gate.remote(llm, gate) for _ in range(4)]
    wait_arrived(gate, 4)  # each task has made a call through its copy
    llm.release()
    assert llm.closed
    assert wait_dead(llm.actor_id, 10)
    assert death_reason(llm.actor_id) == "RAY_KILL"
    ray.get(gate.open.remote())
    for before, after in ray.get(tasks, timeout=60):
        assert before == ("ok", repr({"content": "frozen"}))
        assert after == ("ProviderClosed", "the acquisition was released by its acquirer")
    assert outcome(lambda: llm.complete(req("hello"))) == (
        "ProviderClosed",
        "this provider was released",
    )
    assert outcome(llm.snapshot)[0] == "ProviderClosed"
    llm.release()  # idempotent
    ray.kill(gate)


def test_release_on_a_copy_closes_only_the_copy(fixture_path: Path) -> None:
    with acquire(fixture_path, timeout=30) as llm:
        assert ray.get(release_copy.remote(llm)) == ("ProviderClosed", "this provider was released")
        assert llm.complete(req("hello")) == {"content": "frozen"}
        assert actor_info(llm.actor_id)["State"] == "ALIVE"
    with pytest.raises(ProviderClosed):
        llm.__reduce__()  # a released handle is not passed on


def test_calls_racing_a_release_are_provider_closed(fixture_path: Path) -> None:
    llm = acquire(fixture_path, timeout=30)
    try:
        # The first half of release(): the actor stops serving before it is killed, so
        # a call that reaches it in between is refused as released, not answered.
        ray.get(llm._actor.release.remote())
        assert ray.get(call.remote(llm, "hello")) == (
            "ProviderClosed",
            "the acquisition was released by its acquirer",
        )
        assert outcome(llm.snapshot) == (
            "ProviderClosed",
            "the acquisition was released by its acquirer",
        )
        assert llm.closed
        # A closed handle says so before judging the request.
        assert outcome(lambda: llm.complete({"messages": []}))[0] == "ProviderClosed"
    finally:
        llm.release()
    assert wait_dead(llm.actor_id, 10)


def _actor_pid(actor_id: str) -> int:
    pid: int = actor_info(actor_id)["Pid"]
    assert pid > 0
    return pid


def test_a_dead_actor_is_actor_lost_and_a_silent_one_times_out(fixture_path: Path) -> None:
    llm = acquire(fixture_path, timeout=2)
    try:
        pid = _actor_pid(llm.actor_id)
        os.kill(pid, signal.SIGSTOP)  # the actor's worker process, started for this test
        try:
            started = time.monotonic()
            assert outcome(lambda: llm.complete(req("hello"))) == (
                "ActorLost",
                f"the cursor actor (ray actor {llm.actor_id}) did not answer in time",
            )
            assert time.monotonic() - started < 10
            with pytest.raises(ActorLost, match="lost earlier"):
                llm.complete(req("hello"))
        finally:
            os.kill(pid, signal.SIGCONT)
    finally:
        llm.release()
    assert wait_dead(llm.actor_id, 10)

    other = acquire(fixture_path, timeout=30)
    try:
        os.kill(_actor_pid(other.actor_id), signal.SIGKILL)
        assert wait_dead(other.actor_id, 10)
        with pytest.raises(ActorLost) as lost:
            other.complete(req("hello"))
        assert str(lost.value) == f"the cursor actor (ray actor {other.actor_id}) died"
    finally:
        other.release()


def test_a_killed_task_leaves_no_cursor_actor(fixture_path: Path) -> None:
    gate = Gate.remote()
    with pytest.raises(ray.exceptions.RayError):
        ray.get(acquire_then_die.remote(str(fixture_path), gate), timeout=60)
    (actor_id,) = ray.get(gate.read.remote())
    assert wait_dead(actor_id, 30)
    assert death_reason(actor_id) == "OWNER_DIED"
    ray.kill(gate)


_DRIVER = textwrap.dedent(
    """
    import sys, time
    import ray
    from replay_actor.ray import acquire
    ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
    llm = acquire(sys.argv[2], timeout=30)
    assert llm.complete({"messages": [{"role": "user", "content": "hello"}]})
    print(llm.actor_id, flush=True)
    time.sleep(120)
    """
)


def test_a_sigkilled_driver_leaves_no_cursor_actor(fixture_path: Path, cluster: Cluster) -> None:
    driver = subprocess.Popen(
        [sys.executable, "-c", _DRIVER, cluster.gcs_address, str(fixture_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert driver.stdout is not None
        actor_id = driver.stdout.readline().strip()
        assert re.fullmatch(r"[0-9a-f]+", actor_id), driver.stderr.read() if driver.stderr else ""
        assert actor_info(actor_id)["State"] == "ALIVE"
        killed = time.monotonic()
        driver.send_signal(signal.SIGKILL)
        driver.wait(10)
        assert wait_dead(actor_id, 30)
        assert death_reason(actor_id) == "OWNER_DIED"
        # Reported for the record: how long Ray took to end the orphaned actor.
        print(f"cursor actor DEAD {time.monotonic() - killed:.2f} s after the driver's SIGKILL")
    finally:
        if driver.poll() is None:
            driver.kill()  # ours, by PID
            driver.wait(10)
        for stream in (driver.stdout, driver.stderr):
            if stream is not None:
                stream.close()


_OUTSIDE_RAY = textwrap.dedent(
    """
    import sys
    import ray
    from replay_actor import ActorLost, ReplayError
    from replay_actor.ray import acquire
    try:
        acquire(sys.argv[2])
    except ReplayError as exc:
        print("before init:", exc)
    ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
    llm = acquire(sys.argv[2], timeout=30)
    ray.shutdown()  # leaves the cluster (it is not this process's to stop)
    try:
        llm.complete({"messages": [{"role": "user", "content": "hello"}]})
    except ActorLost as exc:
        print("after shutdown:", exc)
    llm.release()  # never raises
    print("released; ray initialized again:", ray.is_initialized())
    print(llm.actor_id)
    """
)


def test_outside_a_ray_session_calls_fail_clearly(fixture_path: Path, cluster: Cluster) -> None:
    result = subprocess.run(
        [sys.executable, "-c", _OUTSIDE_RAY, cluster.gcs_address, str(fixture_path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    actor_id = lines[3]
    assert lines[:3] == [
        "before init: Ray is not initialized in this process: call ray.init() first",
        f"after shutdown: the cursor actor (ray actor {actor_id}) is out of reach: "
        "Ray is not running here",
        "released; ray initialized again: False",
    ]
    assert wait_dead(actor_id, 30)  # its owner left the cluster: Ray ended the actor


# -- packaging ----------------------------------------------------------------------------


def test_the_core_never_imports_ray() -> None:
    code = (
        "import sys, replay_actor, replay_actor.ray\n"
        "from replay_actor import acquire, request_hash\n"
        "assert 'ray' not in sys.modules, 'ray imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60, cwd=ROOT)


def test_without_ray_acquire_is_a_clear_replay_error(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "sys.modules['ray'] = None  # as if Ray were not installed\n"
        "from replay_actor import ReplayError\n"
        "from replay_actor.ray import acquire\n"
        "try:\n"
        "    acquire('fixture.jsonl')\n"
        "except ReplayError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, timeout=60, capture_output=True, text=True
    ).stdout
    assert out.strip() == (
        "the Ray backend needs Ray: install replay-actor[ray] (pip install 'replay-actor[ray]')"
    )


# -- the manifest -------------------------------------------------------------------------


def test_a_manifest_with_backend_ray_opens_a_ray_provider(
    fixture_path: Path, tmp_path: Path
) -> None:
    manifest = tmp_path / "eval.toml"
    manifest.write_text(
        f'[provider]\nkind = "replay"\nbackend = "ray"\nfixture = "{fixture_path.name}"\n'
        'data = "private"\ntimeout = 20\n[provider.ceilings]\nmax_entries = 10\n'
    )
    with open_provider(manifest) as llm:
        assert isinstance(llm, RayReplayProvider)
        assert isinstance(llm, Provider)  # what the SDK transports and integrations take
        assert llm.private
        assert ray.get(call.remote(llm, "hello")) == ("ok", repr({"content": "frozen"}))
        assert ray.get(call.remote(llm, "nope")) == (
            "ReplayMiss",
            "no replay fixture matches this request",
        )
        snap = llm.snapshot()
        assert (snap["backend"], snap["ceilings"]["max_entries"]) == ("ray", 10)
    assert llm.closed
    assert wait_dead(llm.actor_id, 10)


# -- the documentation's example ----------------------------------------------------------

MARK = "REPLAY_ACTOR_RAY_DOC_MARK"


def _marked(token: str) -> list[psutil.Process]:
    """Live processes that inherited this run's marker (the sample and its cluster)."""
    found = []
    for proc in psutil.process_iter(["status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and proc.environ().get(MARK) == token:
                found.append(proc)
        except psutil.Error:
            continue
    return found


@pytest.mark.timeout(150)
def test_the_example_in_docs_ray_runs_as_written(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "ray.md").read_text(encoding="utf-8")
    (sample,) = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    script = tmp_path / "sample.py"
    script.write_text(sample)
    token = os.urandom(8).hex()
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=ROOT,
        env={**os.environ, MARK: token},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    try:
        assert result.returncode == 0, result.stdout + result.stderr
        lines = result.stdout.splitlines()
        assert lines[0] == "triage    billing"
        assert lines[1] == "lookup    find_invoices"
        assert lines[2].startswith("draft     ")
        workflow = json.loads((ROOT / "examples/demo/requests.json").read_text())
        digest = request_hash(workflow["candidate_only"]["request"])
        assert lines[3] == (
            f"new step  ReplayMiss: no replay fixture matches this request (request_hash: {digest})"
        )
        assert lines[4:] == ["served 3, misses 1"]
    finally:
        deadline = time.monotonic() + 20
        while (left := _marked(token)) and time.monotonic() < deadline:
            time.sleep(0.1)
        for proc in left:  # started by this test's sample, stopped by PID
            proc.kill()
    assert left == [], f"the sample's Ray processes outlived it: {[p.pid for p in left]}"
