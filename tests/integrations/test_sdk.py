"""The vendors' own SDK clients answered by a replay provider: the real ``openai`` and
``anthropic`` packages, unchanged calls, no mocking library.

A conversation is written once as a fixture (its hash computed by the vendor mapping)
and then asked through both SDKs, streamed and not, sync and async; failures must come
out as the SDKs' own exceptions with the documented message, asked exactly once.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import sys
import textwrap
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from replay_actor import (
    ProviderClosed,
    anthropic_client,
    async_anthropic_client,
    async_openai_client,
    open_provider,
    openai_client,
    request_hash,
)
from replay_actor._request import canonical_request
from replay_actor._response import read_response
from replay_actor.files.sidecar import SidecarWriter
from replay_actor.fixture import entry_line
from replay_actor.integrations.transport import AsyncProviderTransport, ProviderTransport
from replay_actor.vendors._common import response_id
from replay_actor.vendors.openai import chat as vendor_openai
from tests.support.conversation import (
    ANTHROPIC_TOOLS,
    ANTHROPIC_TURN1,
    CALL_RESPONSE,
    CLAUDE,
    FINAL_RESPONSE,
    GREETING,
    MODEL,
    OPENAI_TOOLS,
    OPENAI_TURN1,
    SYSTEM,
    Counting,
    anthropic_hash,
    anthropic_turn2,
    openai_hash,
    openai_turn2,
    write_fixture,
)
from tests.support.procs import actor_pids, wait_gone

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(60)]


@pytest.fixture
def conversation(tmp_path: Path) -> dict[str, Any]:
    """A replay manifest holding the weather tool loop and a greeting sequence."""
    turn1 = openai_hash(messages=OPENAI_TURN1, tools=OPENAI_TOOLS, max_tokens=200)
    turn2_messages = [
        *OPENAI_TURN1,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_7",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_7", "content": "sunny, 24C"},
    ]
    turn2 = openai_hash(messages=turn2_messages, tools=OPENAI_TOOLS, max_tokens=200)
    greeting = openai_hash(messages=[{"role": "user", "content": "hello"}], max_tokens=50)
    fixture = write_fixture(
        tmp_path / "fixture.jsonl",
        {turn1: CALL_RESPONSE, turn2: FINAL_RESPONSE, greeting: [GREETING, GREETING]},
    )
    return {"provider": {"kind": "replay", "fixture": str(fixture)}}


@pytest.fixture
def private(conversation: dict[str, Any]) -> dict[str, Any]:
    return {"provider": {**conversation["provider"], "data": "private"}}


# -- replay --------------------------------------------------------------------------------


def test_openai_tool_loop_replays(conversation: dict[str, Any]) -> None:
    with openai_client(conversation) as client:
        assert isinstance(client, openai.OpenAI)
        first = client.chat.completions.create(
            model=MODEL, messages=OPENAI_TURN1, tools=OPENAI_TOOLS, max_tokens=200
        )
        choice = first.choices[0]
        assert choice.finish_reason == "tool_calls"
        assert choice.message.content is None
        calls: Any = choice.message.tool_calls
        call = calls[0]
        assert (call.id, call.function.name) == ("call_7", "get_weather")
        assert json.loads(call.function.arguments) == {"city": "Paris"}
        assert first.model == MODEL
        assert first.id.startswith("chatcmpl-") and len(first.id) == len("chatcmpl-") + 24
        assert first.usage is not None and first.usage.total_tokens == 17
        second = client.chat.completions.create(
            model=MODEL, messages=openai_turn2(first), tools=OPENAI_TOOLS, max_tokens=200
        )
        assert second.choices[0].message.content == "It is sunny in Paris."
        assert second.choices[0].finish_reason == "stop"


@pytest.mark.parametrize("how", ["object", "model_dump", "model_dump_json"])
def test_openai_tool_loop_sends_the_response_message_back(
    conversation: dict[str, Any], how: str
) -> None:
    """Appending the SDK's own message object (or its dump) to the conversation hits the
    same entry: what the SDK echoes back empty (refusal, annotations, audio,
    function_call) is not part of the request."""
    with openai_client(conversation) as client:
        first = client.chat.completions.create(
            model=MODEL, messages=OPENAI_TURN1, tools=OPENAI_TOOLS, max_tokens=200
        )
        message = first.choices[0].message
        sent: Any = {
            "object": message,
            "model_dump": message.model_dump(),
            "model_dump_json": json.loads(message.model_dump_json()),
        }[how]
        second = client.chat.completions.create(
            model=MODEL,
            messages=[
                *OPENAI_TURN1,
                sent,
                {"role": "tool", "tool_call_id": "call_7", "content": "sunny, 24C"},
            ],
            tools=OPENAI_TOOLS,
            max_tokens=200,
        )
    assert second.choices[0].message.content == "It is sunny in Paris."


def test_anthropic_tool_loop_replays_the_same_entries(conversation: dict[str, Any]) -> None:
    with anthropic_client(conversation) as client:
        assert isinstance(client, anthropic.Anthropic)
        first = client.messages.create(
            model=CLAUDE,
            system=SYSTEM,
            messages=ANTHROPIC_TURN1,
            tools=ANTHROPIC_TOOLS,
            max_tokens=200,
        )
        assert first.stop_reason == "tool_use"
        block = first.content[0]
        assert block.type == "tool_use"
        assert (block.id, block.name, block.input) == ("call_7", "get_weather", {"city": "Paris"})
        assert first.id.startswith("msg_") and len(first.id) == len("msg_") + 24
        assert (first.usage.input_tokens, first.usage.output_tokens) == (12, 5)
        second = client.messages.create(
            model=CLAUDE,
            system=[{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
            messages=anthropic_turn2(first),
            tools=ANTHROPIC_TOOLS,
            max_tokens=200,
            metadata={"user_id": "someone"},
        )
        assert second.stop_reason == "end_turn"
        assert [b.type for b in second.content] == ["text"]
        assert second.content[0].text == "It is sunny in Paris."  # type: ignore[union-attr]


@pytest.mark.parametrize("how", ["objects", "model_dump"])
def test_anthropic_tool_loop_sends_the_response_blocks_back(
    conversation: dict[str, Any], how: str
) -> None:
    with anthropic_client(conversation) as client:
        kwargs: dict[str, Any] = {"model": CLAUDE, "system": SYSTEM, "max_tokens": 200}
        kwargs["tools"] = ANTHROPIC_TOOLS
        first = client.messages.create(messages=ANTHROPIC_TURN1, **kwargs)
        content: Any = (
            first.content if how == "objects" else [b.model_dump() for b in first.content]
        )
        second = client.messages.create(
            messages=[
                *ANTHROPIC_TURN1,
                {"role": "assistant", "content": content},
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "call_7", "content": "sunny, 24C"}
                    ],
                },
            ],
            **kwargs,
        )
    assert second.content[0].text == "It is sunny in Paris."


def test_both_vendors_hash_the_conversation_alike() -> None:
    assert openai_hash(
        messages=[
            {"role": "developer", "content": [{"type": "text", "text": SYSTEM}]},
            *OPENAI_TURN1[1:],
        ],
        tools=OPENAI_TOOLS,
        max_completion_tokens=200,
        stop="END",
        tool_choice="required",
        stream=True,
        stream_options={"include_usage": True},
    ) == anthropic_hash(
        system=SYSTEM,
        messages=ANTHROPIC_TURN1,
        tools=ANTHROPIC_TOOLS,
        max_tokens=200,
        stop_sequences=["END"],
        tool_choice={"type": "any"},
        stream=True,
    )


def test_ids_come_from_the_response_not_the_request(conversation: dict[str, Any]) -> None:
    with openai_client(conversation) as client:
        a = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hello"}], max_tokens=50
        )
        b = client.chat.completions.create(
            model="other", messages=[{"role": "user", "content": "hello"}], max_tokens=50
        )
    assert a.id == b.id == response_id(read_response(GREETING), "chatcmpl-")
    assert b.model == "other"  # echoed, never hashed


# -- streaming -------------------------------------------------------------------------------


@pytest.mark.parametrize("include_usage", [False, True])
def test_openai_stream_rebuilds_the_message(
    conversation: dict[str, Any], include_usage: bool
) -> None:
    kwargs: dict[str, Any] = {"model": MODEL, "messages": OPENAI_TURN1}
    kwargs.update(tools=OPENAI_TOOLS, max_tokens=200)
    with openai_client(conversation) as client:
        whole = client.chat.completions.create(**kwargs)
        options: Any = {"include_usage": True} if include_usage else {}
        chunks: list[Any] = list(
            client.chat.completions.create(**kwargs, stream=True, stream_options=options or None)
        )
        with client.chat.completions.stream(**kwargs, stream_options=options or None) as stream:
            final = stream.get_final_completion()
    assert all(chunk.id == whole.id for chunk in chunks)
    usage_chunks = [c for c in chunks if c.usage is not None]
    assert len(usage_chunks) == (1 if include_usage else 0)
    if include_usage:
        assert usage_chunks[0].usage == whole.usage
    calls = [d for c in chunks for ch in c.choices for d in (ch.delta.tool_calls or [])]
    assert [(c.id, c.function.name, c.function.arguments) for c in calls] == [
        ("call_7", "get_weather", '{"city":"Paris"}')
    ]
    message, expected = final.choices[0].message, whole.choices[0].message
    assert message.content == expected.content
    assert [t.model_dump(exclude={"index"}) for t in message.tool_calls or []] == [
        {**t.model_dump(), "function": {**t.function.model_dump(), "parsed_arguments": None}}
        for t in expected.tool_calls or []
    ]
    assert final.choices[0].finish_reason == whole.choices[0].finish_reason
    assert final.id == whole.id


def test_openai_text_stream_equals_the_message(conversation: dict[str, Any]) -> None:
    kwargs: dict[str, Any] = {"model": MODEL, "max_tokens": 50}
    kwargs["messages"] = [{"role": "user", "content": "hello"}]
    with openai_client(conversation) as client:
        whole = client.chat.completions.create(**kwargs)
        streamed = client.chat.completions.create(**kwargs, stream=True)
        text = "".join(c.choices[0].delta.content or "" for c in streamed if c.choices)
    assert text == whole.choices[0].message.content == "Hello there!"


def test_anthropic_stream_rebuilds_the_message(conversation: dict[str, Any]) -> None:
    kwargs: dict[str, Any] = {"model": CLAUDE, "system": SYSTEM, "messages": ANTHROPIC_TURN1}
    kwargs.update(tools=ANTHROPIC_TOOLS, max_tokens=200)
    with anthropic_client(conversation) as client:
        whole = client.messages.create(**kwargs)
        events = [event.type for event in client.messages.create(**kwargs, stream=True)]
        with client.messages.stream(**kwargs) as stream:
            final = stream.get_final_message()
    assert events[0] == "message_start" and events[-1] == "message_stop"
    assert final.model_dump(exclude={"content"}, exclude_none=True) == whole.model_dump(
        exclude={"content"}, exclude_none=True
    )
    assert [b.model_dump(exclude_none=True) for b in final.content] == [
        b.model_dump(exclude_none=True) for b in whole.content
    ]


def test_anthropic_text_stream_equals_the_message(tmp_path: Path) -> None:
    body: dict[str, Any] = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 50}
    fixture = write_fixture(tmp_path / "f.jsonl", {anthropic_hash(**body): GREETING})
    with anthropic_client({"provider": {"kind": "replay", "fixture": str(fixture)}}) as client:
        whole = client.messages.create(model=CLAUDE, **body)
        with client.messages.stream(model=CLAUDE, **body) as stream:
            text = "".join(stream.text_stream)
            final = stream.get_final_message()
    assert text == "Hello there!"
    assert final.model_dump(exclude_none=True) == whole.model_dump(exclude_none=True)


# -- async -----------------------------------------------------------------------------------


def test_async_clients_under_gather(tmp_path: Path) -> None:
    questions = {f"q{i}": f"a{i}" for i in range(16)}
    entries = {
        openai_hash(messages=[{"role": "user", "content": q}], max_tokens=8): {"content": a}
        for q, a in questions.items()
    }
    fixture = write_fixture(tmp_path / "f.jsonl", entries)
    manifest = {"provider": {"kind": "replay", "fixture": str(fixture)}}

    async def main() -> tuple[list[str | None], list[str]]:
        oa = async_openai_client(manifest)
        an = async_anthropic_client(manifest)
        assert isinstance(oa, openai.AsyncOpenAI)
        assert isinstance(an, anthropic.AsyncAnthropic)
        try:
            from_openai = await asyncio.gather(
                *(
                    oa.chat.completions.create(
                        model=MODEL, max_tokens=8, messages=[{"role": "user", "content": q}]
                    )
                    for q in questions
                )
            )
            from_anthropic = await asyncio.gather(
                *(
                    an.messages.create(
                        model=CLAUDE, max_tokens=8, messages=[{"role": "user", "content": q}]
                    )
                    for q in questions
                )
            )
        finally:
            await oa.close()
            await an.close()
        return (
            [r.choices[0].message.content for r in from_openai],
            [r.content[0].text for r in from_anthropic],  # type: ignore[union-attr]
        )

    via_openai, via_anthropic = asyncio.run(main())
    assert via_openai == via_anthropic == list(questions.values())


def test_async_streams_rebuild_the_message(conversation: dict[str, Any]) -> None:
    async def main() -> None:
        async with async_openai_client(conversation) as oa:
            kwargs: dict[str, Any] = {"model": MODEL, "messages": OPENAI_TURN1}
            kwargs.update(tools=OPENAI_TOOLS, max_tokens=200)
            whole, streamed = await asyncio.gather(
                oa.chat.completions.create(**kwargs),
                oa.chat.completions.create(**kwargs, stream=True),
            )
            chunks = [chunk async for chunk in streamed]
            assert chunks[-1].choices[0].finish_reason == whole.choices[0].finish_reason
        async with async_anthropic_client(conversation) as an:
            akw: dict[str, Any] = {"model": CLAUDE, "system": SYSTEM, "messages": ANTHROPIC_TURN1}
            akw.update(tools=ANTHROPIC_TOOLS, max_tokens=200)
            message = await an.messages.create(**akw)
            async with an.messages.stream(**akw) as stream:
                final = await stream.get_final_message()
            assert final.content[0].model_dump() == message.content[0].model_dump()

    asyncio.run(main())


# -- failures ----------------------------------------------------------------------------------


@pytest.fixture
def counted(conversation: dict[str, Any]) -> Iterator[Counting]:
    provider = Counting(open_provider(conversation))
    try:
        yield provider
    finally:
        provider.release()


def counted_openai(provider: Counting) -> openai.OpenAI:
    transport = ProviderTransport(provider, "openai", release_on_close=False)
    return openai.OpenAI(api_key="x", http_client=httpx2.Client(transport=transport))


def counted_anthropic(provider: Counting) -> anthropic.Anthropic:
    transport = ProviderTransport(provider, "anthropic", release_on_close=False)
    return anthropic.Anthropic(api_key="x", http_client=httpx2.Client(transport=transport))


def test_miss_is_the_sdks_not_found_error_asked_once(counted: Counting) -> None:
    request: list[Any] = [{"role": "user", "content": "never recorded"}]
    expected = openai_hash(messages=request)
    with pytest.raises(openai.NotFoundError) as caught:
        counted_openai(counted).chat.completions.create(model=MODEL, messages=request)
    assert counted.calls == 1
    err = caught.value
    assert err.status_code == 404
    assert err.response.headers["x-should-retry"] == "false"
    assert err.body == {
        "message": f"no replay fixture matches this request (request_hash: {expected})",
        "type": "replay_miss",
        "param": None,
        "code": "replay_miss",
    }
    with pytest.raises(anthropic.NotFoundError) as miss:
        counted_anthropic(counted).messages.create(model=CLAUDE, max_tokens=5, messages=request)
    assert counted.calls == 2
    message = miss.value.body["error"]["message"]  # type: ignore[index]
    assert message.startswith("no replay fixture matches this request (request_hash: sha256:")
    assert miss.value.body["error"]["type"] == "replay_miss"  # type: ignore[index]


def test_an_explained_miss_keeps_the_exact_message_and_adds_nearest(tmp_path: Path) -> None:
    """With a request sidecar, the 404's message is still exactly the miss message; the
    nearest recorded request's hash and differing paths come in ``error.nearest``."""
    recorded: list[Any] = [{"role": "user", "content": "hello"}]
    asked: list[Any] = [{"role": "user", "content": "hello there"}]
    recorded_hash = openai_hash(messages=recorded)
    fixture = write_fixture(tmp_path / "f.jsonl", {recorded_hash: GREETING})
    body = vendor_openai.read_body({"model": MODEL, "messages": recorded}).request
    SidecarWriter(fixture).append(recorded_hash, canonical_request(body))
    manifest = {"provider": {"kind": "replay", "fixture": str(fixture)}}
    with openai_client(manifest) as client, pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model=MODEL, messages=asked)
    expected = openai_hash(messages=asked)
    assert caught.value.body == {
        "message": f"no replay fixture matches this request (request_hash: {expected})",
        "type": "replay_miss",
        "param": None,
        "code": "replay_miss",
        "nearest": {"request_hash": recorded_hash, "paths": ["messages[0].content"]},
    }


def test_exhausted_sequence_is_a_404_asked_once(counted: Counting) -> None:
    client = counted_openai(counted)
    hello: list[Any] = [{"role": "user", "content": "hello"}]
    for _ in range(2):
        client.chat.completions.create(model=MODEL, messages=hello, max_tokens=50)
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model=MODEL, messages=hello, max_tokens=50)
    assert counted.calls == 3
    expected = openai_hash(messages=hello, max_tokens=50)
    assert caught.value.body["message"] == (  # type: ignore[index]
        f"replay sequence exhausted for this request (request_hash: {expected})"
    )
    assert caught.value.body["type"] == "replay_exhausted"  # type: ignore[index]


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"n": 2}, "n other than 1"),
        ({"modalities": ["text", "audio"]}, "modalities"),
        ({"audio": {"voice": "alloy", "format": "wav"}}, "audio"),
    ],
)
def test_unfaithful_fields_are_a_400_naming_them(
    counted: Counting, extra: dict[str, Any], field: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        counted_openai(counted).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hello"}], **extra
        )
    assert caught.value.body["type"] == "invalid_request"  # type: ignore[index]
    assert field in caught.value.body["message"]  # type: ignore[index]
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert counted.calls == 0  # refused before the provider was asked


def test_invalid_neutral_request_is_a_400(counted: Counting) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        counted_anthropic(counted).messages.create(
            model=CLAUDE,
            max_tokens=5,
            messages=[{"role": "robot", "content": "x"}],  # type: ignore[misc, list-item]
        )
    assert caught.value.body["error"]["type"] == "invalid_request"  # type: ignore[index]
    assert counted.calls == 1


def test_closed_provider_is_a_503_not_retried(counted: Counting) -> None:
    client = counted_openai(counted)
    counted.release()
    with pytest.raises(openai.InternalServerError) as caught:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}])
    assert caught.value.status_code == 503
    assert caught.value.body["type"] == "replay_unavailable"  # type: ignore[index]
    assert counted.calls == 1


def test_other_paths_are_404_naming_the_path(counted: Counting) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        counted_openai(counted).models.list()
    assert "GET /v1/models" in caught.value.body["message"]  # type: ignore[index]
    with pytest.raises(anthropic.NotFoundError) as other:
        counted_anthropic(counted).models.list()
    assert "/v1/models" in other.value.body["error"]["message"]  # type: ignore[index]
    # Legacy completions are served now (docs/ollama.md); images are not.
    with pytest.raises(openai.NotFoundError):
        counted_openai(counted).images.generate(model=MODEL, prompt="x")
    assert counted.calls == 0


def test_async_transport_asks_acomplete_once(counted: Counting) -> None:
    async def main() -> None:
        transport = AsyncProviderTransport(counted, "anthropic", release_on_close=False)
        async with anthropic.AsyncAnthropic(
            api_key="x", http_client=httpx2.AsyncClient(transport=transport)
        ) as client:
            with pytest.raises(anthropic.NotFoundError):
                await client.messages.create(
                    model=CLAUDE, max_tokens=5, messages=[{"role": "user", "content": "?"}]
                )

    asyncio.run(main())
    assert counted.calls == 1
    assert not counted.closed  # release_on_close=False left it open


# -- private mode ------------------------------------------------------------------------------


def test_private_miss_carries_no_hash_anywhere(private: dict[str, Any]) -> None:
    request: list[Any] = [{"role": "user", "content": "a secret prompt about NIGHTJAR"}]
    with openai_client(private) as client, pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model=MODEL, messages=request)
    err = caught.value
    assert err.body == {
        "message": "no replay fixture matches this request",
        "type": "replay_miss",
        "param": None,
        "code": "replay_miss",
    }
    seen = [
        str(err),
        repr(err),
        repr(err.args),
        repr(err.body),
        err.response.text,
        repr(dict(err.response.headers)),
        "".join(traceback.TracebackException.from_exception(err, capture_locals=True).format()),
    ]
    # Computed only now, so that this test's own frame holds no hash in the traceback.
    hex_part = openai_hash(messages=request).removeprefix("sha256:")
    for text in seen:
        assert hex_part not in text
    with anthropic_client(private) as claude, pytest.raises(anthropic.NotFoundError) as other:
        claude.messages.create(model=CLAUDE, max_tokens=9, messages=request)
    assert other.value.body["error"]["message"] == "no replay fixture matches this request"  # type: ignore[index]
    assert "sha256" not in other.value.response.text


def test_private_exhaustion_message(private: dict[str, Any]) -> None:
    hello: list[Any] = [{"role": "user", "content": "hello"}]
    with openai_client(private) as client:
        for _ in range(2):
            client.chat.completions.create(model=MODEL, messages=hello, max_tokens=50)
        with pytest.raises(openai.NotFoundError) as caught:
            client.chat.completions.create(model=MODEL, messages=hello, max_tokens=50)
    assert caught.value.body["message"] == "replay sequence exhausted for this request"  # type: ignore[index]
    assert "sha256" not in caught.value.response.text


# -- lifecycle ---------------------------------------------------------------------------------


def _actor_pid(client: Any) -> int:
    pid: int = client._client._transport.provider.actor_pid
    return pid


def test_closing_the_client_releases_the_actor(conversation: dict[str, Any]) -> None:
    before = actor_pids()
    client = openai_client(conversation)
    pid = _actor_pid(client)
    assert pid in actor_pids() - before
    client.close()
    assert wait_gone(pid)


def test_closing_async_clients_releases_their_actors(conversation: dict[str, Any]) -> None:
    async def main() -> list[int]:
        oa = async_openai_client(conversation)
        an = async_anthropic_client(conversation)
        pids = [_actor_pid(oa), _actor_pid(an)]
        await oa.close()
        await an.close()
        return pids

    for pid in asyncio.run(main()):
        assert wait_gone(pid)


def test_a_dropped_client_releases_its_actor(conversation: dict[str, Any]) -> None:
    client = anthropic_client(conversation)
    pid = _actor_pid(client)
    del client
    gc.collect()
    assert wait_gone(pid)


def test_a_bad_sdk_argument_releases_the_provider(conversation: dict[str, Any]) -> None:
    before = actor_pids()
    with pytest.raises(TypeError):
        openai_client(conversation, no_such_option=1)
    with pytest.raises(TypeError, match="http_client"):
        openai_client(conversation, http_client=httpx2.Client())
    for pid in actor_pids() - before:
        assert wait_gone(pid)


def test_release_through_the_transport_is_final(conversation: dict[str, Any]) -> None:
    provider = open_provider(conversation)
    transport = ProviderTransport(provider, "openai")
    transport.close()
    assert provider.closed
    with pytest.raises(ProviderClosed):
        provider.complete({"messages": [{"role": "user", "content": "x"}]})


def test_httpx_transports_serve_frameworks_on_httpx(conversation: dict[str, Any]) -> None:
    import httpx

    from replay_actor.integrations.httpx_transport import (
        AsyncHttpxProviderTransport,
        HttpxProviderTransport,
    )

    body = {"model": MODEL, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 50}
    provider = open_provider(conversation)
    with httpx.Client(
        transport=HttpxProviderTransport(provider), base_url="http://model.invalid/v1"
    ) as client:
        answer = client.post("/chat/completions", json=body)
        assert answer.status_code == 200
        assert answer.json()["choices"][0]["message"]["content"] == "Hello there!"
        missing = client.get("/models")
        assert missing.status_code == 404 and "GET /v1/models" in missing.text
    assert provider.closed  # closing the client released it

    async def main() -> None:
        other = open_provider(conversation)
        transport = AsyncHttpxProviderTransport(other, "anthropic")
        async with httpx.AsyncClient(transport=transport, base_url="http://x.invalid") as client:
            answer = await client.post("/v1/messages", json={**body, "stream": True})
            assert answer.headers["content-type"].startswith("text/event-stream")
            assert "event: message_stop" in answer.text
            gone = await client.post("/v1/messages", json={**body, "max_tokens": 1})
            assert gone.status_code == 404 and gone.json()["error"]["type"] == "replay_miss"
            assert gone.headers["x-should-retry"] == "false"
        assert other.closed

    asyncio.run(main())


SDK_WORKFLOW = """
import sys
import openai
from replay_actor import anthropic_client, openai_client
manifest = {"provider": {"kind": "replay", "fixture": sys.argv[1]}}
with openai_client(manifest) as client:
    hello = [{"role": "user", "content": "hello"}]
    print(client.chat.completions.create(model="m", messages=hello, max_tokens=50).id)
    for chunk in client.chat.completions.create(
        model="m", messages=hello, max_tokens=50, stream=True
    ):
        pass
    try:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "?"}])
    except openai.NotFoundError:
        print("miss")
with anthropic_client(manifest) as claude:
    try:
        claude.messages.create(model="m", max_tokens=5, messages=hello)
    except Exception as exc:
        print(type(exc).__name__)
"""


def test_the_sdk_replay_path_creates_only_unix_sockets(
    conversation: dict[str, Any], tmp_path: Path
) -> None:
    import os
    import socket
    import subprocess
    import sys

    from tests.support.socket_audit import SITECUSTOMIZE

    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    log = tmp_path / "audit.log"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    env["AUDIT_LOG"] = str(log)
    done = subprocess.run(
        [sys.executable, "-c", SDK_WORKFLOW, conversation["provider"]["fixture"]],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[1:] == ["miss", "NotFoundError"]
    families = {int(line.split()[2]) for line in log.read_text().splitlines()}
    assert families == {int(socket.AF_UNIX)}


def test_a_lost_actor_is_a_503_not_retried(counted: Counting) -> None:
    import os
    import signal

    client = counted_anthropic(counted)
    pid = counted.inner.actor_pid
    os.kill(pid, signal.SIGKILL)  # the actor this test acquired, by its PID
    assert wait_gone(pid)
    with pytest.raises(anthropic.InternalServerError) as caught:
        client.messages.create(
            model=CLAUDE, max_tokens=50, messages=[{"role": "user", "content": "hello"}]
        )
    assert caught.value.status_code == 503
    assert caught.value.body["error"]["type"] == "replay_unavailable"  # type: ignore[index]
    assert counted.calls == 1


# -- a client dropped without close() -------------------------------------------------------

HI = [{"role": "user", "content": "hi"}]
DROP_SCRIPT = textwrap.dedent(
    """
    import gc, os, sys, time
    import psutil
    from replay_actor import (
        anthropic_client, async_anthropic_client, async_openai_client, openai_client,
    )

    manifest = {"provider": {"kind": "replay", "fixture": sys.argv[1]}}
    builders = [openai_client, async_openai_client, anthropic_client, async_anthropic_client]

    def fds():
        return len(os.listdir("/proc/self/fd"))

    def actors():
        return [
            p.pid for p in psutil.Process().children(recursive=True)
            if p.name() == "replay-actor" and p.status() != psutil.STATUS_ZOMBIE
        ]

    # One of each first: imports, the zygote and the SDKs' own caches are not leaks.
    for build in builders:
        build(manifest)
    gc.collect()
    before = fds()
    for _ in range(5):
        for build in builders:
            client = build(manifest)
            client.models  # used, not just built
            del client
    gc.collect()
    deadline = time.monotonic() + 10
    while actors() and time.monotonic() < deadline:
        time.sleep(0.02)
    print(before, fds(), len(actors()))
    """
)


@pytest.mark.timeout(120)
def test_dropped_clients_leave_no_descriptor_and_no_actor(tmp_path: Path) -> None:
    fixture = tmp_path / "chat.jsonl"
    fixture.write_bytes(entry_line(request_hash({"messages": HI}), {"content": "hello"}) + b"\n")
    done = subprocess.run(
        [sys.executable, "-c", DROP_SCRIPT, str(fixture)],
        capture_output=True,
        text=True,
        timeout=90,
        env=os.environ.copy(),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    before, after, actors = map(int, done.stdout.split())
    assert actors == 0
    assert after <= before, f"{after - before} descriptors left by 20 dropped clients"
