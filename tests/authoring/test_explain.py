"""explain: the nearest recorded request to a miss, and every JSON path that differs."""

from __future__ import annotations

import copy
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from replay_actor import ReplayError, request_hash
from replay_actor._request import Request, canonical_request
from replay_actor.authoring.explain import explain_miss
from replay_actor.authoring.nearest import ABSENT, find_nearest
from replay_actor.authoring.present import explain_json, explain_text
from replay_actor.files.sidecar import SidecarWriter, sidecar_line, sidecar_path
from tests.support.paths import ROOT

pytestmark = pytest.mark.timeout(60)

BASE: dict[str, Any] = {
    "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "Sunny."},
        {"role": "user", "content": "And tomorrow?"},
    ],
    "tools": [{"name": "weather", "parameters": {"type": "object"}}],
    "params": {"temperature": 0.2},
}


def variant(**changes: Any) -> dict[str, Any]:
    request = copy.deepcopy(BASE)
    for key, value in changes.items():
        request[key] = value
    return request


def record(fixture: Path, *requests: dict[str, Any]) -> Path:
    writer = SidecarWriter(fixture)
    for request in requests:
        writer.append(request_hash(request), canonical_request(request))
    return Path(writer.path)


def diffs(fixture: Path, request: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    nearest = find_nearest(sidecar_path(fixture), request)
    assert nearest is not None
    return [(d.path, d.recorded, d.requested) for d in nearest.differences]


@pytest.fixture
def fixture(tmp_path: Path) -> Path:
    return tmp_path / "fx.jsonl"


def test_a_changed_message_names_its_content(fixture: Path) -> None:
    record(fixture, BASE)
    request = copy.deepcopy(BASE)
    request["messages"][3]["content"] = "And on Sunday?"
    assert diffs(fixture, request) == [("messages[3].content", "And tomorrow?", "And on Sunday?")]


def test_an_added_message_is_only_in_the_request(fixture: Path) -> None:
    record(fixture, BASE)
    request = copy.deepcopy(BASE)
    request["messages"].append({"role": "assistant", "content": "Rain."})
    assert diffs(fixture, request) == [
        ("messages[4]", ABSENT, {"role": "assistant", "content": "Rain."})
    ]


def test_a_removed_message_is_only_in_the_recording(fixture: Path) -> None:
    record(fixture, BASE)
    request = copy.deepcopy(BASE)
    del request["messages"][3]
    assert diffs(fixture, request) == [
        ("messages[3]", {"role": "user", "content": "And tomorrow?"}, ABSENT)
    ]


def test_an_added_tool_is_only_in_the_request(fixture: Path) -> None:
    record(fixture, BASE)
    request = copy.deepcopy(BASE)
    request["tools"].append({"name": "search"})
    assert diffs(fixture, request) == [("tools[1]", ABSENT, {"name": "search"})]


def test_parameters_changed_added_and_removed(fixture: Path) -> None:
    record(fixture, variant(params={"temperature": 0.2, "top_p": 0.9}))
    request = variant(params={"temperature": 0.7, "seed": 7})
    assert diffs(fixture, request) == [
        ("params.seed", ABSENT, 7),
        ("params.temperature", 0.2, 0.7),
        ("params.top_p", 0.9, ABSENT),
    ]


def test_top_level_fields_present_on_one_side(fixture: Path) -> None:
    record(fixture, BASE)
    request = variant(tool_choice="auto", response_format={"type": "json_object"})
    assert diffs(fixture, request) == [
        ("response_format", ABSENT, {"type": "json_object"}),
        ("tool_choice", ABSENT, "auto"),
    ]


def test_paths_go_down_to_the_differing_leaf(fixture: Path) -> None:
    parts = [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "a"}}]
    recorded = variant(
        messages=[{"role": "user", "content": parts}],
        params={"top-k": 3, "stop": ["x", "y"]},
    )
    record(fixture, recorded)
    changed = copy.deepcopy(recorded)
    changed["messages"][0]["content"][1]["image_url"]["url"] = "b"
    changed["params"]["top-k"] = 4
    changed["params"]["stop"] = ["x"]
    assert diffs(fixture, changed) == [
        ("messages[0].content[1].image_url.url", "a", "b"),
        ("params.stop[1]", "y", ABSENT),
        ('params["top-k"]', 3, 4),
    ]


def test_scope_differs(fixture: Path) -> None:
    scoped = json.loads(canonical_request(BASE))
    scoped["scope"] = {"epoch": 1}
    # written as record mode writes it; the hash is arbitrary here
    digest = "sha256:" + "5" * 64
    Path(sidecar_path(fixture)).write_bytes(
        sidecar_line(digest, json.dumps(scoped, separators=(",", ":"), sort_keys=True).encode())
    )
    if "scope" in Request.__struct_fields__:
        request = variant(scope={"epoch": 2})
        expected: list[tuple[str, Any, Any]] = [("scope.epoch", 1, 2)]
    else:  # this version's requests carry no scope: it is one side only
        request = variant()
        expected = [("scope", {"epoch": 1}, ABSENT)]
    assert diffs(fixture, request) == expected


def test_a_change_of_type_is_one_difference(fixture: Path) -> None:
    record(fixture, variant(params={"stop": "x", "flag": True}))
    request = variant(params={"stop": ["x"], "flag": 1})
    assert diffs(fixture, request) == [("params.flag", True, 1), ("params.stop", "x", ["x"])]


def test_most_shared_leading_messages_wins_over_fewer_paths(fixture: Path) -> None:
    late = copy.deepcopy(BASE)  # diverges at message 3, and its parameters differ a lot
    late["messages"][3]["content"] = "Something else"
    late["params"] = {"temperature": 1, "top_p": 0.5, "seed": 1, "max_tokens": 9}
    early = copy.deepcopy(BASE)  # diverges at message 1 only
    early["messages"][1]["content"] = "Weather in Rome?"
    record(fixture, early, late)
    nearest = find_nearest(sidecar_path(fixture), BASE)
    assert nearest is not None
    assert nearest.request_hash == request_hash(late)
    assert nearest.shared_messages == 3
    assert len(nearest.differences) == 5


def test_among_equal_prefixes_fewest_paths_wins(fixture: Path) -> None:
    one = variant(params={"temperature": 0.3})
    two = variant(params={"temperature": 0.3, "seed": 1})
    record(fixture, two, one)
    nearest = find_nearest(sidecar_path(fixture), BASE)
    assert nearest is not None and nearest.request_hash == request_hash(one)


def test_ties_go_to_the_nearest_whole_request_then_the_smallest_bytes(tmp_path: Path) -> None:
    # One differing path each: the request that differs least wins, whatever the order
    # (the same question with a sentence added, against another question of the eval).
    asked = variant()
    asked["messages"][1]["content"] = "What is the capital of France? Answer briefly."
    same = variant()
    same["messages"][1]["content"] = "What is the capital of France?"
    other = variant()
    other["messages"][1]["content"] = "What is the capital of Italy?"
    # An exact tie on distance (one character each) goes to the smaller canonical bytes.
    a = variant(params={"temperature": 0.3})
    b = variant(params={"temperature": 0.4})
    for wanted, candidates, expected in (
        (asked, (same, other), same),
        (BASE, (a, b), a),
    ):
        for order in (candidates, candidates[::-1]):
            fixture = tmp_path / f"{request_hash(order[0])[7:15]}.jsonl"
            record(fixture, *order)
            nearest = find_nearest(sidecar_path(fixture), wanted)
            assert nearest is not None and nearest.request_hash == request_hash(expected)
            Path(sidecar_path(fixture)).unlink()


def test_known_limits_the_candidates_to_the_fixtures_entries(fixture: Path) -> None:
    near = variant(params={"temperature": 0.3})
    far = variant(params={"temperature": 0.3, "seed": 1})
    record(fixture, near, far)
    nearest = find_nearest(sidecar_path(fixture), BASE, known={request_hash(far)})
    assert nearest is not None and nearest.request_hash == request_hash(far)
    assert find_nearest(sidecar_path(fixture), BASE, known=set()) is None


def test_json_document_has_the_documented_shape(fixture: Path) -> None:
    record(fixture, BASE)
    request = variant(params={"temperature": 0.7})
    request["tools"] = [*BASE["tools"], {"name": "search"}]
    nearest = find_nearest(sidecar_path(fixture), request)
    document = explain_json(False, request_hash(request), nearest)
    assert document == {
        "hit": False,
        "request_hash": request_hash(request),
        "nearest": {
            "request_hash": request_hash(BASE),
            "differences": [
                {"path": "params.temperature", "recorded": 0.2, "requested": 0.7},
                {"path": "tools[1]", "recorded": None, "requested": {"name": "search"}},
            ],
        },
    }
    assert json.loads(json.dumps(document)) == document
    assert explain_json(True, request_hash(BASE), None) == {
        "hit": True,
        "request_hash": request_hash(BASE),
        "nearest": None,
    }


def test_text_report_shows_both_values(fixture: Path) -> None:
    record(fixture, BASE)
    request = variant(params={"temperature": 0.7})
    request["tools"] = [*BASE["tools"], {"name": "search"}]
    request["messages"] = request["messages"][:3]
    nearest = find_nearest(sidecar_path(fixture), request)
    text = explain_text("fx.jsonl", False, request_hash(request), 3, nearest)
    assert text.splitlines() == [
        f"miss: {request_hash(request)} has no entry in fx.jsonl",
        f"nearest recorded request: {request_hash(BASE)}",
        "  shares 3 of 3 leading messages; 3 paths differ (recorded → requested):",
        '  messages[3]: only in the recording: {"content":"And tomorrow?","role":"user"}',
        "  params.temperature: 0.2 → 0.7",
        '  tools[1]: only in the request: {"name":"search"}',
    ]


def test_long_strings_are_shown_around_where_they_differ(fixture: Path) -> None:
    long = "word " * 100
    recorded = variant(messages=[{"role": "user", "content": long + "Paris"}])
    record(fixture, recorded)
    request = variant(messages=[{"role": "user", "content": long + "Rome"}])
    text = explain_text(
        "fx.jsonl", False, "sha256:x", 1, find_nearest(sidecar_path(fixture), request)
    )
    line = text.splitlines()[-1]
    assert "Paris" in line and "Rome" in line and "(505 chars)" in line and len(line) < 200


# -- reading the sidecar ------------------------------------------------------------------


def test_a_torn_last_line_is_ignored_and_the_first_line_of_a_hash_wins(fixture: Path) -> None:
    path = Path(sidecar_path(fixture))
    first = variant(params={"temperature": 0.3})
    other = variant(params={"temperature": 0.9})
    lines = [
        sidecar_line(request_hash(first), canonical_request(first)),
        # the same hash again with another request: never consulted
        sidecar_line(request_hash(first), canonical_request(other)),
        b"\n",
        sidecar_line(request_hash(other), canonical_request(other))[:40],  # torn
    ]
    path.write_bytes(b"".join(lines))
    nearest = find_nearest(path, BASE)
    assert nearest is not None and nearest.request_hash == request_hash(first)
    assert [d.path for d in nearest.differences] == ["params.temperature"]


def test_a_line_edited_by_hand_is_still_read(fixture: Path) -> None:
    path = Path(sidecar_path(fixture))
    line = {"request": json.loads(canonical_request(BASE)), "request_hash": request_hash(BASE)}
    path.write_text(json.dumps(line, indent=None, separators=(", ", ": ")) + "\n")
    nearest = find_nearest(path, variant(params={"temperature": 0.5}))
    assert nearest is not None and nearest.request_hash == request_hash(BASE)


def test_a_corrupt_line_names_the_path_and_line(fixture: Path) -> None:
    path = Path(sidecar_path(fixture))
    path.write_bytes(
        sidecar_line(request_hash(BASE), canonical_request(BASE)) + b'{"SECRET-41": 1}\n'
    )
    with pytest.raises(ReplayError) as info:
        find_nearest(path, BASE)
    assert str(info.value) == f"{path}: line 2 is not a request sidecar line"
    assert "SECRET" not in str(info.value)


def test_explain_miss_gives_hash_and_paths_or_none(fixture: Path) -> None:
    assert explain_miss(fixture, BASE) is None  # no sidecar
    record(fixture, BASE)
    request = variant(params={"temperature": 0.7})
    assert explain_miss(fixture, request) == {
        "request_hash": request_hash(BASE),
        "paths": ["params.temperature"],
    }
    with open(sidecar_path(fixture), "ab") as handle:
        handle.write(b"not json\n")
    assert explain_miss(fixture, request) is None  # a broken sidecar never raises here


# -- writing the sidecar -------------------------------------------------------------------


def test_the_sidecar_is_created_owner_only_and_each_hash_written_once(fixture: Path) -> None:
    path = record(fixture, BASE, BASE)
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert path.read_bytes() == sidecar_line(request_hash(BASE), canonical_request(BASE))
    # another writer (a new session) also sees it is there
    assert not SidecarWriter(fixture).append(request_hash(BASE), canonical_request(BASE))


def test_a_writer_picks_up_what_others_appended(fixture: Path) -> None:
    one, two = SidecarWriter(fixture), SidecarWriter(fixture)
    other = variant(params={"seed": 1})
    assert one.append(request_hash(BASE), canonical_request(BASE))
    assert two.append(request_hash(other), canonical_request(other))
    assert not one.append(request_hash(other), canonical_request(other))
    assert len(Path(one.path).read_bytes().splitlines()) == 2


def test_a_torn_tail_is_cut_before_appending(fixture: Path) -> None:
    path = Path(sidecar_path(fixture))
    whole = sidecar_line(request_hash(BASE), canonical_request(BASE))
    path.write_bytes(whole + whole[:50])
    other = variant(params={"seed": 1})
    SidecarWriter(fixture).append(request_hash(other), canonical_request(other))
    assert path.read_bytes() == whole + sidecar_line(request_hash(other), canonical_request(other))


def test_a_symbolic_link_is_refused(fixture: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_bytes(b"")
    os.symlink(target, sidecar_path(fixture))
    with pytest.raises(ReplayError, match="symbolic link"):
        record(fixture, BASE)
    assert target.read_bytes() == b""


def test_the_ranking_matches_a_brute_force_one(tmp_path: Path) -> None:
    """The pruned ranking (byte comparisons, lower bounds) names the same request as
    scoring every line in full, over many random near-variants."""
    from replay_actor.authoring.nearest import (
        canonical_bytes,
        differences,
        request_distance,
        split_request,
    )
    from replay_actor.files.sidecar import read_sidecar

    rng = random.Random(12)

    def mutate(request: dict[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(request)
        for _ in range(rng.randint(0, 3)):
            what = rng.randrange(5)
            if what == 0:
                out["messages"][rng.randrange(len(out["messages"]))]["content"] = rng.choice("ab")
            elif what == 1:
                out["messages"].append({"role": "user", "content": rng.choice("cd")})
            elif what == 2 and len(out["messages"]) > 1:
                out["messages"].pop()
            elif what == 3:
                out["params"][rng.choice(["temperature", "seed", "top_p"])] = rng.randrange(3)
            else:
                out["tools"].append({"name": rng.choice(["x", "y"])})
        return out

    for trial in range(20):
        fixture = tmp_path / f"fx{trial}.jsonl"
        record(fixture, *[mutate(BASE) for _ in range(30)])
        request = mutate(BASE)
        _, wanted = split_request(request)
        scored = []
        for digest, split in read_sidecar(sidecar_path(fixture)):
            shared = 0
            while (
                shared < min(len(split.messages), len(wanted.messages))
                and split.messages[shared] == wanted.messages[shared]
            ):
                shared += 1
            paths = len(differences(split, wanted))
            distance = request_distance(split, wanted)
            scored.append((-shared, paths, distance, canonical_bytes(split), digest))
        nearest = find_nearest(sidecar_path(fixture), request)
        assert nearest is not None
        assert nearest.request_hash == min(scored)[-1]
        assert len(nearest.differences) == min(scored)[1]


_APPENDER = """
import sys, time
from pathlib import Path
from replay_actor.files.sidecar import SidecarWriter
fixture, me, go = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
while not go.exists():
    time.sleep(0.001)
writer = SidecarWriter(fixture)
for i in range(50):
    # every writer also tries the hashes of the shared range: each must land once
    n = i if i < 10 else me * 1000 + i
    writer.append("sha256:%064x" % n, b'{"messages":[{"content":"%d","role":"user"}]}' % n)
"""


def test_concurrent_writers_append_whole_lines_each_hash_once(
    fixture: Path, tmp_path: Path, no_leaks: None
) -> None:
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _APPENDER, str(fixture), str(n), str(go)],
            stderr=subprocess.PIPE,
            env=env,
        )
        for n in range(1, 5)
    ]
    try:
        time.sleep(0.5)
        go.touch()
        errors = [proc.communicate(timeout=60)[1] for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert [proc.returncode for proc in procs] == [0, 0, 0, 0], errors
    lines = Path(sidecar_path(fixture)).read_bytes().splitlines()
    hashes = [json.loads(line)["request_hash"] for line in lines]
    assert len(hashes) == len(set(hashes)) == 10 + 4 * 40
