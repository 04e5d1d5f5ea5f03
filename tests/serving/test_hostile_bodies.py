"""Hostile bodies refused at the door of every transport, sync and async, httpx2 and
httpx, as a 400 the SDKs raise as their own bad-request error: deep nesting, repeated
keys, ``n: true``; arguments nested too deep to re-encode hash as their text. Real SDK
clients, real transports, a real replay provider."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import httpx2
import openai
import pytest
from openai.types.chat import ChatCompletion

from replay_actor import async_openai_client, open_provider, openai_client, request_hash
from replay_actor._strict_json import MAX_BODY_DEPTH
from replay_actor.fixture import entry_line
from replay_actor.integrations.httpx_transport import (
    AsyncHttpxProviderTransport,
    HttpxProviderTransport,
)
from replay_actor.integrations.transport import AsyncProviderTransport, ProviderTransport
from replay_actor.vendors.openai import chat as vendor_openai

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(120)]

HI = [{"role": "user", "content": "hi"}]
BODY = {"model": "m", "messages": HI}


def deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def with_metadata(raw_value: str) -> bytes:
    return (
        '{"model":"m","messages":[{"role":"user","content":"hi"}],"metadata":{"k":'
        + raw_value
        + "}}"
    ).encode()


#: name -> (raw body, what the 400's message says)
HOSTILE: dict[str, tuple[bytes, str]] = {
    "deep-1000": (
        ('{"model":"m","messages":[{"role":"user","content":' + deep(1000) + "}]}").encode(),
        f"nested more than {MAX_BODY_DEPTH} levels deep",
    ),
    "deep-200000": (with_metadata(deep(200_000)), f"nested more than {MAX_BODY_DEPTH} levels"),
    "deep-objects": (with_metadata('{"a":' * 5000 + "1" + "}" * 5000), "levels deep"),
    "repeated-key": (
        b'{"model":"m","messages":[{"role":"user","content":"hi"}],'
        b'"messages":[{"role":"user","content":"other"}]}',
        "a key is repeated within one object",
    ),
    "repeated-nested-key": (
        b'{"model":"m","messages":[{"role":"user","content":"hi","role":"system"}]}',
        "a key is repeated within one object",
    ),
    "n-true": (
        b'{"model":"m","messages":[{"role":"user","content":"hi"}],"n":true}',
        "n other than 1",
    ),
}


@pytest.fixture
def manifest(tmp_path: Path) -> dict[str, Any]:
    """A fixture that answers ``BODY`` (so a body refused is refused, not a miss)."""
    fixture = tmp_path / "chat.jsonl"
    request = vendor_openai.read_body(BODY).request
    fixture.write_bytes(entry_line(request_hash(request), {"content": "hello"}) + b"\n")
    return {"provider": {"kind": "replay", "fixture": str(fixture)}}


def _check_400(status: int, error: dict[str, Any], says: str) -> None:
    assert status == 400
    assert error["type"] == "invalid_request"
    assert says in error["message"]


# -- every transport, sync and async, httpx2 and httpx ---------------------


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_bodies_are_a_400_on_every_transport(name: str, manifest: dict[str, Any]) -> None:
    body, says = HOSTILE[name]
    url = "http://model.invalid/v1/chat/completions"
    headers = {"content-type": "application/json"}
    provider = open_provider(manifest)
    try:
        with httpx2.Client(transport=ProviderTransport(provider, release_on_close=False)) as c2:
            answer2 = c2.post(url, content=body, headers=headers)
            _check_400(answer2.status_code, answer2.json()["error"], says)
        with httpx.Client(transport=HttpxProviderTransport(provider, release_on_close=False)) as c1:
            answer1 = c1.post(url, content=body, headers=headers)
            _check_400(answer1.status_code, answer1.json()["error"], says)

        async def both_async() -> None:
            t2 = AsyncProviderTransport(provider, release_on_close=False)
            async with httpx2.AsyncClient(transport=t2) as a2:
                answer = await a2.post(url, content=body, headers=headers)
                _check_400(answer.status_code, answer.json()["error"], says)
            t1 = AsyncHttpxProviderTransport(provider, release_on_close=False)
            async with httpx.AsyncClient(transport=t1) as a1:
                answer1 = await a1.post(url, content=body, headers=headers)
                _check_400(answer1.status_code, answer1.json()["error"], says)

        asyncio.run(both_async())
        # Refused at the door: the provider was never asked.
        assert provider.snapshot()["misses"] == 0
        assert provider.snapshot()["served"] == 0
    finally:
        provider.release()


@pytest.mark.parametrize("name", ["deep-1000", "deep-200000", "repeated-key", "n-true"])
def test_hostile_bodies_are_the_sdks_bad_request_error(name: str, manifest: dict[str, Any]) -> None:
    # The SDK's own raw post: the caller sees BadRequestError, never a RecursionError.
    body, says = HOSTILE[name]
    options: Any = {"headers": {"content-type": "application/json"}}
    with openai_client(manifest, max_retries=0) as client:
        with pytest.raises(openai.BadRequestError, match=says) as caught:
            client.post("/chat/completions", content=body, cast_to=ChatCompletion, options=options)
        assert isinstance(caught.value.body, dict)
        assert caught.value.body["type"] == "invalid_request"

    async def run() -> None:
        async with async_openai_client(manifest, max_retries=0) as aclient:
            with pytest.raises(openai.BadRequestError, match=says):
                await aclient.post(
                    "/chat/completions", content=body, cast_to=ChatCompletion, options=options
                )

    asyncio.run(run())


@pytest.mark.parametrize("depth", [1000, 50_000])
def test_deep_tool_arguments_are_kept_as_text_not_a_recursion_error(
    depth: int, manifest: dict[str, Any]
) -> None:
    # The body is shallow; the arguments are JSON text nested too deep to re-encode: they
    # hash as the text they are (as any non-JSON arguments do), so this is a plain miss.
    messages: Any = [
        *HI,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "f", "arguments": deep(depth)},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    with (
        openai_client(manifest, max_retries=0) as client,
        pytest.raises(openai.NotFoundError, match="no replay fixture matches"),
    ):
        client.chat.completions.create(model="m", messages=messages)

    async def run() -> None:
        async with async_openai_client(manifest, max_retries=0) as aclient:
            with pytest.raises(openai.NotFoundError, match="no replay fixture matches"):
                await aclient.chat.completions.create(model="m", messages=messages)

    asyncio.run(run())


def test_n_true_is_refused_and_n_one_is_not() -> None:
    from replay_actor import RequestError

    with pytest.raises(RequestError, match="n other than 1"):
        vendor_openai.read_body({**BODY, "n": True})
    assert vendor_openai.read_body({**BODY, "n": 1}).request["messages"] == HI
    assert vendor_openai.read_body({**BODY, "n": 1.0}).request["messages"] == HI
