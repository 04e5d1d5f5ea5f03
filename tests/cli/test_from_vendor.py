"""``--from openai|anthropic|gemini``: the CLI reads a vendor request body (as an SDK sends it or
a log shows it) through the same mapping as the SDK transports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replay_actor import entry_line, request_hash
from replay_actor.cli import main
from replay_actor.vendors.openai import chat as vendor_openai

OPENAI_BODY: dict[str, Any] = {
    "model": "gpt-4.1-mini",
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Capital of France?"},
    ],
    "max_completion_tokens": 30,
    "stream": True,
}
GEMINI_BODY: dict[str, Any] = {
    "contents": [{"role": "user", "parts": [{"text": "Capital of France?"}]}],
    "systemInstruction": {"parts": [{"text": "Be brief."}]},
    "generationConfig": {"maxOutputTokens": 30},
    "labels": {"team": "evals"},
}
ANTHROPIC_BODY: dict[str, Any] = {
    "model": "claude-x",
    "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
    "messages": [{"role": "user", "content": "Capital of France?"}],
    "max_tokens": 30,
}
EXPECTED = request_hash(
    {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Capital of France?"},
        ],
        "params": {"max_tokens": 30},
    }
)


def _write(path: Path, value: Any) -> str:
    path.write_text(json.dumps(value))
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_hash_from_either_vendor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    openai_file = _write(tmp_path / "o.json", OPENAI_BODY)
    anthropic_file = _write(tmp_path / "a.json", ANTHROPIC_BODY)
    assert run(capsys, "hash", "--from", "openai", openai_file) == (0, EXPECTED + "\n", "")
    assert run(capsys, "hash", "--from", "anthropic", anthropic_file) == (0, EXPECTED + "\n", "")
    assert request_hash(vendor_openai.read_body(OPENAI_BODY).request) == EXPECTED
    # Without --from the body is not a neutral request (model, stream are not fields):
    # the error says so and names the flag that reads it.
    code, _, err = run(capsys, "hash", openai_file)
    assert code == 1 and "not a provider-neutral request: add --from openai" in err


def test_lookup_and_stub_from_a_vendor_body(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = _write(tmp_path / "o.json", OPENAI_BODY)
    code, line, _ = run(
        capsys, "stub", "--request", body, "--from", "openai", "--content", "Paris."
    )
    assert code == 0
    assert json.loads(line)["request_hash"] == EXPECTED
    assert line.encode() == entry_line(EXPECTED, response={"content": "Paris."}) + b"\n"
    fixture = tmp_path / "f.jsonl"
    fixture.write_text(line)
    code, out, _ = run(
        capsys,
        "lookup",
        "--from",
        "anthropic",
        str(fixture),
        _write(tmp_path / "a.json", ANTHROPIC_BODY),
    )
    assert code == 0 and json.loads(out) == {"content": "Paris."}
    # A hash given beside --request must agree with it.
    other = "sha256:" + "0" * 64
    code, _, err = run(
        capsys, "stub", other, "--request", body, "--from", "openai", "--content", "x"
    )
    assert code == 2 and "not the hash" in err


def test_vendor_fields_that_cannot_be_replayed_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = _write(tmp_path / "o.json", {**OPENAI_BODY, "n": 3})
    code, out, err = run(capsys, "hash", "--from", "openai", body)
    assert code == 1 and out == ""
    assert "n other than 1" in err
    assert "Capital" not in err


def test_from_needs_a_known_vendor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    body = _write(tmp_path / "o.json", OPENAI_BODY)
    code, _, err = run(capsys, "hash", "--from", "mistral", body)
    assert code == 2 and "invalid choice" in err
    code, _, err = run(capsys, "stub", "--content", "x")
    assert code == 2 and "REQUEST_HASH" in err


def test_hash_from_a_gemini_body(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A generateContent body (as google-genai sends it, or a log shows it) hashes as
    the same conversation sent through the other vendors; the model is in the URL, so
    the file needs none."""
    gemini_file = _write(tmp_path / "g.json", GEMINI_BODY)
    assert run(capsys, "hash", "--from", "gemini", gemini_file) == (0, EXPECTED + "\n", "")
    refused = _write(
        tmp_path / "n.json",
        {**GEMINI_BODY, "generationConfig": {"maxOutputTokens": 30, "candidateCount": 2}},
    )
    code, out, err = run(capsys, "hash", "--from", "gemini", refused)
    assert code == 1 and out == ""
    assert "candidateCount" in err and "Capital" not in err
