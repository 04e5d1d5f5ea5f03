"""The authoring commands: explain, add, coverage, stub --request (exit codes, --json)."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest

from replay_actor import entry_line, load_fixture, request_hash
from replay_actor._request import canonical_request
from replay_actor.files.durable import release_lock, take_lock
from replay_actor.files.sidecar import SidecarWriter, sidecar_path
from tests.support.cli import run
from tests.support.frontdoor_util import neutral, shell

pytestmark = pytest.mark.timeout(60)

SECRET = "TOPSECRET-cli-3b7a"
RECORDED: dict[str, Any] = {
    "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": f"Weather in Paris? {SECRET}"},
    ],
    "tools": [{"name": "weather"}],
    "params": {"temperature": 0.2},
}
MISSING = copy.deepcopy(RECORDED)
MISSING["params"]["temperature"] = 0.7
MISSING["tools"].append({"name": "events"})


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    fixture = tmp_path / "fx.jsonl"
    fixture.write_bytes(entry_line(request_hash(RECORDED), response={"content": "sun"}) + b"\n")
    SidecarWriter(fixture).append(request_hash(RECORDED), canonical_request(RECORDED))
    paths = {"fixture": str(fixture)}
    for name, request in (("recorded", RECORDED), ("missing", MISSING)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(request))
        paths[name] = str(path)
    return paths


# -- explain -----------------------------------------------------------------------------


def test_explain_a_hit(files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "explain", files["fixture"], files["recorded"])
    assert (code, err) == (0, "")
    assert out == f"hit: {request_hash(RECORDED)} has an entry in {files['fixture']}\n"
    code, out, _ = run(capsys, "explain", "--json", files["fixture"], files["recorded"])
    assert code == 0
    assert json.loads(out) == {"hit": True, "request_hash": request_hash(RECORDED), "nearest": None}


def test_explain_a_miss(files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "explain", files["fixture"], files["missing"])
    assert (code, err) == (3, "")
    assert out.splitlines() == [
        f"miss: {request_hash(MISSING)} has no entry in {files['fixture']}",
        f"nearest recorded request: {request_hash(RECORDED)}",
        "  shares 2 of 2 leading messages; 2 paths differ (recorded → requested):",
        "  params.temperature: 0.2 → 0.7",
        '  tools[1]: only in the request: {"name":"events"}',
    ]
    code, out, _ = run(capsys, "explain", "--json", files["fixture"], files["missing"])
    assert code == 3
    assert json.loads(out) == {
        "hit": False,
        "request_hash": request_hash(MISSING),
        "nearest": {
            "request_hash": request_hash(RECORDED),
            "differences": [
                {"path": "params.temperature", "recorded": 0.2, "requested": 0.7},
                {"path": "tools[1]", "recorded": None, "requested": {"name": "events"}},
            ],
        },
    }


def test_explain_names_only_entries_the_fixture_holds(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    stale = copy.deepcopy(MISSING)
    stale["params"]["seed"] = 1  # one path from MISSING, but its entry was deleted
    SidecarWriter(files["fixture"]).append(request_hash(stale), canonical_request(stale))
    code, out, _ = run(capsys, "explain", "--json", files["fixture"], files["missing"])
    assert code == 3
    assert json.loads(out)["nearest"]["request_hash"] == request_hash(RECORDED)


def test_explain_without_a_sidecar_is_exit_1(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    os.unlink(sidecar_path(files["fixture"]))
    code, out, err = run(capsys, "explain", files["fixture"], files["missing"])
    assert (code, out) == (1, "")
    assert err == (
        f"replay-actor: error: {files['fixture']}: no request sidecar "
        f"({files['fixture']}.requests.jsonl) to explain the miss with: record the fixture, "
        "or give add/stub the request with --request\n"
    )
    # a hit needs no sidecar
    assert run(capsys, "explain", files["fixture"], files["recorded"])[0] == 0


def test_explain_bad_inputs_are_exit_1(
    files: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad_request = tmp_path / "bad.json"
    bad_request.write_text(json.dumps({"messages": [], SECRET: 1}))
    code, _, err = run(capsys, "explain", files["fixture"], str(bad_request))
    assert code == 1 and "invalid request" in err and SECRET not in err
    bad_fixture = tmp_path / "bad.jsonl"
    bad_fixture.write_text(f'{{"{SECRET}": 1}}\n')
    code, _, err = run(capsys, "explain", str(bad_fixture), files["missing"])
    assert code == 1 and err.endswith("rejected: unknown_key at line 1\n") and SECRET not in err
    Path(sidecar_path(files["fixture"])).write_text(f"{SECRET}\n")
    code, _, err = run(capsys, "explain", files["fixture"], files["missing"])
    assert code == 1 and "line 1 is not a request sidecar line" in err and SECRET not in err
    assert run(capsys, "explain", files["fixture"])[0] == 2  # usage


# -- add -------------------------------------------------------------------------------------


def test_add_a_new_entry_then_a_sequence(
    files: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    digest = request_hash(MISSING)
    code, out, err = run(
        capsys, "add", files["fixture"], digest, "--content", "rain", "--request", files["missing"]
    )
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f"added {digest} to {files['fixture']} (a single response)",
        f"added the request to {files['fixture']}.requests.jsonl",
    ]
    answer = tmp_path / "answer.json"
    answer.write_text('{"content": "drizzle", "finish_reason": "stop"}')
    # the same hash again is refused, nothing changed, and the message says what to do
    before = Path(files["fixture"]).read_bytes()
    code, out, err = run(capsys, "add", files["fixture"], digest, "--response", str(answer))
    assert (code, out) == (1, "")
    assert "already holds" in err and "--next" in err and "--replace" in err
    assert Path(files["fixture"]).read_bytes() == before
    code, out, _ = run(capsys, "add", files["fixture"], digest, "--response", str(answer), "--next")
    assert code == 0
    assert out == f"appended to {digest} in {files['fixture']}: a sequence of 2 responses\n"
    assert load_fixture(files["fixture"]).responses_for(digest) == [
        {"content": "rain"},
        {"content": "drizzle", "finish_reason": "stop"},
    ]
    # explain now sees a hit
    assert run(capsys, "explain", files["fixture"], files["missing"])[0] == 0


def test_add_exit_codes(
    files: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    digest = request_hash(MISSING)
    before = Path(files["fixture"]).read_bytes()
    # 2: a malformed hash, or neither/both bodies
    assert run(capsys, "add", files["fixture"], "sha256:XYZ", "--content", "x")[0] == 2
    assert run(capsys, "add", files["fixture"], digest)[0] == 2
    # 2: the request does not hash to REQUEST_HASH (as for stub)
    code, _, err = run(
        capsys, "add", files["fixture"], digest, "--content", "x", "--request", files["recorded"]
    )
    assert code == 2 and f"hashes to {request_hash(RECORDED)}, not {digest}" in err
    # 1: a response that is not an object
    not_object = tmp_path / "list.json"
    not_object.write_text("[1]")
    assert run(capsys, "add", files["fixture"], digest, "--response", str(not_object))[0] == 1
    # 1: another writer holds the lock
    lock_path = files["fixture"] + ".lock"
    fd = take_lock(lock_path)
    try:
        code, _, err = run(capsys, "add", files["fixture"], digest, "--content", "x")
    finally:
        release_lock(lock_path, fd)
    assert code == 1 and "another writer holds the fixture's lock" in err
    assert Path(files["fixture"]).read_bytes() == before
    # 1: a rejected fixture, reported by reason and line only
    bad = tmp_path / "bad.jsonl"
    bad.write_text(f'{{"{SECRET}": 1}}\n')
    code, _, err = run(capsys, "add", str(bad), digest, "--content", "x")
    assert code == 1 and err == f"replay-actor: error: {bad}: rejected: unknown_key at line 1\n"


# -- stub --request ------------------------------------------------------------------------


def test_stub_with_a_request_writes_the_sidecar(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    digest = request_hash(MISSING)
    code, out, err = run(
        capsys,
        "stub",
        digest,
        "--content",
        "rain",
        "--request",
        files["missing"],
        "--fixture",
        files["fixture"],
    )
    assert code == 0
    assert out == entry_line(digest, response={"content": "rain"}).decode() + "\n"
    assert err == f"added the request to {files['fixture']}.requests.jsonl\n"
    assert Path(sidecar_path(files["fixture"])).read_text().count(digest) == 1
    code, _, err = run(capsys, "stub", digest, "--content", "x", "--fixture", files["fixture"])
    assert code == 2 and "give --request too" in err


# -- coverage -------------------------------------------------------------------------------


def test_coverage_text_json_and_the_served_note(
    files: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    digest = request_hash(RECORDED)
    miss = request_hash(MISSING)
    record = tmp_path / "run.jsonl"
    record.write_text(json.dumps({"event": "miss", "request_hash": miss, "call": 1}) + "\n")
    code, out, err = run(capsys, "coverage", "--json", files["fixture"], str(record))
    assert code == 0
    assert json.loads(out) == {
        "entries": 1,
        "unused": [digest],
        "partly_consumed": [],
        "misses": [{"request_hash": miss, "count": 1}],
        "exhausted": [],
    }
    assert "no record has served lines" in err
    with record.open("a") as handle:
        handle.write(json.dumps({"event": "served", "request_hash": digest, "call": 2}) + "\n")
    code, out, err = run(capsys, "coverage", files["fixture"], str(record))
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f"{files['fixture']}: 1 entry, 1 inspection record",
        "unused entries: 0",
        "sequences not fully consumed: 0",
        "misses: 1 request, 1 call",
        f"  {miss}  1 call",
        "exhausted sequences: 0 requests, 0 calls past the end",
    ]
    code, _, err = run(capsys, "coverage", files["fixture"], str(tmp_path / "none.jsonl"))
    assert code == 1 and "none.jsonl: cannot read the inspection record" in err
    assert run(capsys, "coverage", files["fixture"])[0] == 2  # usage: no record


def test_private_lookup_prints_nothing_from_the_sidecar(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "lookup", "--private", files["fixture"], files["missing"])
    assert (code, out) == (3, "")
    assert err.splitlines() == [
        "no replay fixture matches this request",
        "replay-actor: note: private data: the request hash is withheld; --inspection PATH "
        "records it in an owner-only file",
    ]


def test_explain_reads_a_vendor_body_with_from(
    files: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = {
        "model": "gpt-4.1-mini",
        "messages": MISSING["messages"],
        "tools": [{"type": "function", "function": tool} for tool in MISSING["tools"]],
        "temperature": 0.7,
    }
    path = tmp_path / "body.json"
    path.write_text(json.dumps(body))
    code, out, _ = run(capsys, "explain", "--json", "--from", "openai", files["fixture"], str(path))
    assert code == 3
    assert json.loads(out)["request_hash"] == request_hash(MISSING)
    assert run(capsys, "explain", "--json", files["fixture"], files["missing"])[1] == out


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.timeout(120)
def test_add_refuses_an_existing_hash_then_next_replace_and_remove(tmp_path: Path) -> None:
    digest = request_hash(neutral("Name a city in Portugal."))
    shell("replay-actor init", tmp_path)
    add = f"replay-actor add fixture.jsonl {digest} --content"
    assert shell(f"{add} Porto.", tmp_path).returncode == 0
    before = (tmp_path / "fixture.jsonl").read_bytes()
    refused = shell(f"{add} Lisbon.", tmp_path)
    assert refused.returncode == 1
    assert "already holds" in refused.stderr and "--next" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert (tmp_path / "fixture.jsonl").read_bytes() == before
    assert shell(f"{add} Lisbon. --next", tmp_path).returncode == 0
    assert load_fixture(tmp_path / "fixture.jsonl").responses_for(digest) == [
        {"content": "Porto."},
        {"content": "Lisbon."},
    ]
    assert shell(f"{add} Faro. --replace", tmp_path).returncode == 0
    assert load_fixture(tmp_path / "fixture.jsonl").responses_for(digest) == [{"content": "Faro."}]
    removed = shell(f"replay-actor remove fixture.jsonl {digest}", tmp_path)
    assert removed.returncode == 0
    assert removed.stdout == f"removed {digest} from fixture.jsonl (a single response)\n"
    assert digest not in load_fixture(tmp_path / "fixture.jsonl")
    again = shell(f"replay-actor remove fixture.jsonl {digest}", tmp_path)
    assert again.returncode == 1 and "holds no entry" in again.stderr
