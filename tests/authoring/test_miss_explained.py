"""A miss explains itself: ``ReplayMiss.nearest`` in normal mode, the inspection record in
private mode (where nothing else may learn anything), and record mode writes the sidecar
that makes it possible. Also: ``inspection_served`` and coverage over real runs."""

from __future__ import annotations

import copy
import json
import logging
import multiprocessing
import os
import pickle
import traceback
from pathlib import Path
from typing import Any

import pytest

from replay_actor import (
    InvalidArgument,
    ManifestError,
    ReplayMiss,
    acquire,
    entry_line,
    load_fixture,
    request_hash,
)
from replay_actor._request import canonical_request
from replay_actor.authoring.coverage import coverage
from replay_actor.files.sidecar import SidecarWriter, sidecar_path
from replay_actor.manifest import open_provider
from tests.support.chat_server import ChatServer
from tests.support.frontdoor_util import neutral, write_fixture

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(60)]

SECRET = "SECRET-PLANTED-7d1e"

# The secret is in the recorded request only: the sidecar holds it, the caller does not.
RECORDED: dict[str, Any] = {
    "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": f"Weather in Paris? ({SECRET})"},
    ],
    "params": {"temperature": 0.2},
}
MISSING = copy.deepcopy(RECORDED)
MISSING["messages"][1]["content"] = "Weather in Rome?"
MISSING["params"]["temperature"] = 0.7
FIRST_LINE = f"no replay fixture matches this request (request_hash: {request_hash(MISSING)})"


@pytest.fixture
def fixture(tmp_path: Path) -> Path:
    path = tmp_path / "fx.jsonl"
    path.write_bytes(entry_line(request_hash(RECORDED), response={"content": "sunny"}) + b"\n")
    SidecarWriter(path).append(request_hash(RECORDED), canonical_request(RECORDED))
    return path


def test_a_miss_names_the_nearest_request_and_the_paths(fixture: Path) -> None:
    with acquire(fixture, timeout=10) as llm:
        assert llm.complete(RECORDED) == {"content": "sunny"}
        with pytest.raises(ReplayMiss) as info:
            llm.complete(MISSING)
    miss = info.value
    assert miss.request_hash == request_hash(MISSING)
    assert miss.nearest == {
        "request_hash": request_hash(RECORDED),
        "paths": ["messages[1].content", "params.temperature"],
    }
    first, second = str(miss).split("\n")
    assert first == FIRST_LINE
    assert second == (
        f"nearest recorded request {request_hash(RECORDED)} differs at: "
        "messages[1].content, params.temperature"
    )
    # values stay out of the exception: the recorded prompt is not the caller's to see
    assert "Paris" not in str(miss) and SECRET not in repr(vars(miss))
    copy_ = pickle.loads(pickle.dumps(miss))
    assert (str(copy_), copy_.nearest) == (str(miss), miss.nearest)


def test_without_a_sidecar_nearest_is_none_and_the_message_unchanged(fixture: Path) -> None:
    Path(sidecar_path(fixture)).unlink()
    with acquire(fixture, timeout=10) as llm, pytest.raises(ReplayMiss) as info:
        llm.complete(MISSING)
    assert info.value.nearest is None
    assert str(info.value) == FIRST_LINE


def test_a_corrupt_sidecar_does_not_replace_the_miss(fixture: Path) -> None:
    Path(sidecar_path(fixture)).write_bytes(b"{not json}\n")
    with acquire(fixture, timeout=10) as llm, pytest.raises(ReplayMiss) as info:
        llm.complete(MISSING)
    assert info.value.nearest is None and str(info.value) == FIRST_LINE


def _explain_in_child(llm: Any, out: Any) -> None:
    try:
        llm.complete(MISSING)
    except ReplayMiss as miss:
        out.put(miss.nearest)


def test_a_copy_of_the_handle_explains_too(fixture: Path) -> None:
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    with acquire(fixture, timeout=10) as llm:
        child = context.Process(target=_explain_in_child, args=(llm, out))
        child.start()
        try:
            nearest = out.get(timeout=30)
        finally:
            child.join(30)
    assert nearest["request_hash"] == request_hash(RECORDED)


def _everything_about(exc: BaseException) -> str:
    """Every place an exception could carry text: message, repr, args, attributes, the
    traceback, and the locals of every frame it passed through."""
    parts = [str(exc), repr(exc), repr(exc.args), repr(vars(exc))]
    parts.append("".join(traceback.format_exception(exc)))
    parts.append(repr(exc.__cause__) + repr(exc.__context__))
    tb = exc.__traceback__
    while tb is not None:
        parts.extend(f"{k}={v!r}" for k, v in tb.tb_frame.f_locals.items())
        tb = tb.tb_next
    return "\n".join(parts)


def test_private_mode_tells_only_the_inspection_record(
    fixture: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    record = tmp_path / "inspection.jsonl"
    caplog.set_level(logging.DEBUG)
    with acquire(fixture, private=True, inspection_path=record, timeout=10) as llm:
        try:
            llm.complete(MISSING)
        except ReplayMiss as miss:
            caught = miss
    assert str(caught) == "no replay fixture matches this request"
    assert caught.request_hash is None and caught.nearest is None
    text = _everything_about(caught) + caplog.text
    for leak in (SECRET, request_hash(RECORDED), "params.temperature", "messages[1]"):
        assert leak not in text
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert lines == [
        {"event": "miss", "request_hash": request_hash(MISSING), "call": 1},
        {
            "event": "nearest",
            "request_hash": request_hash(MISSING),
            "nearest": {
                "request_hash": request_hash(RECORDED),
                "paths": ["messages[1].content", "params.temperature"],
            },
        },
    ]
    assert SECRET not in record.read_text()  # paths, never values


def test_private_mode_without_a_record_explains_nowhere(fixture: Path, tmp_path: Path) -> None:
    with acquire(fixture, private=True, timeout=10) as llm, pytest.raises(ReplayMiss) as info:
        llm.complete(MISSING)
    assert info.value.nearest is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fx.jsonl", "fx.jsonl.requests.jsonl"]


# -- served lines and coverage over real runs ---------------------------------------------


def test_served_lines_are_opt_in(fixture: Path, tmp_path: Path) -> None:
    quiet, loud = tmp_path / "quiet.jsonl", tmp_path / "loud.jsonl"
    with acquire(fixture, inspection_path=quiet, timeout=10) as llm:
        llm.complete(RECORDED)
    with acquire(fixture, inspection_path=loud, inspection_served=True, timeout=10) as llm:
        llm.complete(RECORDED)
        llm.complete(RECORDED)
    assert quiet.read_text() == ""
    digest = request_hash(RECORDED)
    assert [json.loads(line) for line in loud.read_text().splitlines()] == [
        {"event": "served", "request_hash": digest, "call": 1},
        {"event": "served", "request_hash": digest, "call": 2},
    ]
    with pytest.raises(InvalidArgument, match="needs an inspection_path"):
        acquire(fixture, inspection_served=True)


def test_the_manifest_asks_for_served_lines(fixture: Path, tmp_path: Path) -> None:
    record = tmp_path / "state.jsonl"
    manifest: dict[str, dict[str, Any]] = {
        "provider": {
            "kind": "replay",
            "fixture": str(fixture),
            "inspection": str(record),
            "inspection_served": True,
        }
    }
    with open_provider(manifest) as llm:
        llm.complete(RECORDED)
    assert json.loads(record.read_text())["event"] == "served"
    manifest["provider"]["inspection_served"] = "yes"
    with pytest.raises(ManifestError) as info:
        open_provider(manifest)
    assert info.value.key == "provider.inspection_served"


def test_coverage_over_three_real_runs(tmp_path: Path) -> None:
    def req(text: str) -> dict[str, Any]:
        return {"messages": [{"role": "user", "content": text}]}

    fixture = tmp_path / "fx.jsonl"
    fixture.write_bytes(
        entry_line(request_hash(req("plan")), response={"content": "p"}) + b"\n"
        + entry_line(request_hash(req("retry")), responses=[{"n": 1}, {"n": 2}, {"n": 3}])
        + b"\n" + entry_line(request_hash(req("dead")), response={}) + b"\n"
    )  # fmt: skip
    runs = [["plan", "retry", "nope"], ["retry", "retry", "nope", "other"], ["plan"]]
    records = []
    for number, texts in enumerate(runs):
        record = tmp_path / f"run{number}.jsonl"
        records.append(record)
        with acquire(fixture, inspection_path=record, inspection_served=True, timeout=10) as llm:
            for text in texts:
                try:
                    llm.complete(req(text))
                except ReplayMiss:
                    pass
    # the same runs appended one after another to one record: the same answer
    shared = tmp_path / "shared.jsonl"
    shared.write_bytes(b"".join(record.read_bytes() for record in records))
    for given in (records, [shared]):
        report = coverage(load_fixture(fixture), given).as_json()
        assert report == {
            "entries": 3,
            "unused": [request_hash(req("dead"))],
            "partly_consumed": [
                {"request_hash": request_hash(req("retry")), "served": 2, "length": 3}
            ],
            "misses": sorted(
                [
                    {"request_hash": request_hash(req("nope")), "count": 2},
                    {"request_hash": request_hash(req("other")), "count": 1},
                ],
                key=lambda item: str(item["request_hash"]),
            ),
            "exhausted": [],
        }


# -- record mode writes the sidecar ------------------------------------------------------


def test_record_mode_writes_the_sidecar_once_per_request(chat: ChatServer, tmp_path: Path) -> None:
    fixture = tmp_path / "rec.jsonl"
    manifest = {
        "provider": {
            "kind": "record",
            "fixture": str(fixture),
            "live": {
                "adapter": "openai",
                "model": "test-model",
                "base_url": chat.base_url("echo"),
                "retry_backoff": 0.0,
                "max_retries": 0,
            },
        }
    }
    plan: dict[str, Any] = {
        "messages": [{"role": "user", "content": "plan"}],
        "params": {"temperature": 0.2},
    }
    act = {"messages": [{"role": "user", "content": "act"}]}
    with open_provider(manifest) as llm:
        for request in (plan, act, plan):
            llm.complete(request)
    sidecar = Path(sidecar_path(fixture))
    assert sidecar.stat().st_mode & 0o777 == 0o600
    lines = [json.loads(line) for line in sidecar.read_text().splitlines()]
    assert lines == [
        {"request_hash": request_hash(plan), "request": json.loads(canonical_request(plan))},
        {"request_hash": request_hash(act), "request": json.loads(canonical_request(act))},
    ]
    changed = copy.deepcopy(plan)
    changed["params"]["temperature"] = 0.9
    with acquire(fixture, timeout=10) as llm, pytest.raises(ReplayMiss) as info:
        llm.complete(changed)
    assert info.value.nearest == {
        "request_hash": request_hash(plan),
        "paths": ["params.temperature"],
    }


def test_record_mode_names_the_missing_folder(chat: ChatServer, tmp_path: Path) -> None:
    given = tmp_path / "no-such" / "rec.jsonl"
    manifest = {
        "provider": {
            "kind": "record",
            "fixture": str(given),
            "live": {"adapter": "openai", "model": "m", "base_url": chat.base_url("echo")},
        }
    }
    with pytest.raises(Exception) as info:
        open_provider(manifest)
    assert str(info.value) == (
        f"the fixture's folder {given.parent} does not exist (fixture: {given}); create it first"
    )


def test_a_fifo_at_the_sidecar_path_never_hangs_a_call(fixture: Path) -> None:
    # A hit never looks at the sidecar; a miss refuses what is not a regular file
    # instead of blocking on it.
    sidecar = Path(sidecar_path(fixture))
    sidecar.unlink()
    os.mkfifo(sidecar)
    with acquire(fixture, timeout=10) as llm:
        assert llm.complete(RECORDED) == {"content": "sunny"}
        with pytest.raises(ReplayMiss) as info:
            llm.complete(MISSING)
    assert info.value.nearest is None and str(info.value) == FIRST_LINE


@pytest.mark.timeout(120)
def test_a_saved_miss_is_never_named_as_the_nearest_recorded_request(tmp_path: Path) -> None:
    from replay_actor import ReplayMiss, acquire
    from replay_actor._request import canonical_request
    from replay_actor.files.sidecar import SidecarWriter

    recorded = neutral("Name a city in Portugal.")
    saved = neutral("Name a city in Spain.")  # a miss run saved: not an answer yet
    asked = neutral("Name a city in Spain!")  # nearer to the saved one than the recorded
    fixture = write_fixture(tmp_path / "fixture.jsonl", {request_hash(recorded): {"content": "x"}})
    writer = SidecarWriter(fixture)
    for request in (recorded, saved):
        writer.append(request_hash(request), canonical_request(request))
    with acquire(fixture, timeout=30) as llm:
        for request, nearest in ((asked, recorded), (saved, recorded)):
            with pytest.raises(ReplayMiss) as info:
                llm.complete(request)
            assert info.value.nearest is not None
            assert info.value.nearest["request_hash"] == request_hash(nearest)
