"""The run log (docs/attribution.md): one durable JSON line per call, from every source
that opens a provider through a manifest, for replay and record providers; private mode
writes no hash, no sidecar, and an owner-only file."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from replay_actor import ReplayMiss, SequenceExhausted, open_provider, request_hash
from replay_actor._request import HASHED
from tests.support.frontdoor_util import run_cli, serving, write_fixture

pytestmark = pytest.mark.usefixtures("no_leaks")


def _ask(text: str, **rest: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}], **rest}


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def _manifest(folder: Path, *, private: bool = False, log: str | None = "run.log") -> Path:
    fixture = write_fixture(
        folder / "fixture.jsonl",
        {
            request_hash(_ask("one")): {"content": "1"},
            request_hash(_ask("seq")): [{"content": "a"}, {"content": "b"}],
            request_hash(_ask("one", scope={"sample": 2})): {"content": "1s"},
        },
    )
    lines = ["[provider]", 'kind = "replay"', f'fixture = "{fixture.name}"']
    if private:
        lines.append('data = "private"')
    if log is not None:
        lines.append(f'log = "{log}"')
    path = folder / "replay.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_direct_provider_logs_every_outcome_with_line_and_element(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path)
    with open_provider(manifest) as llm:
        llm.complete(_ask("one"))
        llm.complete(_ask("seq"))
        llm.complete(_ask("seq"))
        with pytest.raises(SequenceExhausted):
            llm.complete(_ask("seq"))
        with pytest.raises(ReplayMiss):
            llm.complete(_ask("nothing"))
        llm.complete(_ask("one", scope={"sample": 2}))
        with pytest.raises(ValueError):
            llm.complete({"messages": []})
    lines = _lines(tmp_path / "run.log")
    assert [line["seq"] for line in lines] == [1, 2, 3, 4, 5, 6, 7]
    outcomes = [line["outcome"] for line in lines]
    assert outcomes == ["served", "served", "served", "exhausted", "miss", "served", "invalid"]
    assert [(line["line"], line["element"]) for line in lines[:3]] == [(1, None), (2, 0), (2, 1)]
    assert lines[0]["request_hash"] == request_hash(_ask("one"))
    assert lines[4]["request_hash"] == request_hash(_ask("nothing"))
    assert lines[5]["scope"] == {"sample": 2} and lines[5]["line"] == 3
    assert all(line["provider"] == "replay" and line["vendor"] is None for line in lines)
    # Each request once in the log's own sidecar, canonical.
    sidecar = _lines(tmp_path / "run.log.requests.jsonl")
    assert {line["request_hash"] for line in sidecar} == {
        request_hash(_ask("one")),
        request_hash(_ask("seq")),
        request_hash(_ask("nothing")),
        request_hash(_ask("one", scope={"sample": 2})),
    }
    assert sidecar[0]["request"] == _ask("one")


def test_the_async_form_logs_the_same_lines_as_the_sync_form(tmp_path: Path) -> None:
    # complete_via and acomplete_via share one logging step; both forms must write the
    # same outcomes, hashes, lines and elements (the hash handed on, then reset).
    async def calls(llm: Any) -> None:
        await llm.acomplete(_ask("one"))
        await llm.acomplete(_ask("seq"))
        with pytest.raises(ReplayMiss):
            await llm.acomplete(_ask("nothing"))
        with pytest.raises(ValueError):
            await llm.acomplete({"messages": []})
        assert HASHED.get(None) is None  # reset in this task after every call

    def fields(path: Path) -> list[tuple[Any, ...]]:
        keys = ("outcome", "request_hash", "line", "element")
        return [tuple(line.get(k) for k in keys) for line in _lines(path)]

    (tmp_path / "a").mkdir()
    (tmp_path / "s").mkdir()
    with open_provider(_manifest(tmp_path / "a")) as llm:
        asyncio.run(calls(llm))
    with open_provider(_manifest(tmp_path / "s")) as llm:
        llm.complete(_ask("one"))
        llm.complete(_ask("seq"))
        with pytest.raises(ReplayMiss):
            llm.complete(_ask("nothing"))
        with pytest.raises(ValueError):
            llm.complete({"messages": []})
    logged = fields(tmp_path / "a" / "run.log")
    assert [row[0] for row in logged] == ["served", "served", "miss", "invalid"]
    assert logged == fields(tmp_path / "s" / "run.log")


def test_private_mode_writes_no_hash_no_sidecar_and_an_owner_only_file(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, private=True)
    secret = "planted-secret-4711"
    with open_provider(manifest) as llm:
        llm.complete(_ask("one"))
        with pytest.raises(ReplayMiss):
            llm.complete(_ask(secret))
    log = tmp_path / "run.log"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    text = log.read_text()
    assert "sha256:" not in text and secret not in text
    assert [line["outcome"] for line in _lines(log)] == ["served", "miss"]
    assert _lines(log)[0]["line"] == 1
    assert not (tmp_path / "run.log.requests.jsonl").exists()


def test_the_in_process_openai_client_logs_vendor_and_path(tmp_path: Path) -> None:
    import openai

    from replay_actor.integrations.sdk import openai_client

    client = openai_client(_manifest(tmp_path))
    try:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "one"}])
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    finally:
        client.close()
    lines = _lines(tmp_path / "run.log")
    assert [(line["outcome"], line["vendor"], line["path"]) for line in lines] == [
        ("served", "openai", "/v1/chat/completions"),
        ("miss", "openai", "/v1/chat/completions"),
    ]


def test_serve_log_flag_logs_calls_and_refusals(tmp_path: Path) -> None:
    import httpx

    manifest = _manifest(tmp_path, log=None)
    log = tmp_path / "served.log"
    with serving(manifest, "--log", str(log)) as (_, info):
        headers = {"authorization": f"Bearer {info['token']}"}
        url = info["openai_base_url"] + "/chat/completions"
        body = {"model": "m", "messages": [{"role": "user", "content": "one"}]}
        assert httpx.post(url, json=body, headers=headers, timeout=30).status_code == 200
        assert httpx.post(url, content=b"{", headers=headers, timeout=30).status_code == 400
        assert httpx.post(url, json=body, timeout=30).status_code == 401
    lines = _lines(log)
    assert [(line["outcome"], line["path"]) for line in lines] == [
        ("served", "/v1/chat/completions"),
        ("invalid", "/v1/chat/completions"),
        ("invalid", "/v1/chat/completions"),
    ]


def test_run_log_flag_and_a_killed_writer_keeps_every_line(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, log=None)
    log = tmp_path / "child.log"
    script = (
        "import openai, os, signal\n"
        "c = openai.OpenAI()\n"
        "for text in ('one', 'seq', 'seq'):\n"
        "    c.chat.completions.create(model='m', messages=[{'role': 'user', 'content': text}])\n"
    )
    done = run_cli(
        manifest, [sys.executable, "-c", script], flags=("--seal", "off", "--log", str(log))
    )
    assert done.returncode == 0, done.stderr
    assert [(line["line"], line["element"]) for line in _lines(log)] == [(1, None), (2, 0), (2, 1)]
    # A process killed right after its calls keeps every line: each is in the kernel.
    killed = tmp_path / "killed.log"
    code = (
        "import os, signal, sys\n"
        "from replay_actor import open_provider\n"
        "llm = open_provider(sys.argv[1], log=sys.argv[2])\n"
        "for _ in range(50):\n"
        "    llm.complete({'messages': [{'role': 'user', 'content': 'one'}]})\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(manifest), str(killed)], timeout=60, check=False
    )
    assert proc.returncode == -9
    assert [line["seq"] for line in _lines(killed)] == list(range(1, 51))


def test_a_log_path_that_cannot_be_a_log_is_a_manifest_error(tmp_path: Path) -> None:
    from replay_actor import ManifestError

    (tmp_path / "dir.log").mkdir()
    with pytest.raises(ManifestError) as caught:
        open_provider(_manifest(tmp_path, log="dir.log"))
    assert caught.value.key == "provider.log"
    os.mkfifo(tmp_path / "fifo.log")
    with pytest.raises(ManifestError):
        open_provider(_manifest(tmp_path, log="fifo.log"))
    os.symlink(tmp_path / "elsewhere", tmp_path / "link.log")
    with pytest.raises(ManifestError):
        open_provider(_manifest(tmp_path, log="link.log"))
    assert not (tmp_path / "elsewhere").exists()


def test_live_and_record_providers_log_too(tmp_path: Path, chat: Any) -> None:
    from tests.support.frontdoor_util import live_manifest, record_manifest

    live = live_manifest(tmp_path, chat.base_url("echo"))
    live.write_text(live.read_text().replace('kind = "live"', 'kind = "live"\nlog = "live.log"'))
    with open_provider(live) as llm:
        llm.complete(_ask("one"))
    record = record_manifest(tmp_path, chat.base_url("echo"))
    record.write_text(
        record.read_text().replace('kind = "record"', 'kind = "record"\nlog = "record.log"')
    )
    with open_provider(record) as llm:
        llm.complete(_ask("one"))
        llm.complete(_ask("one"))
    (line,) = _lines(tmp_path / "live.log")
    assert (line["provider"], line["outcome"], line["line"]) == ("live", "served", None)
    assert line["request_hash"] == request_hash(_ask("one"))
    recorded = _lines(tmp_path / "record.log")
    assert [(r["provider"], r["outcome"]) for r in recorded] == [("record", "served")] * 2
    assert (tmp_path / "record.log.requests.jsonl").exists()


def test_pydantic_ai_logs_through_the_manifest(tmp_path: Path) -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent

    from replay_actor.pydantic_ai import ReplayModel

    manifest = _manifest(tmp_path)
    model = ReplayModel(manifest)
    try:
        with pytest.raises(Exception, match="no replay fixture matches"):
            Agent(model).run_sync("a question nobody recorded")
    finally:
        model.close()
    (line,) = _lines(tmp_path / "run.log")
    assert line["outcome"] == "miss" and line["request_hash"].startswith("sha256:")


def _child_calls(llm: Any) -> None:
    llm.complete(_ask("one"))
    llm.complete(_ask("seq"))


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_copy_in_another_process_logs_to_the_same_file(tmp_path: Path, method: str) -> None:
    import multiprocessing

    with open_provider(_manifest(tmp_path)) as llm:
        llm.complete(_ask("seq"))
        context: Any = multiprocessing.get_context(method)
        child = context.Process(target=_child_calls, args=(llm,))
        child.start()
        child.join(60)
        assert child.exitcode == 0
        llm.complete(_ask("one"))
    lines = _lines(tmp_path / "run.log")
    mine = [line for line in lines if line["pid"] == os.getpid()]
    theirs = [line for line in lines if line["pid"] == child.pid]
    assert [(line["seq"], line["line"], line["element"]) for line in mine] == [
        (1, 2, 0),
        (2, 1, None),
    ]
    # The copy counts its own seq; it shares the actor's cursor, so logs no element.
    assert [(line["seq"], line["line"], line["element"]) for line in theirs] == [
        (1, 1, None),
        (2, 2, None),
    ]


def test_a_sealed_runs_blocked_request_is_logged_with_its_host(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, log=None)
    log = tmp_path / "sealed.log"
    script = (
        "import urllib.error, urllib.request\n"
        "try:\n"
        "    urllib.request.urlopen('http://vendor.example/v1/chat/completions', timeout=20)\n"
        "except urllib.error.HTTPError as exc:\n"
        "    print(exc.code)\n"
    )
    done = run_cli(
        manifest, [sys.executable, "-c", script], flags=("--seal", "proxy", "--log", str(log))
    )
    assert done.returncode == 4 and done.stdout.strip() == "403", done.stderr
    (line,) = _lines(log)
    assert (line["outcome"], line["path"], line["request_hash"]) == (
        "blocked",
        "vendor.example",
        None,
    )


def test_the_log_and_the_serving_summary_classify_a_failure_alike() -> None:
    # The serving summary's kind is derived from the run log's word: one classification.
    from replay_actor._errors import ActorLost, RequestError
    from replay_actor.attribution.provider import outcome_word
    from replay_actor.serving import outcome_of

    cases = [
        (ReplayMiss(None), "miss", "missed"),
        (SequenceExhausted(None), "exhausted", "exhausted"),
        (RequestError("bad"), "invalid", "invalid"),
        (ActorLost("gone"), "failed", "failed"),
        (OSError("io"), "failed", "failed"),
    ]
    for exc, word, kind in cases:
        assert (outcome_word(exc), outcome_of(exc)) == (word, kind), exc
