"""An example evaluation: a baseline and a candidate run concurrently, on frozen answers.

    make demo                       # or: .venv/bin/python examples/demo.py
    .venv/bin/python examples/demo.py --write-fixture   # regenerate examples/demo/fixture.jsonl

The orchestrator (this process) starts two run processes, one per variant of a small
support-agent workflow. For each run it acquires a replay provider through a
``Supervisor`` with ``owner_pid=run.pid`` -- so the cursor actor ends with the run, even
if the run is killed -- and sends the handle to the run over a pipe (a handle pickles
into a copy that talks to the same actor). Both runs ask the same requests, including a
retry loop answered by a ``responses`` sequence; the candidate also asks one request the
fixture never recorded, which fails closed with ``ReplayMiss``. The orchestrator prints
the answers side by side, the miss and how to fix it, and both acquisitions' snapshots.

The workflow lives in ``examples/demo/requests.json``; the fixture is generated from it
with ``replay_actor.request_hash`` (hashes are never typed by hand).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shlex
import sys
import time
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, Final

import msgspec

from replay_actor import ReplayError, ReplayProvider, Supervisor, entry_line, request_hash

HERE: Final = Path(__file__).resolve().parent
ROOT: Final = HERE.parent
REQUESTS: Final = HERE / "demo" / "requests.json"
FIXTURE: Final = HERE / "demo" / "fixture.jsonl"
MAX_ATTEMPTS: Final = 5  # the retry loop's budget; the fixture's sequence needs 3
TIMEOUT: Final = 10.0  # seconds: bounds every acquisition, call and hand-off
W: Final = 42  # width of an answer column


class Step(msgspec.Struct, forbid_unknown_fields=True):
    """One model call of the workflow and, for the fixture, its recorded answer(s)."""

    name: str
    request: dict[str, Any]
    response: dict[str, Any] | None = None
    responses: list[dict[str, Any]] | None = None


class NewStep(msgspec.Struct, forbid_unknown_fields=True):
    """The candidate's extra call: deliberately absent from the fixture."""

    name: str
    request: dict[str, Any]
    suggested_content: str


class Workflow(msgspec.Struct, forbid_unknown_fields=True):
    comment: str
    steps: list[Step]
    candidate_only: NewStep


def load_workflow() -> Workflow:
    return msgspec.json.decode(REQUESTS.read_bytes(), type=Workflow)


def render_fixture(workflow: Workflow) -> bytes:
    """The fixture's bytes: one entry per step, hashed from the step's request."""
    lines = []
    for step in workflow.steps:
        digest = request_hash(step.request)
        if step.responses is not None:
            lines.append(entry_line(digest, responses=step.responses))
        else:
            lines.append(entry_line(digest, response=step.response))
    return b"\n".join(lines) + b"\n"


# -- the run process: the application under evaluation ------------------------------------


def show(response: dict[str, Any]) -> str:
    """One line for a response: its text, or the tool call it asks for."""
    calls = response.get("tool_calls") or []
    if calls:
        return f"{calls[0]['name']}({calls[0]['arguments']})"
    return str(response.get("content"))


def ask_until_json(llm: ReplayProvider, request: dict[str, Any]) -> str:
    """The retry loop: ask the same request again until the answer is complete JSON."""
    for attempt in range(1, MAX_ATTEMPTS + 1):
        response = llm.complete(request)
        if response.get("finish_reason") == "stop":
            try:
                reply = json.loads(str(response.get("content")))
            except json.JSONDecodeError:
                continue
            return f"{reply['reply']} (attempt {attempt})"
    return f"no valid JSON after {MAX_ATTEMPTS} attempts"


def run_evaluation(variant: str, channel: Connection) -> None:
    """One run: receive the provider, answer every step, report, wait for the go-ahead.

    It runs in its own process (spawn context); it only touches ``channel``, never the
    orchestrator's terminal, so the output stays in one place.
    """
    workflow = load_workflow()
    if not channel.poll(TIMEOUT):
        return
    llm: ReplayProvider = channel.recv()  # a copy: same actor, same cursors
    answers: dict[str, str] = {}
    miss: dict[str, Any] | None = None
    with llm:  # releases this copy only; the acquisition belongs to the orchestrator
        for step in workflow.steps:
            if step.responses is not None:
                answers[step.name] = ask_until_json(llm, step.request)
            else:
                answers[step.name] = show(llm.complete(step.request))
        if variant == "candidate":
            new = workflow.candidate_only
            try:
                answers[new.name] = show(llm.complete(new.request))
            except ReplayError as exc:  # ReplayMiss: fail closed, never invent an answer
                answers[new.name] = type(exc).__name__
                miss = {
                    "type": type(exc).__name__,
                    "message": str(exc),
                    "request_hash": getattr(exc, "request_hash", None),
                    "step": new.name,
                    "suggested_content": new.suggested_content,
                }
        snapshot = llm.snapshot()
    channel.send({"variant": variant, "answers": answers, "miss": miss, "snapshot": snapshot})
    # Stay alive until told: this run owns its actor, and the orchestrator wants to list
    # both acquisitions (Supervisor.active) while they are still live.
    channel.poll(TIMEOUT)


# -- the orchestrator ---------------------------------------------------------------------


def heading(title: str) -> None:
    print(f"\n{title}\n{'-' * len(title)}")


def clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "\u2026"


def print_answers(workflow: Workflow, results: dict[str, dict[str, Any]]) -> bool:
    heading("Answers")
    base, cand = results["baseline"]["answers"], results["candidate"]["answers"]
    names = [step.name for step in workflow.steps] + [workflow.candidate_only.name]
    print(f"  {'step':<12} {'baseline':<{W}} {'candidate':<{W}} verdict")
    identical = True
    for name in names:
        left, right = base.get(name), cand.get(name)
        if left is None or right is None:
            verdict = "candidate only"
        elif left == right:
            verdict = "identical"
        else:
            verdict, identical = "DIFFERENT", False
        print(
            f"  {name:<12} {clip(left or '(not asked)', W):<{W}} "
            f"{clip(right or '(not asked)', W):<{W}} {verdict}"
        )
    shared = sum(1 for name in names if name in base and name in cand)
    print(f"\n  identical answers: {'yes' if identical else 'NO'} ({shared} shared steps)")
    print("  each run's retry loop read the whole sequence from its own cursor:")
    print("  two acquisitions of one fixture never see each other's positions")
    return identical


def print_miss(miss: dict[str, Any] | None) -> None:
    heading("The candidate's miss (fail closed: no fallback, no network)")
    if miss is None:
        print("  none: every request the candidate asked is in the fixture")
        return
    fixture = FIXTURE.relative_to(ROOT)
    print(f"  step       {miss['step']}")
    print(f"  exception  {miss['type']}")
    print(f"  message    {miss['message']}")
    print("\n  to fix it, add the answer the workflow expects, then rerun:")
    print(
        f"    .venv/bin/replay-actor add {fixture} {miss['request_hash']} "
        f"--content {shlex.quote(miss['suggested_content'])}"
    )
    print("    make demo")
    print(f"  (python examples/demo.py --write-fixture restores the bundled {fixture.name})")


def print_snapshots(active: list[dict[str, Any]], names: dict[int, str]) -> None:
    heading("Snapshots (Supervisor.active(), before shutdown)")
    by_variant = {names.get(item["owner_pid"], "?"): item for item in active}
    variants = [v for v in ("baseline", "candidate") if v in by_variant]
    if not variants:
        print("  no live acquisition")
        return
    snapshots = [by_variant[v]["snapshot"] for v in variants]
    print("  " + f"{'':<20}" + "".join(f"{v:>12}" for v in variants))
    rows: list[tuple[str, list[Any]]] = [
        ("run pid (owner)", [by_variant[v]["owner_pid"] for v in variants]),
        ("actor pid", [by_variant[v]["actor_pid"] for v in variants]),
    ]
    for key in ("entries", "sequence_entries", "responses", "served", "misses", "exhausted"):
        rows.append((key, [snap[key] for snap in snapshots]))
    for label, values in rows:
        print("  " + f"{label:<20}" + "".join(f"{value!s:>12}" for value in values))
    hashes = {snap["fixture_set_hash"] for snap in snapshots}
    same = "same for both runs" if len(hashes) == 1 else "DIFFERENT"
    print(f"  {'fixture_set_hash':<20}{sorted(hashes)[0]}  ({same})")
    print("  (a safe snapshot: no response content, no request hash, no path)")


def wait_for_no_actor(supervisor: Supervisor, within: float) -> int:
    """How many acquisitions are still live once their owners have exited (bounded)."""
    deadline = time.monotonic() + within
    while (live := len(supervisor.active())) and time.monotonic() < deadline:
        time.sleep(0.02)
    return live


def end_runs(
    supervisor: Supervisor,
    runs: dict[str, BaseProcess],
    channels: dict[str, Connection],
    handles: list[ReplayProvider],
) -> int:
    """Tell each run to finish, wait for it, release every handle; the live actors left."""
    for channel in channels.values():
        try:
            channel.send("done")
        except OSError:
            pass  # that run is already gone
    for run in runs.values():
        run.join(TIMEOUT)
        if run.is_alive():
            run.kill()  # our own child, by its handle
            run.join()
    left = wait_for_no_actor(supervisor, within=3.0)
    # Supervisor.active() stops listing an acquisition whose actor has exited, and
    # shutdown() only releases listed ones: release ours explicitly (idempotent).
    for handle in handles:
        handle.release()
    for channel in channels.values():
        channel.close()
    return left


def main() -> int:
    if sys.argv[1:] == ["--write-fixture"]:
        FIXTURE.write_bytes(render_fixture(load_workflow()))
        print(f"wrote {FIXTURE.relative_to(ROOT)}")
        return 0
    workflow = load_workflow()
    if FIXTURE.read_bytes() != render_fixture(workflow):
        print(f"note: {FIXTURE.relative_to(ROOT)} differs from the generated one (edited?)")
    started = time.monotonic()
    print("replay-actor demo: a baseline and a candidate evaluation, run concurrently")
    print(f"  fixture  {FIXTURE.relative_to(ROOT)}  ({len(workflow.steps)} entries)")

    # A private context: spawn starts each run in a fresh interpreter (never fork with
    # threads around), and the global start method is left alone.
    context = multiprocessing.get_context("spawn")
    runs: dict[str, BaseProcess] = {}
    channels: dict[str, Connection] = {}
    results: dict[str, dict[str, Any]] = {}
    handles: list[ReplayProvider] = []
    status = 1
    with Supervisor(max_actors=2) as supervisor:
        try:
            for variant in ("baseline", "candidate"):
                ours, theirs = context.Pipe()
                process = context.Process(
                    target=run_evaluation, args=(variant, theirs), name=variant
                )
                process.start()
                theirs.close()
                runs[variant], channels[variant] = process, ours
            for variant, run in runs.items():
                # The run owns the acquisition: if it dies, its actor exits with it.
                llm = supervisor.acquire(FIXTURE, owner_pid=run.pid, timeout=TIMEOUT)
                handles.append(llm)
                channels[variant].send(llm)  # pickles into a copy sharing the cursors
            for variant, channel in channels.items():
                if not channel.poll(TIMEOUT):
                    raise RuntimeError(f"the {variant} run did not report in time")
                results[variant] = channel.recv()
            owners = {run.pid: variant for variant, run in runs.items() if run.pid is not None}
            identical = print_answers(workflow, results)
            print_miss(results["candidate"]["miss"])
            print_snapshots(supervisor.active(), owners)
            status = 0 if identical else 1
        finally:
            # Clean up before printing anything, so a closed stdout cannot skip it.
            left = end_runs(supervisor, runs, channels, handles)
    # Supervisor.__exit__ called shutdown(): every acquisition is released and reaped.
    heading("Cleanup")
    for variant, run in runs.items():
        print(f"  {variant:<10} run exited with code {run.exitcode}")
    print(f"  live actors after the runs exited: {left} (each ended with its owner)")
    print(f"  supervisor shut down; done in {time.monotonic() - started:.1f} s")
    return status


if __name__ == "__main__":
    os.chdir(ROOT)  # so the printed relative paths work as typed
    sys.exit(main())
