"""The authoring CLI understands every request kind: ``hash --from`` the new shapes,
``add``, ``lookup`` and ``explain`` of an embedding (docs/embeddings.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from replay_actor import request_hash

CLI = [sys.executable, "-m", "replay_actor"]
OPENAI = {"model": "text-embedding-3-small", "input": ["the cat", "the mat"], "user": "u"}
GEMINI = {
    "requests": [
        {"model": "models/text-embedding-3-small", "content": {"parts": [{"text": t}]}}
        for t in ("the cat", "the mat")
    ]
}


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *map(str, args)], capture_output=True, text=True, timeout=60, check=False
    )


def test_hash_from_the_new_shapes(tmp_path: Path) -> None:
    (tmp_path / "o.json").write_text(json.dumps(OPENAI))
    (tmp_path / "g.json").write_text(json.dumps(GEMINI))
    expected = request_hash(
        {"kind": "embedding", "model": "text-embedding-3-small", "texts": ["the cat", "the mat"]}
    )
    for shape, name in (("openai-embeddings", "o.json"), ("gemini-embed", "g.json")):
        done = _cli("hash", "--from", shape, tmp_path / name)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == expected
    (tmp_path / "c.json").write_text(json.dumps({"model": "m", "prompt": "Once"}))
    done = _cli("hash", "--from", "openai-completions", "--canonical", tmp_path / "c.json")
    assert done.stdout == '{"kind":"completion","prompt":"Once"}'
    (tmp_path / "bad.json").write_text(json.dumps({"model": "m", "input": [[1, 2]]}))
    done = _cli("hash", "--from", "openai-embeddings", tmp_path / "bad.json")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "token arrays" in done.stderr


def test_add_lookup_and_explain_an_embedding(tmp_path: Path) -> None:
    request = tmp_path / "o.json"
    request.write_text(json.dumps(OPENAI))
    digest = _cli("hash", "--from", "openai-embeddings", request).stdout.strip()
    response = tmp_path / "r.json"
    response.write_text(json.dumps({"embeddings": [[0.5], [0.25]]}))
    fixture = tmp_path / "f.jsonl"
    added = _cli(
        "add", fixture, digest, "--response", response, "--request", request,
        "--from", "openai-embeddings",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    found = _cli("lookup", fixture, request, "--from", "openai-embeddings")
    assert json.loads(found.stdout) == {"embeddings": [[0.5], [0.25]]}
    other = tmp_path / "large.json"
    other.write_text(json.dumps({**OPENAI, "model": "text-embedding-3-large"}))
    explained = _cli("explain", fixture, other, "--from", "openai-embeddings")
    assert explained.returncode == 3
    assert 'model: "text-embedding-3-small" → "text-embedding-3-large"' in explained.stdout


def test_explain_of_a_request_without_messages_counts_no_messages(tmp_path: Path) -> None:
    request = tmp_path / "c.json"
    request.write_text(json.dumps({"model": "m", "prompt": "Once"}))
    digest = _cli("hash", "--from", "openai-completions", request).stdout.strip()
    fixture = tmp_path / "f.jsonl"
    added = _cli(
        "add", fixture, digest, "--content", " upon", "--request", request,
        "--from", "openai-completions",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    other = tmp_path / "d.json"
    other.write_text(json.dumps({"model": "m", "prompt": "Twice"}))
    explained = _cli("explain", fixture, other, "--from", "openai-completions")
    assert explained.returncode == 3
    assert "leading messages" not in explained.stdout
    assert '  1 path differs (recorded → requested):\n  prompt: "Once" → "Twice"' in (
        explained.stdout
    )


def _search(query: str) -> dict[str, object]:
    """A tool's HTTP request (docs/tools.md): a search for ``query``."""
    return {
        "kind": "http",
        "method": "GET",
        "scheme": "https",
        "host": "api.search.example",
        "port": 443,
        "path": "/search",
        "query": [["q", query]],
    }


def test_an_http_request_through_the_authoring_commands(tmp_path: Path) -> None:
    request = tmp_path / "paris.json"
    request.write_text(json.dumps(_search("paris")))
    digest = _cli("hash", request).stdout.strip()
    assert digest == request_hash(_search("paris"))
    response = tmp_path / "answer.json"
    stored = {"status": 200, "headers": [["content-type", "application/json"]], "text": "[]"}
    response.write_text(json.dumps(stored))
    fixture = tmp_path / "f.jsonl"
    added = _cli("add", fixture, digest, "--response", response, "--request", request)
    assert added.returncode == 0, added.stderr
    assert json.loads(_cli("lookup", fixture, request).stdout) == stored
    other = tmp_path / "rome.json"
    other.write_text(json.dumps(_search("rome")))
    explained = _cli("explain", fixture, other)
    assert explained.returncode == 3
    assert 'query[0][1]: "paris" → "rome"' in explained.stdout
    inspection = tmp_path / "run.inspection.jsonl"
    missed = _cli("lookup", fixture, other, "--inspection", inspection)
    assert missed.returncode == 3
    covered = _cli("coverage", fixture, inspection, "--json")
    assert covered.returncode == 0, covered.stderr
    report = json.loads(covered.stdout)
    assert report["misses"] == [{"request_hash": request_hash(_search("rome")), "count": 1}]


def test_runs_of_tool_calls_compare(tmp_path: Path) -> None:
    from replay_actor import open_provider
    from replay_actor.cli import main

    fixture = tmp_path / "f.jsonl"
    entries = [
        {"schema_version": 1, "request_hash": request_hash(_search(q)), "response": {"text": q}}
        for q in ("paris", "rome")
    ]
    fixture.write_text("".join(json.dumps(entry) + "\n" for entry in entries))
    logs = []
    for name, query in (("base", "paris"), ("cand", "rome")):
        log = tmp_path / f"{name}.log"
        manifest = {"provider": {"kind": "replay", "fixture": str(fixture), "log": str(log)}}
        with open_provider(manifest) as provider:
            provider.complete(_search(query))
        logs.append(str(log))
    assert main(["compare", *logs]) == 1  # the one sample diverged at its only call
    assert main(["compare", logs[0], logs[0]]) == 0
