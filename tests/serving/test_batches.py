"""Batches (docs/batches.md): OpenAI Files + Batches and Anthropic Message Batches,
each line answered from the fixture as if sent alone, per-line misses in the vendor's
error output, a batch complete at once; through the SDKs in-process and at the front
door, and Inspect's ``--batch`` recorded through a loopback vendor, then replayed twice."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from replay_actor import anthropic_client, async_openai_client, openai_client, request_hash
from replay_actor.fixture import entry_line
from replay_actor.serving.batches.store import Store
from tests.support.anthropic_server import AnthropicServer
from tests.support.chat_server import ChatServer
from tests.support.frontdoor_util import record_manifest, replay_manifest, run_cli, serving, summary

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(180)]

HI = [{"role": "user", "content": "hi"}]
BYE = [{"role": "user", "content": "bye"}]
NOPE = [{"role": "user", "content": "not in the fixture"}]


def _fixture(tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "fixture.jsonl"
    entries = [
        (request_hash({"messages": HI}), {"content": "hello"}),
        (request_hash({"messages": BYE}), {"content": "goodbye"}),
        (request_hash({"messages": HI, "params": {"max_tokens": 20}}), {"content": "hello A"}),
    ]
    path.write_bytes(b"".join(entry_line(h, response=r) + b"\n" for h, r in entries))
    return {"provider": {"kind": "replay", "fixture": str(path)}}


def _jsonl(lines: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def _chat_line(custom_id: str, messages: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
    body = {"model": "gpt-test", "messages": messages, **more}
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}


LINES = [_chat_line("a", HI), _chat_line("b", NOPE), _chat_line("c", BYE)]


def _openai_batch(client: openai.OpenAI, lines: list[dict[str, Any]]) -> tuple[Any, str, str]:
    uploaded = client.files.create(file=("in.jsonl", _jsonl(lines)), purpose="batch")
    batch = client.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    out = client.files.content(batch.output_file_id).text if batch.output_file_id else ""
    err = client.files.content(batch.error_file_id).text if batch.error_file_id else ""
    return batch, out, err


def _rows(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def test_openai_files_and_batches_in_process(tmp_path: Path) -> None:
    manifest = _fixture(tmp_path)
    outputs = []
    for _ in range(2):  # replayed twice: the same output
        with openai_client(manifest) as client:
            batch, out, err = _openai_batch(client, LINES)
            assert batch.status == "completed"
            assert (batch.request_counts.total, batch.request_counts.completed) == (3, 2)
            assert batch.request_counts.failed == 1
            done = _rows(out)
            assert [(r["custom_id"], r["response"]["status_code"]) for r in done] == [
                ("a", 200),
                ("c", 200),
            ]
            texts = [r["response"]["body"]["choices"][0]["message"]["content"] for r in done]
            assert texts == ["hello", "goodbye"]
            (failed,) = _rows(err)
            assert failed["custom_id"] == "b" and failed["response"]["status_code"] == 422
            assert failed["response"]["body"]["error"]["type"] == "replay_miss"
            assert failed["error"]["code"] == 422
            assert failed["error"]["message"].startswith("no replay fixture matches")
            # retrieve, cancel (a completed batch stays so), list, the upload itself.
            assert client.batches.retrieve(batch.id).output_file_id == batch.output_file_id
            assert client.batches.cancel(batch.id).status == "completed"
            assert [b.id for b in client.batches.list()] == [batch.id]
            assert client.files.retrieve(batch.input_file_id).purpose == "batch"
            with pytest.raises(openai.NotFoundError):
                client.batches.retrieve("batch_nowhere")
            with pytest.raises(openai.NotFoundError):
                client.files.content("file-nowhere")
            outputs.append((out, err))
    assert outputs[0] == outputs[1]


def test_an_invalid_input_file_fails_the_batch_naming_each_line(tmp_path: Path) -> None:
    lines: list[Any] = [
        _chat_line("a", HI),
        _chat_line("a", BYE),  # a repeated custom_id
        {**_chat_line("c", HI), "url": "/v1/responses"},
    ]
    with openai_client(_fixture(tmp_path)) as client:
        uploaded = client.files.create(
            file=("in.jsonl", _jsonl(lines) + b"not json\n"), purpose="batch"
        )
        batch = client.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        assert batch.status == "failed" and batch.output_file_id is None
        assert batch.errors is not None and batch.errors.data is not None
        assert [(e.code, e.line) for e in batch.errors.data] == [
            ("duplicate_custom_id", 2),
            ("mismatched_url", 3),
            ("invalid_json_line", 4),
        ]
        with pytest.raises(openai.BadRequestError, match="is not served here"):
            client.batches.create(
                input_file_id=uploaded.id, endpoint="/v1/moderations", completion_window="24h"
            )
        with pytest.raises(openai.NotFoundError):
            client.batches.create(
                input_file_id="file-nowhere",
                endpoint="/v1/chat/completions",
                completion_window="24h",
            )


def test_a_streaming_line_is_that_lines_error_only(tmp_path: Path) -> None:
    with openai_client(_fixture(tmp_path)) as client:
        _batch, out, err = _openai_batch(
            client, [_chat_line("a", HI), _chat_line("s", HI, stream=True)]
        )
    assert [r["custom_id"] for r in _rows(out)] == ["a"]
    (failed,) = _rows(err)
    assert failed["custom_id"] == "s" and failed["response"]["status_code"] == 400


def test_the_async_client_runs_a_batch_on_the_native_async_path(tmp_path: Path) -> None:
    async def main() -> list[str]:
        async with async_openai_client(_fixture(tmp_path)) as client:
            uploaded = await client.files.create(file=("in.jsonl", _jsonl(LINES)), purpose="batch")
            batch = await client.batches.create(
                input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
            )
            assert batch.output_file_id is not None
            content = await client.files.content(batch.output_file_id)
            return [r["custom_id"] for r in _rows(content.text)]

    assert asyncio.run(main()) == ["a", "c"]


REQUESTS: Any = [
    {"custom_id": "a", "params": {"model": "m", "max_tokens": 20, "messages": HI}},
    {"custom_id": "b", "params": {"model": "m", "max_tokens": 20, "messages": NOPE}},
]


def _anthropic_results(client: anthropic.Anthropic) -> list[Any]:
    batch = client.messages.batches.create(requests=REQUESTS)
    assert batch.processing_status == "ended"
    assert (batch.request_counts.succeeded, batch.request_counts.errored) == (1, 1)
    assert client.messages.batches.retrieve(batch.id).results_url == batch.results_url
    return list(client.messages.batches.results(batch.id))


def test_anthropic_message_batches_in_process(tmp_path: Path) -> None:
    with anthropic_client(_fixture(tmp_path)) as client:
        ok, missed = _anthropic_results(client)
        assert ok.custom_id == "a" and ok.result.type == "succeeded"
        assert ok.result.message.content[0].text == "hello A"
        assert missed.custom_id == "b" and missed.result.type == "errored"
        assert missed.result.error.error.type == "replay_miss"
        (listed,) = client.messages.batches.list()
        assert client.messages.batches.cancel(listed.id).processing_status == "ended"
        assert client.messages.batches.delete(listed.id).type == "message_batch_deleted"
        with pytest.raises(anthropic.NotFoundError):
            client.messages.batches.retrieve(listed.id)
        with pytest.raises(anthropic.BadRequestError, match="custom_id"):
            client.messages.batches.create(
                requests=[{"custom_id": "no spaces", "params": REQUESTS[0]["params"]}]
            )


def test_both_vendors_batches_at_the_front_door(tmp_path: Path) -> None:
    manifest = replay_manifest(tmp_path, Path(_fixture(tmp_path)["provider"]["fixture"]))
    with serving(manifest) as (_proc, info):
        client = openai.OpenAI(base_url=info["openai_base_url"], api_key=info["token"])
        _batch, out, err = _openai_batch(client, LINES)
        client.close()
        assert [r["custom_id"] for r in _rows(out)] == ["a", "c"]
        assert [r["custom_id"] for r in _rows(err)] == ["b"]
        ant = anthropic.Anthropic(base_url=info["anthropic_base_url"], api_key=info["token"])
        ok, missed = _anthropic_results(ant)
        ant.close()
        assert ok.result.type == "succeeded" and missed.result.type == "errored"
        # A batch path with a method it does not take: a 404 listing what is served.
        with pytest.raises(openai.NotFoundError, match="POST /v1/batches"):
            openai.OpenAI(
                base_url=info["openai_base_url"], api_key=info["token"], max_retries=0
            ).delete("/batches/x", cast_to=object)


def test_the_store_is_bounded_oldest_first() -> None:
    store = Store(max_items=3, max_bytes=10)
    first = store.add_file("a", "batch", b"12345")
    second = store.add_file("b", "batch", b"12345")
    third = store.add_file("c", "batch", b"1")  # over 10 bytes: the oldest goes
    assert store.file(first.id) is None and store.file(second.id) is not None
    assert store.file(third.id) is not None
    with pytest.raises(ValueError, match="at most 10 bytes"):
        store.add_file("d", "batch", b"x" * 11)
    for n in range(5):
        store.put_batch({"id": f"batch_{n}"})
    assert [b["id"] for b in store.batches("batch_")] == ["batch_4", "batch_3", "batch_2"]


TASK = textwrap.dedent(
    """
    from inspect_ai import Task, task
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import includes
    from inspect_ai.solver import generate

    @task
    def colours():
        return Task(
            dataset=[Sample(input=f"Name colour {i}.", target=str(i)) for i in range(3)],
            solver=generate(),
            scorer=includes(),
        )
    """
)


def _inspect(
    manifest: Path, tmp_path: Path, logs: str, model: str = "openai/gpt-test"
) -> tuple[Any, list[str]]:
    from inspect_ai.log import read_eval_log

    (tmp_path / "task.py").write_text(TASK)
    (tmp_path / "batch.yaml").write_text("size: 3\nsend_delay: 0.2\ntick: 0.2\n")
    inspect = str(Path(sys.executable).with_name("inspect"))
    env = dict(
        os.environ,
        INSPECT_LOG_DIR=str(tmp_path / logs),
        INSPECT_DISPLAY="none",
        INSPECT_CACHE_DIR=str(tmp_path / "cache"),
        XDG_DATA_HOME=str(tmp_path / "data"),
    )
    # Relative, as a user types it (Inspect globs the task's path from its directory).
    command = [inspect, "eval", "task.py", "--model", model]
    done = run_cli(
        manifest,
        [*command, "--batch", "batch.yaml", "--max-retries", "0"],
        env=env,
        cwd=tmp_path,
        timeout=150,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # Inspect's batcher says it sent the three samples as one batch of the front door's.
    said = done.stdout + done.stderr
    prefix = "msgbatch_" if model.startswith("anthropic/") else "batch_"
    assert f"Created batch {prefix}" in said and "with 3 requests" in said, said[-3000:]
    (path,) = (tmp_path / logs).glob("*.eval")
    log = read_eval_log(str(path))
    assert log.status == "success"
    assert log.samples is not None
    return done, sorted(s.output.completion for s in log.samples)


@pytest.mark.timeout(400)
@pytest.mark.slow  # most of a minute or more: make test-tools runs it
def test_inspect_batch_recorded_through_a_loopback_vendor_then_replayed_twice(
    chat: ChatServer, tmp_path: Path
) -> None:
    pytest.importorskip("inspect_ai")
    recording = record_manifest(tmp_path, chat.base_url("echo"))
    done, recorded = _inspect(recording, tmp_path, "logs-record")
    assert summary(done.stderr).startswith("replay-actor: 3 served, 0 missed")
    # Each line was one live call, made by the record adapter one at a time.
    assert len(chat.received) == 3
    assert all(r.path.endswith("/chat/completions") for r in chat.received)
    fixture = tmp_path / "recorded.jsonl"
    replaying = replay_manifest(tmp_path, fixture)
    for run in ("logs-a", "logs-b"):
        done, replayed = _inspect(replaying, tmp_path, run)
        assert summary(done.stderr).startswith("replay-actor: 3 served, 0 missed")
        assert replayed == recorded
    assert len(chat.received) == 3  # nothing live while replaying


@pytest.mark.timeout(400)
@pytest.mark.slow  # most of a minute or more: make test-tools runs it
def test_inspect_anthropic_batch_recorded_through_a_loopback_vendor_then_replayed_twice(
    claude: AnthropicServer, tmp_path: Path
) -> None:
    """``--model anthropic/… --batch``: Inspect's Message Batches batcher creates the
    batch, finds it ended on its first poll, and reads its results_url."""
    pytest.importorskip("inspect_ai")
    model = "anthropic/claude-test"
    recording = record_manifest(
        tmp_path, claude.base_url("echo"), adapter="anthropic", model="claude-live"
    )
    done, recorded = _inspect(recording, tmp_path, "logs-record", model)
    assert summary(done.stderr).startswith("replay-actor: 3 served, 0 missed")
    assert len(claude.received) == 3  # each request one live /v1/messages call
    assert all(r.path.endswith("/v1/messages") for r in claude.received)
    assert sorted(text.partition(": ")[2] for text in recorded) == [
        f"Name colour {i}." for i in range(3)
    ]
    replaying = replay_manifest(tmp_path, tmp_path / "recorded.jsonl")
    for run in ("logs-a", "logs-b"):
        done, replayed = _inspect(replaying, tmp_path, run, model)
        assert summary(done.stderr).startswith("replay-actor: 3 served, 0 missed")
        assert replayed == recorded
    assert len(claude.received) == 3  # nothing live while replaying


def test_embedding_lines_are_answered_like_embeddings_create(tmp_path: Path) -> None:
    fixture = tmp_path / "embed.jsonl"
    texts = ["the cat", "the dog"]
    digest = request_hash({"kind": "embedding", "model": "text-embedding-3-small", "texts": texts})
    fixture.write_bytes(entry_line(digest, response={"embeddings": [[0.5], [0.25]]}) + b"\n")
    manifest = {"provider": {"kind": "replay", "fixture": str(fixture)}}
    body: Any = {"model": "text-embedding-3-small", "input": texts, "encoding_format": "float"}
    line = {"custom_id": "e", "method": "POST", "url": "/v1/embeddings", "body": body}
    with openai_client(manifest) as client:
        uploaded = client.files.create(file=("in.jsonl", _jsonl([line])), purpose="batch")
        batch = client.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/embeddings", completion_window="24h"
        )
        assert batch.output_file_id is not None and batch.error_file_id is None
        (row,) = _rows(client.files.content(batch.output_file_id).text)
        alone = client.embeddings.create(**body)
    vectors = [item["embedding"] for item in row["response"]["body"]["data"]]
    assert vectors == [e.embedding for e in alone.data] == [[0.5], [0.25]]


SECRET = "sk-planted-0123456789abcdef"


def test_private_mode_batches_carry_no_hash_and_no_rejected_bytes(tmp_path: Path) -> None:
    manifest = _fixture(tmp_path)
    manifest["provider"]["data"] = "private"
    secret_line = _chat_line("s", [{"role": "user", "content": SECRET}])
    with openai_client(manifest) as client:
        _batch, out, err = _openai_batch(client, [_chat_line("a", HI), secret_line])
        missed = request_hash({"messages": [{"role": "user", "content": SECRET}]})
        assert missed.removeprefix("sha256:")[:16] not in err
        assert SECRET not in err and SECRET not in out
        (failed,) = _rows(err)
        assert failed["error"]["message"].startswith("no replay fixture matches this request; ")
        assert "HASH withheld (private data)" in failed["error"]["message"]
        # A line that is not JSON, holding the secret: the failed batch never repeats it.
        uploaded = client.files.create(
            file=("in.jsonl", b'{"custom_id": "' + SECRET.encode() + b'" not json\n'),
            purpose="batch",
        )
        rejected = client.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        assert rejected.status == "failed" and SECRET not in rejected.model_dump_json()
    with anthropic_client(manifest) as ant:
        created = ant.messages.batches.create(
            requests=[
                {
                    "custom_id": "s",
                    "params": {
                        "model": "m",
                        "max_tokens": 20,
                        "messages": [{"role": "user", "content": SECRET}],
                    },
                }
            ]
        )
        (result,) = ant.messages.batches.results(created.id)
        # replay_miss is not one of the SDK's error literals: dump without its warning.
        dumped = result.model_dump_json(warnings=False)
        assert result.result.type == "errored" and SECRET not in dumped
        assert "sha256" not in dumped


def test_every_line_and_a_failed_batch_count_in_the_run_summary(tmp_path: Path) -> None:
    import httpx2

    from replay_actor import open_provider
    from replay_actor.integrations.transport import ProviderTransport
    from replay_actor.serving import Outcomes

    outcomes = Outcomes()
    provider = open_provider(_fixture(tmp_path))
    transport = ProviderTransport(provider, "openai", outcomes=outcomes)
    with openai.OpenAI(api_key="k", http_client=httpx2.Client(transport=transport)) as client:
        _openai_batch(client, LINES)
        assert (outcomes["served"], outcomes["missed"], outcomes["invalid"]) == (2, 1, 0)
        bad = client.files.create(file=("in.jsonl", b"not json\n"), purpose="batch")
        client.batches.create(
            input_file_id=bad.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        assert outcomes["invalid"] == 1
        with pytest.raises(openai.NotFoundError):
            client.batches.retrieve("batch_nowhere")
        assert outcomes["invalid"] == 2


def test_each_line_is_one_call_in_the_run_log(tmp_path: Path) -> None:
    manifest = _fixture(tmp_path)
    manifest["provider"]["log"] = str(tmp_path / "run.log")
    with openai_client(manifest) as client:
        _openai_batch(client, LINES)
    with anthropic_client(manifest) as ant:
        ant.messages.batches.create(requests=REQUESTS)
    logged = [json.loads(line) for line in (tmp_path / "run.log").read_text().splitlines()]
    assert [(line["outcome"], line["vendor"], line["path"]) for line in logged] == [
        ("served", "openai", "/v1/chat/completions"),
        ("miss", "openai", "/v1/chat/completions"),
        ("served", "openai", "/v1/chat/completions"),
        ("served", "anthropic", "/v1/messages"),
        ("miss", "anthropic", "/v1/messages"),
    ]


#: A child that runs three batches through the front door and prints what each line got:
#: Ollama's /api/chat (streams unless told not to), Gemini's :streamGenerateContent.
STREAMING_BATCHES = textwrap.dedent(
    """
    import json, openai
    client = openai.OpenAI()
    def run(endpoint, bodies):
        lines = [{"custom_id": name, "method": "POST", "url": endpoint, "body": body}
                 for name, body in bodies]
        text = "".join(json.dumps(line) + "\\n" for line in lines).encode()
        upload = client.files.create(file=("in.jsonl", text), purpose="batch")
        batch = client.batches.create(
            input_file_id=upload.id, endpoint=endpoint, completion_window="24h")
        rows = []
        for file_id in (batch.output_file_id, batch.error_file_id):
            if file_id:
                rows += [json.loads(r) for r in client.files.content(file_id).text.splitlines()]
        return sorted(rows, key=lambda row: row["custom_id"])
    hi = [{"role": "user", "content": "hi"}]
    nope = [{"role": "user", "content": "not in the fixture"}]
    print(json.dumps(run("/api/chat", [
        ("a", {"model": "llama3", "messages": hi}),
        ("b", {"model": "llama3", "messages": hi, "stream": False}),
        ("c", {"model": "llama3", "messages": nope, "stream": False}),
    ])))
    print(json.dumps(run("/v1beta/models/gemini-x:streamGenerateContent", [
        ("g", {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
    ])))
    """
)


def test_lines_of_endpoints_that_stream_by_default_are_refused_never_a_500(
    tmp_path: Path,
) -> None:
    # One answer for "hi": only the line that does not stream may take it.
    fixture = tmp_path / "fixture.jsonl"
    fixture.write_bytes(
        entry_line(request_hash({"messages": HI}), responses=[{"content": "only once"}]) + b"\n"
    )
    done = run_cli(replay_manifest(tmp_path, fixture), [sys.executable, "-c", STREAMING_BATCHES])
    # The child exits 0; the miss and the refused lines fail the run all the same.
    assert done.returncode == 4, done.stderr
    assert summary(done.stderr).startswith(
        "replay-actor: 1 served, 1 missed, 0 exhausted, 0 blocked, 2 invalid;"
    ), done.stderr
    ollama, gemini = (json.loads(line) for line in done.stdout.splitlines())
    a, b, c = ollama
    assert (a["response"]["status_code"], a["error"]["code"]) == (400, 400)
    assert 'send "stream": false' in a["error"]["message"]
    assert b["response"]["status_code"] == 200 and b["error"] is None
    assert b["response"]["body"]["message"]["content"] == "only once"
    # Ollama's error envelope is {"error": "<text>"}: its message is carried all the same.
    assert c["error"]["code"] == c["response"]["status_code"] != 500
    assert c["error"]["message"].startswith("no replay fixture matches this request")
    assert c["response"]["body"]["error"].startswith("no replay fixture matches this request")
    (g,) = gemini
    assert g["error"]["code"] == 400 and "not :streamGenerateContent" in g["error"]["message"]


def test_a_failed_batch_lists_a_bounded_number_of_errors(tmp_path: Path) -> None:
    from replay_actor.serving.batches.openai import MAX_LINE_ERRORS

    # A line per two bytes: every one an error. The batch lists the first ones, then says
    # it stopped; it is not one error object kept per line.
    upload = b"x\n" * 200_000
    with openai_client(_fixture(tmp_path)) as client:
        uploaded = client.files.create(file=("in.jsonl", upload), purpose="batch")
        batch = client.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        assert batch.status == "failed" and batch.errors is not None
        errors = batch.errors.data or []
        assert len(errors) == MAX_LINE_ERRORS + 1
        assert {e.code for e in errors[:-1]} == {"invalid_json_line"}
        assert [e.line for e in errors[:-1]] == list(range(1, MAX_LINE_ERRORS + 1))
        assert (errors[-1].code, errors[-1].line) == ("too_many_errors", MAX_LINE_ERRORS + 1)
        kept = client.batches.retrieve(batch.id)
        assert len(kept.model_dump_json()) < 32 * 1024
