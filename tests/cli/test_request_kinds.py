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
