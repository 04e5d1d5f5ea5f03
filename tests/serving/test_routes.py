"""Paths before routing (docs/front-door.md, "Paths"): Azure OpenAI's deployment and
``/openai/v1`` routes with the ``api-key`` header, Anthropic's ``/messages`` without
``/v1``, and 404s in the envelope of the vendor the path looks like, listing the served
paths (never a regular expression), raised by each vendor's SDK as its own error."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import textwrap
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from google import genai

from replay_actor.serving import Exchange
from replay_actor.serving._routes import canonical_path, looks_like
from replay_actor.vendors import make_vendor, vendor_names
from tests.support.frontdoor_util import (
    neutral_hash,
    replay_manifest,
    run_cli,
    serving,
    summary,
    write_fixture,
)
from tests.support.paths import ROOT

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(180)]

HI = [{"role": "user", "content": "hi"}]
NODE = shutil.which("node")
NODE_MODULES = ROOT / ".cache" / "node" / "node_modules"
ANTHROPIC_APP = ROOT / "tests" / "frontdoor" / "node" / "ai_sdk_anthropic_app.cjs"


@pytest.mark.parametrize(
    ("path", "canonical", "look"),
    [
        ("/openai/deployments/gpt-4o/chat/completions", "/v1/chat/completions", "openai"),
        ("/openai/deployments/my.dep/embeddings", "/v1/embeddings", "openai"),
        ("/openai/v1/chat/completions", "/v1/chat/completions", "openai"),
        ("/openai/v1/responses", "/v1/responses", "openai"),
        ("/openai/files", "/v1/files", "openai"),
        ("/messages", "/v1/messages", "anthropic"),
        ("/messages/count_tokens", "/v1/messages/count_tokens", "anthropic"),
        ("/v1/messages/nowhere", "/v1/messages/nowhere", "anthropic"),
        ("/v1beta/models/gemini-2.5-flash", "/v1beta/models/gemini-2.5-flash", "gemini"),
        ("/v1/models/g:countTokens", "/v1/models/g:countTokens", "gemini"),
        ("/api/tags", "/api/tags", "ollama"),
        ("/v1/models", "/v1/models", "openai"),
        ("/v1/chat/completions", "/v1/chat/completions", "openai"),
        ("/v1/models/gemini-x", "/v1/models/gemini-x", "openai"),
        ("/messagesx", "/messagesx", "openai"),
    ],
)
def test_paths_are_canonical_and_look_like_their_vendor(
    path: str, canonical: str, look: str
) -> None:
    assert canonical_path(path) == canonical
    assert looks_like(path) == look


@pytest.fixture
def greeting(tmp_path: Path) -> Path:
    fixture = write_fixture(
        tmp_path / "fixture.jsonl",
        {
            neutral_hash(HI): [{"content": "hello"}] * 8,
            neutral_hash(HI, params={"max_tokens": 50}): [{"content": "hello"}] * 8,
        },
    )
    return replay_manifest(tmp_path, fixture)


def _no_regex(message: str) -> None:
    for mark in ("$", "(?", "\\", "[^", "/?"):
        assert mark not in message, message


def test_404s_are_in_the_look_alike_vendors_envelope_listing_the_served_paths(
    greeting: Path,
) -> None:
    with serving(greeting) as (_proc, info):
        token = info["token"]
        oai = openai.OpenAI(base_url=info["openai_base_url"], api_key=token, max_retries=0)
        with pytest.raises(openai.NotFoundError) as caught_openai:
            oai.models.list()
        oai.close()
        message = caught_openai.value.message
        assert "GET /v1/models" in message
        assert "POST /v1/chat/completions" in message and "POST /v1/messages" in message
        assert "POST /v1beta/models/{model}:generateContent" in message
        assert "POST /v1/embeddings" in message and "POST /api/chat" in message
        assert " API" not in message, message  # never "the <name> API"
        _no_regex(message)
        assert caught_openai.value.response.headers["x-should-retry"] == "false"

        ant = anthropic.Anthropic(base_url=info["anthropic_base_url"], api_key=token)
        with pytest.raises(anthropic.NotFoundError) as caught_anthropic:
            ant.post("/v1/messages/nowhere", cast_to=object, body={})
        ant.close()
        body: Any = caught_anthropic.value.body
        assert body["type"] == "error" and body["error"]["type"] == "not_found"
        assert "POST /v1/messages/nowhere" in body["error"]["message"]
        _no_regex(body["error"]["message"])

        google = genai.Client(
            api_key=token, vertexai=False, http_options={"base_url": info["gemini_base_url"]}
        )
        with pytest.raises(genai.errors.ClientError) as caught_google:
            google.models.get(model="gemini-test")
        google.close()
        assert caught_google.value.code == 404
        # google-genai's default version spells it GET /v1/models/{model}, as OpenAI
        # does: its x-goog-api-key header says whose envelope to answer in.
        assert "GET /v1/models/gemini-test" in str(caught_google.value.message)
        assert caught_google.value.status == "not_found"


def test_every_registered_shape_names_its_paths_and_a_404_lists_them() -> None:
    exchange = Exchange(None)
    listed = json.loads(exchange.not_found("GET", "/nowhere").body)["error"]["message"]
    for name in vendor_names():
        vendor = make_vendor(name)
        paths = getattr(vendor, "paths", None)
        assert isinstance(paths, tuple) and paths, f"{name} has no readable paths"
        for entry in paths:
            method, _, path = entry.partition(" ")
            assert method == "POST" and path.startswith("/"), entry
            # What a user reads is what the shape serves: the path, its {model}
            # filled in, routes to this very shape.
            concrete = path.replace("{model}", "gemini-test")
            assert any(route.search(concrete) for route in vendor.routes), entry
            assert exchange.serves_post(concrete), entry
            assert entry in listed, (entry, listed)
    assert " API" not in listed, listed  # never "the <name> API"
    _no_regex(listed)


def test_azure_openai_and_messages_without_v1_at_the_front_door(greeting: Path) -> None:
    with serving(greeting) as (_proc, info):
        token = info["token"]
        azure = openai.AzureOpenAI(
            azure_endpoint=info["url"], api_key=token, api_version="2024-10-21"
        )
        made = azure.chat.completions.create(model="my-deployment", messages=HI)  # type: ignore[arg-type]
        assert made.choices[0].message.content == "hello"
        azure.close()

        async def asynchronous() -> str | None:
            async with openai.AsyncAzureOpenAI(
                azure_endpoint=info["url"], api_key=token, api_version="2024-10-21"
            ) as client:
                made = await client.chat.completions.create(model="dep", messages=HI)  # type: ignore[arg-type]
                return made.choices[0].message.content

        assert asyncio.run(asynchronous()) == "hello"
        with httpx2.Client(timeout=30) as http:
            # Azure's /openai/v1 form, with the key in its api-key header.
            v1 = http.post(
                info["url"] + "/openai/v1/chat/completions?api-version=preview",
                json={"model": "dep", "messages": HI},
                headers={"api-key": token},
            )
            assert (
                v1.status_code == 200 and v1.json()["choices"][0]["message"]["content"] == "hello"
            )
            wrong = http.post(
                info["url"] + "/openai/v1/chat/completions",
                json={"model": "dep", "messages": HI},
                headers={"api-key": "not-the-token"},
            )
            assert wrong.status_code == 401
            # Anthropic's /messages without /v1.
            messages = http.post(
                info["url"] + "/messages",
                json={"model": "claude-test", "max_tokens": 50, "messages": HI},
                headers={"x-api-key": token, "anthropic-version": "2023-06-01"},
            )
            assert messages.status_code == 200
            assert messages.json()["content"] == [{"type": "text", "text": "hello"}]


AZURE_APP = textwrap.dedent(
    """
    import asyncio, json, openai
    # Only what Azure's own documentation shows: the endpoint, key and API version come
    # from AZURE_OPENAI_ENDPOINT, AZURE_OPENAI_API_KEY and OPENAI_API_VERSION.
    sync = openai.AzureOpenAI()
    one = sync.chat.completions.create(model="gpt-4o-deployment", messages=[
        {"role": "user", "content": "hi"}])
    async def main():
        async with openai.AsyncAzureOpenAI() as client:
            return await client.chat.completions.create(model="gpt-4o-deployment",
                messages=[{"role": "user", "content": "hi"}])
    two = asyncio.run(main())
    print(json.dumps([one.choices[0].message.content, two.choices[0].message.content]))
    """
)


def test_azure_clients_unchanged_under_run(greeting: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AZURE_", "OPENAI_"))}
    env["AZURE_OPENAI_API_KEY"] = "a-real-looking-azure-key"
    done = run_cli(greeting, [sys.executable, "-c", AZURE_APP], env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["hello", "hello"]
    assert summary(done.stderr).startswith("replay-actor: 2 served, 0 missed")


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_ai_sdk_anthropic_posts_messages_without_v1_under_run(greeting: Path) -> None:
    if not (NODE_MODULES / "@ai-sdk" / "anthropic").is_dir():
        pytest.fail(
            f"@ai-sdk/anthropic is not in {NODE_MODULES}: `make test` installs it "
            "(npm install --prefix .cache/node @ai-sdk/anthropic)"
        )
    assert NODE is not None
    env = dict(os.environ, NODE_PATH=str(NODE_MODULES))
    done = run_cli(greeting, [NODE, str(ANTHROPIC_APP), "hi"], env=env)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert json.loads(done.stdout) == {"text": "hello", "streamed": "hello"}
    assert summary(done.stderr).startswith("replay-actor: 2 served, 0 missed")


def test_the_headers_only_a_vendors_sdk_sends_choose_its_envelope() -> None:
    assert looks_like("/v1/models/gemini-x", {"x-goog-api-key"}) == "gemini"
    assert looks_like("/v1/models", {"anthropic-version", "x-api-key"}) == "anthropic"
    assert looks_like("/v1/messages", {"x-goog-api-key"}) == "anthropic"  # the path first


def test_azure_deployment_routes_in_process_chat_and_embeddings(tmp_path: Path) -> None:
    from replay_actor import open_provider, request_hash
    from replay_actor.integrations.transport import ProviderTransport

    texts = ["a cat"]
    embedding = {"kind": "embedding", "model": "my-embedder", "texts": texts}
    fixture = write_fixture(
        tmp_path / "azure.jsonl",
        {neutral_hash(HI): {"content": "hello"}, request_hash(embedding): {"embeddings": [[0.5]]}},
    )
    provider = open_provider({"provider": {"kind": "replay", "fixture": str(fixture)}})
    transport = ProviderTransport(provider, "openai")
    with openai.AzureOpenAI(
        azure_endpoint="https://example-resource.openai.azure.com",
        api_key="k",
        api_version="2024-10-21",
        http_client=httpx2.Client(transport=transport),
    ) as azure:
        made = azure.chat.completions.create(model="chat-deployment", messages=HI)  # type: ignore[arg-type]
        vectors = azure.embeddings.create(model="my-embedder", input=texts, encoding_format="float")
    assert made.choices[0].message.content == "hello"
    assert [e.embedding for e in vectors.data] == [[0.5]]
