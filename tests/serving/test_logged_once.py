"""A logged call is hashed once (docs/attribution.md, "Cost"): through a serving (the
in-process transports' and the front door's), a call to a provider with a run log walks
its request once for the hash and, the first time the log's sidecar keeps the request,
its canonical bytes; the replay handle underneath reads the hash handed to it. The log
and its sidecar are what they were: each line names the request's hash, each sidecar
line holds its canonical bytes.

The walks are counted by wrapping the one function every hash and every canonical
encoding of a request goes through (``_request._canonical_parts``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import replay_actor._request as request_module
from replay_actor import open_provider, request_hash
from replay_actor._request import canonical_request
from replay_actor.files.sidecar import sidecar_line
from replay_actor.serving import AsyncServing, Serving

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(120)]

PATH = "/v1/chat/completions"
SERVED = {"messages": [{"role": "user", "content": "hello"}], "params": {"temperature": 0.5}}
MISSED = {"messages": [{"role": "user", "content": "nobody recorded this"}]}


def _openai_body(request: dict[str, Any]) -> bytes:
    body: dict[str, Any] = {"model": "m", "messages": request["messages"]}
    body.update(request.get("params", {}))
    return json.dumps(body).encode()


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of walks of a request, counted from now."""
    counted = [0]
    walk = request_module._canonical_parts

    def counting(*args: Any, **kwargs: Any) -> Any:
        counted[0] += 1
        return walk(*args, **kwargs)

    monkeypatch.setattr(request_module, "_canonical_parts", counting)
    return counted


def _manifest(tmp_path: Path, *, log: bool = True, private: bool = False) -> dict[str, Any]:
    fixture = tmp_path / "fixture.jsonl"
    line = {
        "schema_version": 1,
        "request_hash": request_hash(SERVED),
        "response": {"content": "hi"},
    }
    fixture.write_text(json.dumps(line) + "\n", encoding="utf-8")
    provider: dict[str, Any] = {"kind": "replay", "fixture": str(fixture)}
    if log:
        provider["log"] = str(tmp_path / "run.log")
    if private:
        provider["data"] = "private"
    return {"provider": provider}


def _serve_sync(
    manifest: dict[str, Any], requests: list[dict[str, Any]], walks: list[int]
) -> list[int]:
    serving = Serving(open_provider(manifest), "openai")
    try:
        counts = []
        for request in requests:
            before = walks[0]
            serving.serve("POST", PATH, _openai_body(request))
            counts.append(walks[0] - before)
        return counts
    finally:
        serving.close()


def _serve_async(
    manifest: dict[str, Any], requests: list[dict[str, Any]], walks: list[int]
) -> list[int]:
    async def main() -> list[int]:
        serving = AsyncServing(open_provider(manifest), "openai")
        try:
            counts = []
            for request in requests:
                before = walks[0]
                await serving.serve("POST", PATH, _openai_body(request))
                counts.append(walks[0] - before)
            return counts
        finally:
            await serving.aclose()

    return asyncio.run(main())


SERVES: dict[str, Callable[[dict[str, Any], list[dict[str, Any]], list[int]], list[int]]] = {
    "sync": _serve_sync,
    "async": _serve_async,
}


@pytest.mark.parametrize("form", SERVES)
def test_a_logged_call_walks_its_request_once(form: str, tmp_path: Path, walks: list[int]) -> None:
    # Served, served again (the sidecar has it now), missed: one walk each.
    counts = SERVES[form](_manifest(tmp_path), [SERVED, SERVED, MISSED], walks)
    assert counts == [1, 1, 1]


@pytest.mark.parametrize("form", SERVES)
def test_the_count_sees_every_walk(form: str, tmp_path: Path, walks: list[int]) -> None:
    # The counter can fail: without a log the handle hashes (one walk), and a second
    # hash of the same request, as the log made before, is a second walk.
    assert SERVES[form](_manifest(tmp_path, log=False), [SERVED], walks) == [1]
    before = walks[0]
    request_hash(SERVED)
    canonical_request(SERVED)
    assert walks[0] - before == 2


@pytest.mark.parametrize("form", SERVES)
def test_a_private_log_walks_once_and_keeps_no_request(
    form: str, tmp_path: Path, walks: list[int]
) -> None:
    counts = SERVES[form](_manifest(tmp_path, private=True), [SERVED, MISSED], walks)
    assert counts == [1, 1]
    assert not (tmp_path / "run.log.requests.jsonl").exists()
    assert "sha256:" not in (tmp_path / "run.log").read_text(encoding="utf-8")


@pytest.mark.parametrize("form", SERVES)
def test_the_log_and_its_sidecar_are_unchanged(form: str, tmp_path: Path, walks: list[int]) -> None:
    SERVES[form](_manifest(tmp_path), [SERVED, SERVED, MISSED], walks)
    lines = [json.loads(line) for line in (tmp_path / "run.log").read_text("utf-8").splitlines()]
    assert [(line["outcome"], line["request_hash"]) for line in lines] == [
        ("served", request_hash(SERVED)),
        ("served", request_hash(SERVED)),
        ("miss", request_hash(MISSED)),
    ]
    assert [(line["vendor"], line["path"], line["line"]) for line in lines] == [
        ("openai", PATH, 1),
        ("openai", PATH, 1),
        ("openai", PATH, None),
    ]
    # Once per hash, each line exactly the canonical bytes the hash was taken of.
    sidecar = (tmp_path / "run.log.requests.jsonl").read_bytes()
    assert sidecar == b"".join(
        sidecar_line(request_hash(r), canonical_request(r)) for r in (SERVED, MISSED)
    )
