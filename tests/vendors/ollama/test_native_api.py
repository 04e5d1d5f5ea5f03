"""Ollama's native API through the real ``ollama`` client (docs/ollama.md): chat,
generate (NDJSON streams, its default, and ``stream: false``) and embed, recorded through
a loopback fake Ollama (tests/support/endpoints_server.py) with the ``ollama`` adapter, replayed
twice in-process and under ``replay-actor run`` with no code changed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from replay_actor import async_ollama_client, ollama_client, open_provider
from replay_actor.integrations.httpx_transport import HttpxProviderTransport
from tests.support.endpoints_server import EndpointsServer, endpoints_server, vector
from tests.support.frontdoor_util import record_manifest, replay_manifest, run_cli

ollama = pytest.importorskip("ollama")

__all__ = ["endpoints_server"]

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(120)]

#: What an application does with the ollama client (also run, unchanged, under ``run``).
APP = """
import json, ollama
client = ollama.Client()
chat = client.chat(model="llama3", messages=[{"role": "user", "content": "hi"}],
                   options={"temperature": 0, "num_predict": 8}, stream=False)
streamed = "".join(part.message.content for part in client.chat(
    model="llama3", messages=[{"role": "user", "content": "hi again"}], stream=True))
generated = "".join(
    part.response for part in client.generate(model="llama3", prompt="Once", stream=True))
whole = client.generate(model="llama3", prompt="Twice", stream=False)
embedded = client.embed(model="nomic-embed-text", input=["a", "b"])
print(json.dumps({
    "chat": [chat.message.content, chat.done_reason, chat.prompt_eval_count, chat.eval_count],
    "streamed": streamed,
    "generated": generated,
    "whole": whole.response,
    "vectors": embedded.embeddings,
}))
"""


def _run_app(client: Any) -> dict[str, Any]:
    """``APP`` in this process, on ``client``."""
    scope: dict[str, Any] = {}
    printed: list[str] = []
    code = APP.replace("client = ollama.Client()", "").replace("print(", "printed.append(")
    exec(code, {"client": client, "printed": printed, **scope})  # our own text, above
    result: dict[str, Any] = json.loads(printed[0])
    return result


def _client(manifest: Path) -> Any:
    return ollama_client(manifest)


def test_ollama_records_then_replays_in_process_and_under_run(
    tmp_path: Path, endpoints_server: EndpointsServer
) -> None:
    manifest = record_manifest(tmp_path, endpoints_server.url, adapter="ollama", model="llama3")
    client = _client(manifest)
    try:
        recorded = _run_app(client)
    finally:
        client.close()
    sent = {r.path: r.body for r in endpoints_server.received}
    # The adapter never streams, and speaks Ollama's option names.
    assert sent["/api/chat"]["stream"] is False
    assert sent["/api/generate"]["stream"] is False
    first_chat = endpoints_server.received[0].body
    assert first_chat["options"] == {"temperature": 0, "num_predict": 8}
    assert sent["/api/embed"] == {"model": "nomic-embed-text", "input": ["a", "b"]}
    assert recorded["chat"][:2] == ["echo: hi", "stop"]
    assert recorded["streamed"] == "echo: hi again"
    assert (recorded["generated"], recorded["whole"]) == ("echo: Once", "echo: Twice")
    assert recorded["vectors"] == [vector("a"), vector("b")]
    calls = len(endpoints_server.received)

    replay = replay_manifest(tmp_path, tmp_path / "recorded.jsonl")
    for _ in range(2):
        client = _client(replay)
        try:
            assert _run_app(client) == recorded
        finally:
            client.close()
        done = run_cli(replay, [sys.executable, "-c", APP])
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == recorded
        assert "5 served, 0 missed" in done.stderr
    assert len(endpoints_server.received) == calls


def test_a_body_without_stream_is_answered_as_ndjson(tmp_path: Path) -> None:
    """The API streams by default (the Python client always says which it wants)."""
    import httpx

    from replay_actor import request_hash

    asked = {"messages": [{"role": "user", "content": "hi"}]}
    fixture = tmp_path / "f.jsonl"
    line = {"schema_version": 1, "request_hash": request_hash(asked), "response": {"content": "yo"}}
    fixture.write_text(json.dumps(line) + "\n")
    transport = HttpxProviderTransport(open_provider(replay_manifest(tmp_path, fixture)), "ollama")
    with httpx.Client(transport=transport, base_url="http://ollama.invalid") as http:
        body = {"model": "llama3", "messages": asked["messages"], "keep_alive": "5m"}
        got = http.post("/api/chat", json=body)
        assert got.headers["content-type"] == "application/x-ndjson"
        lines = [json.loads(text) for text in got.text.splitlines()]
        assert [x["done"] for x in lines] == [False, True]
        assert lines[0]["message"] == {"role": "assistant", "content": "yo"}
        whole = http.post("/api/chat", json={**body, "stream": False}).json()
        assert whole["message"]["content"] == "yo" and whole["done"] is True


def test_an_ollama_miss_is_its_error_and_not_retried(tmp_path: Path) -> None:
    fixture = tmp_path / "empty.jsonl"
    fixture.write_text("")
    client = _client(replay_manifest(tmp_path, fixture))
    try:
        with pytest.raises(ollama.ResponseError) as caught:
            client.chat(model="llama3", messages=[{"role": "user", "content": "?"}], stream=False)
        assert caught.value.status_code == 422
        assert "no replay fixture matches" in caught.value.error
        with pytest.raises(ollama.ResponseError, match="images cannot be replayed"):
            client.generate(model="llama3", prompt="x", images=["aGk="], stream=False)
    finally:
        client.close()


def test_the_async_client_replays_on_the_native_async_path(tmp_path: Path) -> None:
    import asyncio

    from replay_actor import request_hash

    asked = {"kind": "embedding", "model": "nomic-embed-text", "texts": ["a"]}
    fixture = tmp_path / "f.jsonl"
    line = {
        "schema_version": 1,
        "request_hash": request_hash(asked),
        "response": {"embeddings": [[0.5]]},
    }
    fixture.write_text(json.dumps(line) + "\n")

    async def main() -> list[Any]:
        client: Any = async_ollama_client(replay_manifest(tmp_path, fixture))
        try:
            got = await client.embed(model="nomic-embed-text", input="a")
        finally:
            await client.close()
        return list(got.embeddings)

    assert asyncio.run(main()) == [[0.5]]
