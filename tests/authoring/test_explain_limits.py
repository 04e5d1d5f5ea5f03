"""explain within its caps (docs/authoring.md, "The request sidecar"): a miss does not
read a sidecar over its cap, explain streams a large one in bounded memory, a line over
the line cap is skipped, and requests nested deep enough to overflow a recursive walk
leave a plain miss or are explained down to the path depth cap.
"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from replay_actor import ReplayMiss, acquire, entry_line, load_fixture, request_hash
from replay_actor._request import canonical_request
from replay_actor.files.sidecar import SidecarWriter, sidecar_line, sidecar_path
from tests.support.cli import run, write_json

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(120)]

REQUEST: dict[str, Any] = {"messages": [{"role": "user", "content": "hi"}]}
HASH = request_hash(REQUEST)


# -- a miss on a huge sidecar stays cheap; explain streams -----------------------------


def _big_sidecar(path: Path, lines: int, pad: int) -> None:
    """``lines`` recorded requests of about ``pad`` bytes each, none near REQUEST."""
    with open(path, "wb") as handle:
        for n in range(lines):
            request = {"messages": [{"role": "user", "content": f"{n:08d}" + "x" * pad}]}
            handle.write(sidecar_line(request_hash(request), canonical_request(request)))


#: The documented caps (docs/authoring.md, "The request sidecar").
MISS_SIDECAR_BYTES = 64 << 20
MAX_PATH_DEPTH = 64


def test_the_documented_caps_are_the_code_s() -> None:
    from replay_actor.authoring import explain, nearest

    assert (explain.MISS_SIDECAR_BYTES, nearest.MAX_PATH_DEPTH) == (
        MISS_SIDECAR_BYTES,
        MAX_PATH_DEPTH,
    )


def test_a_miss_does_not_read_a_sidecar_over_the_cap(tmp_path: Path) -> None:
    fixture = tmp_path / "fx.jsonl"
    fixture.write_bytes(entry_line(HASH, response={"content": "hi"}) + b"\n")
    near = {"messages": [{"role": "user", "content": "hj"}]}
    sidecar = Path(sidecar_path(fixture))
    SidecarWriter(fixture).append(HASH, canonical_request(REQUEST))
    with open(sidecar, "ab") as handle:  # grow it past the cap with other requests
        filler = {"messages": [{"role": "system", "content": "y" * (1 << 20)}]}
        line = sidecar_line(request_hash(filler), canonical_request(filler))
        handle.write(line * (MISS_SIDECAR_BYTES // len(line) + 1))
    assert sidecar.stat().st_size > MISS_SIDECAR_BYTES
    with acquire(fixture, timeout=30) as llm:
        tracemalloc.start()
        try:
            with pytest.raises(ReplayMiss) as info:
                llm.complete(near)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert info.value.nearest is None  # given up: over the cap, not even opened
    assert peak < 4 << 20


def test_a_miss_under_the_cap_is_still_explained(tmp_path: Path) -> None:
    fixture = tmp_path / "fx.jsonl"
    fixture.write_bytes(entry_line(HASH, response={"content": "hi"}) + b"\n")
    SidecarWriter(fixture).append(HASH, canonical_request(REQUEST))
    near = {"messages": [{"role": "user", "content": "hj"}]}
    with acquire(fixture, timeout=30) as llm, pytest.raises(ReplayMiss) as info:
        llm.complete(near)
    assert info.value.nearest == {"request_hash": HASH, "paths": ["messages[0].content"]}


def test_explain_streams_a_large_sidecar_in_bounded_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from replay_actor.authoring.nearest import find_nearest

    fixture = tmp_path / "fx.jsonl"
    fixture.write_bytes(entry_line(HASH, response={"content": "hi"}) + b"\n")
    sidecar = Path(sidecar_path(fixture))
    _big_sidecar(sidecar, lines=6000, pad=6000)  # ~36 MB
    with open(sidecar, "ab") as handle:
        handle.write(sidecar_line(HASH, canonical_request(REQUEST)))
    assert sidecar.stat().st_size > 32 << 20
    near = {"messages": [{"role": "user", "content": "hj"}]}
    # What `explain` does once the fixture is loaded (the loader's own buffers aside).
    tracemalloc.start()
    try:
        nearest = find_nearest(sidecar, near, known=load_fixture(fixture))
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
    finally:
        tracemalloc.stop()
    assert nearest is not None and nearest.request_hash == HASH
    assert peak < 24 << 20  # the loader's 16 MiB buffer, not the file's 36 MB
    request = write_json(tmp_path / "r.json", near)
    code, out, _ = run(capsys, "explain", "--json", str(fixture), request)
    assert code == 3 and json.loads(out)["nearest"]["request_hash"] == HASH


def test_a_line_over_the_line_cap_is_skipped(tmp_path: Path) -> None:
    from replay_actor.authoring.nearest import rank
    from replay_actor.files.sidecar import read_sidecar

    sidecar = tmp_path / "fx.jsonl.requests.jsonl"
    huge = {"messages": [{"role": "user", "content": "h" + "i" * (24 << 20)}]}
    sidecar.write_bytes(
        sidecar_line(request_hash(huge), canonical_request(huge))
        + sidecar_line(HASH, canonical_request(REQUEST))
    )
    del huge
    near = {"messages": [{"role": "user", "content": "hi!"}]}
    tracemalloc.start()
    try:
        nearest = rank(read_sidecar(sidecar, max_line=1 << 20), near, None)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert nearest is not None and nearest.request_hash == HASH
    assert peak < 6 << 20  # the line is 24 MiB; the cap 1 MiB


# -- nesting deep enough to overflow a recursive walk ---------------------------------


def _nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def test_a_sidecar_line_nested_10000_deep_leaves_a_plain_miss(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fixture = tmp_path / "fx.jsonl"
    fixture.write_bytes(entry_line(HASH, response={"content": "hi"}) + b"\n")
    deep = b"[" * 10_000 + b"1" + b"]" * 10_000
    planted = (
        b'{"request_hash":"sha256:' + b"0" * 64 + b'","request":{"messages":'
        b'[{"content":"hj","role":"user"}],"params":{"x":' + deep + b"}}}\n"
    )
    sidecar = Path(sidecar_path(fixture))
    sidecar.write_bytes(planted + sidecar_line(HASH, canonical_request(REQUEST)))
    near = {"messages": [{"role": "user", "content": "hj"}]}
    with acquire(fixture, timeout=30) as llm, pytest.raises(ReplayMiss) as info:
        llm.complete(near)
    assert info.value.nearest == {"request_hash": HASH, "paths": ["messages[0].content"]}
    request = write_json(tmp_path / "r.json", near)
    code, out, err = run(capsys, "explain", str(fixture), request)
    assert (code, err) == (3, "")
    assert f"nearest recorded request: {HASH}" in out


def test_requests_600_deep_differing_at_the_bottom_are_explained(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recorded = {**REQUEST, "params": {"x": _nested(600, 1)}}
    requested = {**REQUEST, "params": {"x": _nested(600, 2)}}
    fixture = tmp_path / "fx.jsonl"
    fixture.write_bytes(entry_line(request_hash(recorded), response={"content": "hi"}) + b"\n")
    SidecarWriter(fixture).append(request_hash(recorded), canonical_request(recorded))
    truncated = "params.x" + "[0]" * (MAX_PATH_DEPTH - 1)
    with acquire(fixture, timeout=30) as llm, pytest.raises(ReplayMiss) as info:
        llm.complete(requested)
    assert info.value.nearest == {"request_hash": request_hash(recorded), "paths": [truncated]}
    path = write_json(tmp_path / "r.json", requested)
    code, out, err = run(capsys, "explain", "--json", str(fixture), path)
    assert (code, err) == (3, "")
    assert json.loads(out)["nearest"]["differences"] == [
        {"path": truncated, "recorded": None, "requested": None, "truncated": True}
    ]
    code, out, err = run(capsys, "explain", str(fixture), path)
    assert (code, err) == (3, "")
    assert out.splitlines()[-1] == (
        f"  {truncated}: (a value nested too deeply to show) → (a value nested too deeply to show)"
    )


def test_a_shallow_difference_beside_deep_values_is_shown_whole(tmp_path: Path) -> None:
    from replay_actor.authoring.nearest import find_nearest

    recorded = {**REQUEST, "params": {"x": _nested(40, 1), "y": 1}}
    requested = {**REQUEST, "params": {"x": _nested(40, 1), "y": 2}}
    SidecarWriter(tmp_path / "fx.jsonl").append(request_hash(recorded), canonical_request(recorded))
    nearest = find_nearest(sidecar_path(tmp_path / "fx.jsonl"), requested)
    assert nearest is not None
    assert [(d.path, d.recorded, d.requested) for d in nearest.differences] == [("params.y", 1, 2)]
