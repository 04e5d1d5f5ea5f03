"""The endpoints beyond chat through the real SDKs: embeddings, token counting and legacy
completions, recorded through a loopback fake vendor (tests/support/endpoints_server.py), then
replayed twice with identical output in-process and through the front door.
"""

from __future__ import annotations

import base64
import json
import struct
import sys
from pathlib import Path
from typing import Any, cast

import anthropic
import ollama
import openai
import pytest
from google import genai
from google.genai import types

from replay_actor import (
    anthropic_client,
    gemini_client,
    openai_client,
    request_hash,
)
from replay_actor.vendors import make_vendor
from tests.support.endpoints_server import EndpointsServer, endpoints_server, vector
from tests.support.frontdoor_util import record_manifest, replay_manifest, serving

__all__ = ["endpoints_server"]

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(120)]

EMBED_MODEL = "text-embedding-3-small"
TEXTS = ["the cat sat", "on the mat"]
KEY_ENV = "REPLAY_ACTOR_TEST_ENDPOINTS_KEY"


def _record_manifest(folder: Path, server: EndpointsServer, adapter: str) -> Path:
    bases = {"openai": "/v1", "anthropic": "", "gemini": ""}
    return record_manifest(
        folder, server.url + bases[adapter], adapter=adapter, model="m-live", api_key_env=KEY_ENV
    )


def _openai_calls(client: openai.OpenAI) -> dict[str, Any]:
    """Every OpenAI endpoint of this module, called as an application would."""
    as_base64 = client.embeddings.create(model=EMBED_MODEL, input=TEXTS)
    as_float = client.embeddings.create(model=EMBED_MODEL, input=TEXTS, encoding_format="float")
    one = client.embeddings.create(model=EMBED_MODEL, input="the cat sat", dimensions=4)
    done = client.completions.create(model="instruct", prompt="Once upon", max_tokens=5)
    streamed = client.completions.create(
        model="instruct", prompt="Once upon", max_tokens=5, stream=True
    )
    counted = client.responses.input_tokens.count(model="gpt-x", input="How many?")
    return {
        "base64": [e.embedding for e in as_base64.data],
        "float": [e.embedding for e in as_float.data],
        "one": [e.embedding for e in one.data],
        "usage": as_base64.usage.model_dump(),
        "completion": (done.choices[0].text, done.choices[0].finish_reason, done.id),
        "streamed": "".join(chunk.choices[0].text for chunk in streamed if chunk.choices),
        "input_tokens": counted.input_tokens,
    }


def _float32(vectors: list[list[float]]) -> list[bytes]:
    return [struct.pack(f"<{len(v)}f", *v) for v in vectors]


def test_openai_endpoints_record_then_replay_float32_exact(
    tmp_path: Path, endpoints_server: EndpointsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test-endpoints")
    with openai_client(_record_manifest(tmp_path, endpoints_server, "openai")) as client:
        recorded = _openai_calls(client)
    # The live side always asked for base64: what is kept is the model's float32 exactly.
    sent = [r.body for r in endpoints_server.received if r.path.endswith("/embeddings")]
    assert [b["encoding_format"] for b in sent] == ["base64"] * 3
    assert sent[2]["dimensions"] == 4 and sent[0]["model"] == EMBED_MODEL
    assert _float32(recorded["base64"]) == _float32([vector(t) for t in TEXTS])
    assert recorded["base64"] == recorded["float"]
    assert recorded["completion"][:2] == ("echo: Once upon", "stop")
    assert recorded["streamed"] == "echo: Once upon"
    assert recorded["input_tokens"] > 0
    calls = len(endpoints_server.received)
    replay = replay_manifest(tmp_path, tmp_path / "recorded.jsonl")
    for _ in range(2):
        with openai_client(replay) as client:
            again = _openai_calls(client)
        assert again == {**recorded, "completion": again["completion"]}
        assert again["completion"][:2] == recorded["completion"][:2]
        assert _float32(again["float"]) == _float32(recorded["base64"])
    assert len(endpoints_server.received) == calls  # replay asked nothing live


def test_the_front_door_serves_the_same_recording(
    tmp_path: Path, endpoints_server: EndpointsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test-endpoints")
    with openai_client(_record_manifest(tmp_path, endpoints_server, "openai")) as client:
        recorded = _openai_calls(client)
    replay = replay_manifest(tmp_path, tmp_path / "recorded.jsonl")
    outputs = []
    for _ in range(2):
        with serving(replay) as (_, info):
            client = openai.OpenAI(base_url=info["openai_base_url"], api_key=info["token"])
            outputs.append(_openai_calls(client))
            client.close()
    assert outputs[0] == outputs[1]
    assert outputs[0]["base64"] == recorded["base64"] == outputs[0]["float"]
    assert outputs[0]["input_tokens"] == recorded["input_tokens"]


def test_anthropic_count_tokens_records_and_replays(
    tmp_path: Path, endpoints_server: EndpointsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-ant-test")
    messages: Any = [{"role": "user", "content": "count me"}]
    manifest = _record_manifest(tmp_path, endpoints_server, "anthropic")
    with anthropic_client(manifest) as client:
        recorded = client.messages.count_tokens(
            model="claude-x", system="Be brief", messages=messages
        )
    sent = endpoints_server.received[-1]
    assert sent.path == "/v1/messages/count_tokens"
    assert set(sent.body) == {"model", "system", "messages"}  # no max_tokens to the counter
    assert recorded.input_tokens == len(json.dumps(sent.body, sort_keys=True))
    replay = replay_manifest(tmp_path, tmp_path / "recorded.jsonl")
    for _ in range(2):
        with anthropic_client(replay) as client:
            again = client.messages.count_tokens(
                model="claude-other", system="Be brief", messages=messages
            )
        assert again == recorded
    with serving(replay) as (_, info):
        remote = anthropic.Anthropic(base_url=info["anthropic_base_url"], api_key=info["token"])
        got = remote.messages.count_tokens(model="claude-x", system="Be brief", messages=messages)
        remote.close()
    assert got == recorded
    # Counting a conversation is not answering it: the chat call misses.
    with anthropic_client(replay) as client, pytest.raises(anthropic.NotFoundError):
        client.messages.create(model="claude-x", max_tokens=5, system="Be brief", messages=messages)


def _gemini_calls(client: genai.Client) -> dict[str, Any]:
    embedded = client.models.embed_content(
        model="text-embedding-004",
        contents=cast("types.ContentListUnion", TEXTS),  # (the union lists PIL images)
        config=types.EmbedContentConfig(task_type="RETRIEVAL_DOCUMENT"),
    )
    counted = client.models.count_tokens(model="gemini-x", contents="How many tokens?")
    return {
        "vectors": [e.values for e in embedded.embeddings or []],
        "tokens": counted.total_tokens,
    }


def test_gemini_embed_and_count_tokens_record_and_replay(
    tmp_path: Path, endpoints_server: EndpointsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "gm-test")
    with gemini_client(_record_manifest(tmp_path, endpoints_server, "gemini")) as client:
        recorded = _gemini_calls(client)
    paths = [r.path for r in endpoints_server.received]
    # The embedding went to its own model's URL, not the table's chat model.
    assert paths[0] == "/v1beta/models/text-embedding-004:batchEmbedContents"
    assert paths[1] == "/v1beta/models/m-live:countTokens"
    assert recorded["vectors"] == [vector(t) for t in TEXTS]
    replay = replay_manifest(tmp_path, tmp_path / "recorded.jsonl")
    for _ in range(2):
        with gemini_client(replay) as client:
            assert _gemini_calls(client) == recorded
    with serving(replay) as (_, info):
        remote = genai.Client(
            api_key=info["token"], http_options=types.HttpOptions(base_url=info["gemini_base_url"])
        )
        assert _gemini_calls(remote) == recorded


def test_an_embedding_model_is_part_of_its_hash(tmp_path: Path) -> None:
    """A vector recorded for one model is never served to a caller asking another."""
    plain = {"kind": "embedding", "model": EMBED_MODEL, "texts": TEXTS}
    chat_answered = {"kind": "embedding", "model": EMBED_MODEL, "texts": TEXTS[:1]}
    answers = {
        request_hash(plain): {"embeddings": [[0.5], [0.25]]},
        request_hash(chat_answered): {"content": "not a vector"},
    }
    fixture = tmp_path / "f.jsonl"
    fixture.write_text(
        "".join(
            json.dumps({"schema_version": 1, "request_hash": h, "response": r}) + "\n"
            for h, r in answers.items()
        )
    )
    with openai_client(replay_manifest(tmp_path, fixture)) as client:
        got = client.embeddings.create(model=EMBED_MODEL, input=TEXTS, encoding_format="float")
        assert [e.embedding for e in got.data] == [[0.5], [0.25]]
        with pytest.raises(openai.NotFoundError, match="no replay fixture matches"):
            client.embeddings.create(model="text-embedding-3-large", input=TEXTS)
        # An entry for another shape of answer (a chat answer) is a closed failure.
        with pytest.raises(openai.InternalServerError, match="no embeddings"):
            client.embeddings.create(model=EMBED_MODEL, input=TEXTS[0])


def test_one_request_hashes_alike_through_every_reader() -> None:
    body = {"model": EMBED_MODEL, "input": TEXTS, "encoding_format": "base64", "user": "u1"}
    call = make_vendor("openai-embeddings").read_body(body)
    assert call.request == {"kind": "embedding", "model": EMBED_MODEL, "texts": TEXTS}
    assert call.answer_as == "base64"
    gemini_body = {
        "requests": [
            {"model": f"models/{EMBED_MODEL}", "content": {"parts": [{"text": t}]}} for t in TEXTS
        ]
    }
    path = f"/v1beta/models/{EMBED_MODEL}:batchEmbedContents"
    same = make_vendor("gemini-embed").read_body(gemini_body, path)
    assert request_hash(same.request) == request_hash(call.request)


def test_base64_of_a_stored_vector_is_little_endian_float32() -> None:
    from replay_actor._response import read_response
    from replay_actor.vendors._common import VendorCall

    stored = read_response({"embeddings": [[0.1, -2.5]]})
    call = VendorCall(request={"texts": ["x"]}, model="m", answer_as="base64")
    body = make_vendor("openai-embeddings").response_body(stored, call)
    raw = base64.b64decode(body["data"][0]["embedding"])
    assert raw == struct.pack("<2f", 0.1, -2.5)


def test_a_live_adapter_refuses_a_kind_it_cannot_ask_before_sending(
    tmp_path: Path, endpoints_server: EndpointsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from replay_actor import RequestError, open_provider
    from tests.support.frontdoor_util import live_manifest

    monkeypatch.setenv(KEY_ENV, "sk-ant-test")
    manifest = live_manifest(
        tmp_path, endpoints_server.url, adapter="anthropic", api_key_env=KEY_ENV
    )
    provider = open_provider(manifest)
    try:
        with pytest.raises(RequestError, match="cannot ask 'embedding' requests live"):
            provider.complete({"kind": "embedding", "model": "e", "texts": ["a"]})
        with pytest.raises(RequestError, match="cannot ask 'completion' requests live"):
            provider.complete({"kind": "completion", "prompt": "x"})
        counted = provider.complete(
            {"kind": "count_tokens", "messages": [{"role": "user", "content": "hi"}]}
        )
    finally:
        provider.release()
    assert [r.path for r in endpoints_server.received] == ["/v1/messages/count_tokens"]
    assert counted == {
        "input_tokens": len(json.dumps(endpoints_server.received[0].body, sort_keys=True))
    }


#: An unchanged application: each SDK configured from the environment only.
RUN_APP = """
import json, anthropic, openai
from google import genai
from google.genai import types
o = openai.OpenAI()
a = anthropic.Anthropic()
g = genai.Client()
texts = ["the cat sat", "on the mat"]
print(json.dumps({
    "base64": [e.embedding for e in o.embeddings.create(
        model="text-embedding-3-small", input=texts).data],
    "float": [e.embedding for e in o.embeddings.create(
        model="text-embedding-3-small", input=texts, encoding_format="float").data],
    "completion": o.completions.create(
        model="instruct", prompt="Once upon", max_tokens=5).choices[0].text,
    "openai_count": o.responses.input_tokens.count(model="gpt-x", input="How many?").input_tokens,
    "anthropic_count": a.messages.count_tokens(
        model="claude-x", messages=[{"role": "user", "content": "count me"}]).input_tokens,
    "gemini": [e.values for e in g.models.embed_content(
        model="text-embedding-004", contents=texts,
        config=types.EmbedContentConfig(task_type="RETRIEVAL_DOCUMENT")).embeddings],
}))
"""


def test_an_unchanged_app_replays_every_endpoint_under_run(tmp_path: Path) -> None:
    from tests.support.frontdoor_util import run_cli

    texts = ["the cat sat", "on the mat"]
    vectors = [vector(t) for t in texts]
    chat = [{"role": "user", "content": "count me"}]
    answers = {
        request_hash({"kind": "embedding", "model": EMBED_MODEL, "texts": texts}): {
            "embeddings": vectors
        },
        request_hash({"kind": "completion", "prompt": "Once upon", "params": {"max_tokens": 5}}): {
            "content": " a time"
        },
        request_hash(
            {"kind": "count_tokens", "messages": [{"role": "user", "content": "How many?"}]}
        ): {"input_tokens": 3},
        request_hash({"kind": "count_tokens", "messages": chat}): {"input_tokens": 4},
        request_hash(
            {
                "kind": "embedding",
                "model": "text-embedding-004",
                "texts": texts,
                "params": {"taskType": "RETRIEVAL_DOCUMENT"},
            }
        ): {"embeddings": vectors},
    }
    fixture = tmp_path / "f.jsonl"
    fixture.write_text(
        "".join(
            json.dumps({"schema_version": 1, "request_hash": h, "response": r}) + "\n"
            for h, r in answers.items()
        )
    )
    replay = replay_manifest(tmp_path, fixture)
    outputs = []
    for _ in range(2):
        done = run_cli(replay, [sys.executable, "-c", RUN_APP])
        assert done.returncode == 0, done.stderr
        assert "6 served, 0 missed" in done.stderr
        outputs.append(json.loads(done.stdout))
    assert outputs[0] == outputs[1]
    assert _float32(outputs[0]["base64"]) == _float32(vectors) == _float32(outputs[0]["gemini"])
    assert outputs[0]["base64"] == outputs[0]["float"] == vectors
    assert (outputs[0]["completion"], outputs[0]["openai_count"]) == (" a time", 3)
    assert outputs[0]["anthropic_count"] == 4


SECRET = "PLANTED-secret-7f3a9c"


def test_private_misses_carry_no_hash_and_no_text(tmp_path: Path) -> None:
    """Private mode: an embedding, count or Ollama miss says nothing of the request."""
    from replay_actor import ollama_client

    fixture = tmp_path / "empty.jsonl"
    fixture.write_text("")
    replay = replay_manifest(tmp_path, fixture, private=True)
    bodies = []
    with openai_client(replay) as client:
        with pytest.raises(openai.NotFoundError) as caught:
            client.embeddings.create(model=EMBED_MODEL, input=[SECRET])
        bodies.append(json.dumps(caught.value.body))
        with pytest.raises(openai.NotFoundError) as caught:
            client.completions.create(model="m", prompt=SECRET)
        bodies.append(json.dumps(caught.value.body))
    with anthropic_client(replay) as claude, pytest.raises(anthropic.NotFoundError) as miss:
        claude.messages.count_tokens(model="c", messages=[{"role": "user", "content": SECRET}])
    bodies.append(json.dumps(miss.value.body))
    local: Any = ollama_client(replay)
    try:
        with pytest.raises(ollama.ResponseError) as failed:
            local.embed(model="nomic", input=SECRET)
        bodies.append(failed.value.error)
    finally:
        local.close()
    for body in bodies:
        assert "no replay fixture matches" in body
        assert SECRET not in body and "sha256" not in body


def test_gemini_single_embed_content_is_answered_in_its_own_form(tmp_path: Path) -> None:
    from replay_actor import open_provider
    from replay_actor.serving import Serving

    asked = {"kind": "embedding", "model": "text-embedding-004", "texts": ["ab"], "dimensions": 2}
    fixture = tmp_path / "f.jsonl"
    line = {
        "schema_version": 1,
        "request_hash": request_hash(asked),
        "response": {"embeddings": [[0.5, 0.25]]},
    }
    fixture.write_text(json.dumps(line) + "\n")
    serving = Serving(open_provider(replay_manifest(tmp_path, fixture)), "gemini")
    try:
        body = {"content": {"parts": [{"text": "a"}, {"text": "b"}]}, "output_dimensionality": 2}
        path = "/v1beta/models/text-embedding-004:embedContent"
        answer = serving.serve("POST", path, json.dumps(body).encode())
        assert (answer.status, json.loads(answer.body)) == (
            200,
            {"embedding": {"values": [0.5, 0.25]}},
        )
        image = {"content": {"parts": [{"inline_data": {"data": "aGk="}}]}}
        refused = serving.serve("POST", path, json.dumps(image).encode())
        assert refused.status == 400 and b"only text is embedded" in refused.body
    finally:
        serving.close()


LITELLM_APP = """
import json, litellm
answer = litellm.embedding(model="text-embedding-3-small", input=["the cat sat", "on the mat"])
print(json.dumps([item["embedding"] for item in answer.data]))
"""


def test_litellm_embedding_replays_under_run(tmp_path: Path) -> None:
    """LiteLLM's embedding(), as a RAG evaluation calls it, unchanged under run."""
    from tests.support.frontdoor_util import quiet_env, run_cli

    pytest.importorskip("litellm")
    texts = ["the cat sat", "on the mat"]
    asked = {"kind": "embedding", "model": EMBED_MODEL, "texts": texts}
    line = {
        "schema_version": 1,
        "request_hash": request_hash(asked),
        "response": {"embeddings": [vector(t) for t in texts]},
    }
    fixture = tmp_path / "f.jsonl"
    fixture.write_text(json.dumps(line) + "\n")
    app = [sys.executable, "-c", LITELLM_APP]
    done = run_cli(replay_manifest(tmp_path, fixture), app, env=quiet_env())
    assert done.returncode == 0, done.stderr
    assert "1 served, 0 missed" in done.stderr
    assert _float32(json.loads(done.stdout)) == _float32([vector(t) for t in texts])


def test_every_new_path_routes_to_its_shape() -> None:
    from replay_actor.serving import Exchange

    exchange = Exchange(None)
    routes = {
        "/v1/embeddings": "openai-embeddings",
        "/openai/v1/embeddings": "openai-embeddings",
        "/v1/completions": "openai-completions",
        "/v1/chat/completions": "openai",
        "/v1/responses/input_tokens": "openai-input-tokens",
        "/v1/responses": "openai-responses",
        "/v1/messages/count_tokens": "anthropic-count-tokens",
        "/v1beta/models/e:embedContent": "gemini-embed",
        "/v1beta/models/e:batchEmbedContents": "gemini-embed",
        "/v1beta/models/g:countTokens": "gemini-count-tokens",
        "/api/chat": "ollama",
        "/api/generate": "ollama-generate",
        "/api/embed": "ollama-embed",
    }
    for path, name in routes.items():
        routed = exchange._route("POST", path, None)
        assert getattr(routed, "name", None) == name, path
    for unserved in ("/api/embeddings", "/v1/images/generations", "/api/tags"):
        got = exchange.prepare("POST", unserved, b"{}")
        assert len(got) == 3 and got[0] == 404, unserved
