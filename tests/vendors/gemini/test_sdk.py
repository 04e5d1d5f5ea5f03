"""Google Gemini through the real ``google-genai`` SDK, answered by a replay provider
(docs/gemini.md): unchanged calls, sync, async and streamed, no mocking library.

The conversation is the one the OpenAI SDK's tests ask (tests/support/conversation.py),
so these tests also prove the cross-shape promise: a fixture written for chat
completions replays through Gemini, and the same conversation hashes alike through both
mappings.
"""

from __future__ import annotations

import asyncio
import gc
import json
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from google import genai
from google.genai import errors, types

from replay_actor import (
    RequestError,
    async_gemini_client,
    gemini_client,
    open_provider,
    request_hash,
)
from replay_actor.integrations.transport import AsyncProviderTransport, ProviderTransport
from replay_actor.vendors._common import response_id
from replay_actor.vendors.gemini import generate as vendor_gemini
from replay_actor.vendors.openai import chat as vendor_openai
from tests.support.conversation import (
    CALL_RESPONSE,
    FINAL_RESPONSE,
    GREETING,
    OPENAI_TOOLS,
    OPENAI_TURN1,
    SYSTEM,
    WEATHER_SCHEMA,
    Counting,
    openai_hash,
    write_fixture,
)
from tests.support.procs import actor_pids, wait_gone

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(60)]

MODEL = "gemini-test"
QUESTION = "Weather in Paris?"
TOOLS: list[Any] = [
    types.Tool(
        function_declarations=[
            types.FunctionDeclaration(
                name="get_weather",
                description="Weather for a city",
                parameters_json_schema=WEATHER_SCHEMA,
            )
        ]
    )
]


def config(**extra: Any) -> types.GenerateContentConfig:
    return types.GenerateContentConfig(
        system_instruction=SYSTEM,
        tools=TOOLS,
        max_output_tokens=200,
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        **extra,
    )


def turn1() -> list[types.Content]:
    return [types.Content(role="user", parts=[types.Part.from_text(text=QUESTION)])]


def turn2(first: types.GenerateContentResponse) -> list[types.Content]:
    """The app's second turn, built from the SDK's own first answer: the model's content
    as it came, then the tool's result as a function response."""
    assert first.candidates and first.candidates[0].content
    call = (first.function_calls or [])[0]
    assert call.name == "get_weather"
    answer = types.Part.from_function_response(name=call.name, response={"result": "sunny, 24C"})
    return [*turn1(), first.candidates[0].content, types.Content(role="user", parts=[answer])]


@pytest.fixture
def conversation(tmp_path: Path) -> dict[str, Any]:
    """The weather tool loop and a greeting sequence, hashed through the OpenAI mapping:
    the fixture knows nothing of Gemini."""
    first = openai_hash(messages=OPENAI_TURN1, tools=OPENAI_TOOLS, max_tokens=200)
    second_messages = [
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
    second = openai_hash(messages=second_messages, tools=OPENAI_TOOLS, max_tokens=200)
    greeting = openai_hash(messages=[{"role": "user", "content": "hello"}], max_tokens=50)
    fixture = write_fixture(
        tmp_path / "fixture.jsonl",
        {first: CALL_RESPONSE, second: FINAL_RESPONSE, greeting: [GREETING, GREETING]},
    )
    return {"provider": {"kind": "replay", "fixture": str(fixture)}}


@pytest.fixture
def counted(conversation: dict[str, Any]) -> Iterator[Counting]:
    provider = Counting(open_provider(conversation))
    try:
        yield provider
    finally:
        provider.release()


def counted_client(provider: Counting) -> genai.Client:
    options = types.HttpOptions(
        client_args={"transport": ProviderTransport(provider, "gemini", release_on_close=False)},
        async_client_args={
            "transport": AsyncProviderTransport(provider, "gemini", release_on_close=False)
        },
    )
    return genai.Client(api_key="x", http_options=options)


# -- the function-calling loop ---------------------------------------------------------------


def test_function_calling_loop_replays(conversation: dict[str, Any]) -> None:
    with gemini_client(conversation) as client:
        assert isinstance(client, genai.Client)
        first = client.models.generate_content(model=MODEL, contents=turn1(), config=config())
        assert first.function_calls is not None
        call = first.function_calls[0]
        # The stored call's id is not one Gemini would lack: it is sent as the vendor's.
        assert (call.id, call.name, call.args) == ("call_7", "get_weather", {"city": "Paris"})
        assert first.candidates and first.candidates[0].finish_reason == types.FinishReason.STOP
        assert first.model_version == MODEL
        assert first.usage_metadata is not None
        assert first.usage_metadata.total_token_count == 17
        assert first.response_id is not None and len(first.response_id) == 24
        second = client.models.generate_content(model=MODEL, contents=turn2(first), config=config())
        assert second.text == "It is sunny in Paris."
        assert second.function_calls is None


def test_function_calling_loop_replays_async(conversation: dict[str, Any]) -> None:
    async def main() -> str | None:
        async with async_gemini_client(conversation) as client:
            first = await client.models.generate_content(
                model=MODEL, contents=turn1(), config=config()
            )
            second = await client.models.generate_content(
                model=MODEL, contents=turn2(first), config=config()
            )
            return second.text

    assert asyncio.run(main()) == "It is sunny in Paris."


def test_the_sdks_own_automatic_function_calling_loop(conversation: dict[str, Any]) -> None:
    """Given a Python function, google-genai runs the loop itself: it declares the
    function (with its return type, which is not hashed), calls it when the model asks,
    and sends the result back; the two entries answer, each asked once."""
    ran: list[str] = []

    def get_weather(city: str) -> str:
        """Weather for a city"""
        ran.append(city)
        return "sunny, 24C"

    with gemini_client(conversation) as client:
        reply = client.models.generate_content(
            model=MODEL,
            contents=QUESTION,
            config=types.GenerateContentConfig(
                system_instruction=SYSTEM, tools=[get_weather], max_output_tokens=200
            ),
        )
    assert ran == ["Paris"]
    assert reply.text == "It is sunny in Paris."
    history = reply.automatic_function_calling_history or []
    assert [content.role for content in history] == ["user", "model", "user"]


def test_a_chat_session_replays(conversation: dict[str, Any]) -> None:
    """``client.chats`` keeps the history itself and sends the model's turns back."""
    with gemini_client(conversation) as client:
        chat = client.chats.create(
            model=MODEL,
            config=types.GenerateContentConfig(
                system_instruction=SYSTEM,
                tools=TOOLS,
                max_output_tokens=200,
            ),
        )
        first = chat.send_message(QUESTION)
        call = (first.function_calls or [])[0]
        result = types.Part.from_function_response(
            name=call.name or "", response={"result": "sunny, 24C"}
        )
        second = chat.send_message(result)
    assert second.text == "It is sunny in Paris."


def test_gemini_and_openai_hash_the_conversation_alike() -> None:
    """One conversation, two SDKs' bodies, one neutral request (and one hash)."""
    gemini_body = {
        "contents": [
            {"role": "user", "parts": [{"text": QUESTION}]},
            {
                "role": "model",
                "parts": [{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}],
            },
            {
                "role": "user",
                "parts": [
                    {
                        "functionResponse": {
                            "name": "get_weather",
                            "response": {"result": "sunny, 24C"},
                        }
                    }
                ],
            },
        ],
        "systemInstruction": {"role": "user", "parts": [{"text": SYSTEM}]},
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "get_weather",
                        "description": "Weather for a city",
                        "parameters": {
                            "type": "OBJECT",
                            "properties": {"city": {"type": "STRING"}},
                            "required": ["city"],
                        },
                    }
                ]
            }
        ],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY"}},
        "generationConfig": {"maxOutputTokens": 200, "topP": 0.5, "stopSequences": ["END"]},
        "labels": {"team": "evals"},
    }
    read = vendor_gemini.read_body(gemini_body, f"/v1beta/models/{MODEL}:generateContent")
    assert (read.model, read.stream) == (MODEL, False)
    derived = vendor_gemini.derived_call_id(0, "get_weather", '{"city":"Paris"}')
    openai_body = {
        "model": "gpt",
        "messages": [
            *OPENAI_TURN1,
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": derived,
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": derived, "content": "sunny, 24C"},
        ],
        "tools": OPENAI_TOOLS,
        "tool_choice": "required",
        "max_tokens": 200,
        "top_p": 0.5,
        "stop": "END",
    }
    assert request_hash(read.request) == request_hash(vendor_openai.read_body(openai_body).request)


# -- streaming ---------------------------------------------------------------------------------


def _gather(chunks: list[types.GenerateContentResponse]) -> tuple[str, list[Any], Any]:
    text = "".join(chunk.text or "" for chunk in chunks)
    calls = [(c.id, c.name, c.args) for chunk in chunks for c in chunk.function_calls or []]
    finish = chunks[-1].candidates[0].finish_reason if chunks[-1].candidates else None
    return text, calls, finish


def test_stream_rebuilds_the_answer(conversation: dict[str, Any]) -> None:
    with gemini_client(conversation) as client:
        whole = client.models.generate_content(model=MODEL, contents=turn1(), config=config())
        chunks = list(
            client.models.generate_content_stream(model=MODEL, contents=turn1(), config=config())
        )
        again = client.models.generate_content(model=MODEL, contents=turn2(whole), config=config())
        streamed = list(
            client.models.generate_content_stream(
                model=MODEL, contents=turn2(whole), config=config()
            )
        )
    assert _gather(chunks) == (
        "",
        [("call_7", "get_weather", {"city": "Paris"})],
        types.FinishReason.STOP,
    )
    assert _gather(streamed) == (again.text, [], types.FinishReason.STOP)
    assert streamed[-1].usage_metadata == again.usage_metadata
    assert {c.response_id for c in streamed} == {again.response_id}


def test_async_stream_rebuilds_the_answer(conversation: dict[str, Any]) -> None:
    async def main() -> tuple[str, list[Any], Any]:
        async with async_gemini_client(conversation) as client:
            first = await client.models.generate_content(
                model=MODEL, contents=turn1(), config=config()
            )
            stream = await client.models.generate_content_stream(
                model=MODEL, contents=turn2(first), config=config()
            )
            return _gather([chunk async for chunk in stream])

    assert asyncio.run(main()) == ("It is sunny in Paris.", [], types.FinishReason.STOP)


def test_stream_body_is_sse_chunks_without_an_end_marker() -> None:
    from replay_actor._response import read_response

    stored: dict[str, Any] = CALL_RESPONSE
    response = read_response({"content": "Hi", "tool_calls": stored["tool_calls"]})
    body = vendor_gemini.stream_body(response, MODEL)
    events = body.split(b"\r\n\r\n")
    assert events[-1] == b""
    chunks = [json.loads(e.removeprefix(b"data: ")) for e in events[:-1]]
    assert [c["candidates"][0]["content"]["parts"] for c in chunks] == [
        [{"text": "Hi"}],
        [{"functionCall": {"id": "call_7", "name": "get_weather", "args": {"city": "Paris"}}}],
    ]
    assert "finishReason" not in chunks[0]["candidates"][0]
    assert chunks[1]["candidates"][0]["finishReason"] == "STOP"
    assert b"[DONE]" not in body


# -- failures ----------------------------------------------------------------------------------


def test_miss_is_the_sdks_client_error_asked_once(counted: Counting) -> None:
    contents = "never recorded"
    expected = request_hash({"messages": [{"role": "user", "content": contents}]})
    client = counted_client(counted)
    with pytest.raises(errors.ClientError) as caught:
        client.models.generate_content(model=MODEL, contents=contents)
    assert counted.calls == 1
    err = caught.value
    assert err.code == 404
    assert err.status == "replay_miss"
    assert err.message == f"no replay fixture matches this request (request_hash: {expected})"
    with pytest.raises(errors.ClientError) as streamed:
        for _ in client.models.generate_content_stream(model=MODEL, contents=contents):
            pass
    assert counted.calls == 2
    assert streamed.value.message == err.message


def test_exhausted_sequence_is_a_404_asked_once(counted: Counting) -> None:
    client = counted_client(counted)
    hello = types.GenerateContentConfig(max_output_tokens=50)
    for _ in range(2):
        assert client.models.generate_content(model=MODEL, contents="hello", config=hello).text == (
            "Hello there!"
        )
    with pytest.raises(errors.ClientError) as caught:
        client.models.generate_content(model=MODEL, contents="hello", config=hello)
    assert counted.calls == 3
    assert caught.value.status == "replay_exhausted"
    assert caught.value.message is not None
    assert caught.value.message.startswith("replay sequence exhausted for this request")


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"candidate_count": 2}, "candidateCount"),
        ({"response_logprobs": True}, "responseLogprobs"),
        ({"logprobs": 3}, "logprobs"),
        ({"response_modalities": ["AUDIO"]}, "responseModalities"),
        ({"tools": [types.Tool(google_search=types.GoogleSearch())]}, "googleSearch"),
        ({"cached_content": "cachedContents/abc"}, "cachedContent"),
    ],
)
def test_unfaithful_fields_are_a_400_naming_them(
    counted: Counting, extra: dict[str, Any], field: str
) -> None:
    client = counted_client(counted)
    with pytest.raises(errors.ClientError) as caught:
        client.models.generate_content(
            model=MODEL, contents="hi", config=types.GenerateContentConfig(**extra)
        )
    assert counted.calls == 0
    assert caught.value.code == 400
    assert caught.value.status == "invalid_request"
    assert field in (caught.value.message or "")


def test_a_5xx_answer_is_not_retried(counted: Counting) -> None:
    """google-genai retries 5xx only when retry_options asks; gemini_client refuses
    retry_options, so a closed provider is one 503 and one ask."""
    client = counted_client(counted)
    counted.inner.release()
    with pytest.raises(errors.ServerError) as caught:
        client.models.generate_content(model=MODEL, contents="hello")
    assert caught.value.code == 503 and caught.value.status == "replay_unavailable"
    assert counted.calls == 1


def test_private_miss_carries_no_hash_anywhere(conversation: dict[str, Any]) -> None:
    private = {"provider": {**conversation["provider"], "data": "private"}}
    contents = "a secret prompt about NIGHTJAR"
    with gemini_client(private) as client, pytest.raises(errors.ClientError) as caught:
        client.models.generate_content(model=MODEL, contents=contents)
    err = caught.value
    assert err.message == "no replay fixture matches this request"
    seen = [
        str(err),
        repr(err),
        repr(err.args),
        repr(err.details),
        err.response.text if isinstance(err.response, httpx2.Response) else "",
        "".join(traceback.TracebackException.from_exception(err, capture_locals=True).format()),
    ]
    hex_part = request_hash({"messages": [{"role": "user", "content": contents}]})
    for text in seen:
        assert text and hex_part.removeprefix("sha256:") not in text
        assert "sha256" not in text


# -- the clients -------------------------------------------------------------------------------


def _api(client: Any) -> Any:
    """google-genai's HTTP side (private attributes: the test looks at what it uses)."""
    return client._api_client


def _provider_of(client: genai.Client) -> Any:
    return _api(client)._httpx_client._transport.provider


def test_the_async_client_never_uses_aiohttp(conversation: dict[str, Any]) -> None:
    """aiohttp is installed, and google-genai prefers it for async calls unless given an
    httpx transport: the async client must ask the provider (acomplete), not aiohttp."""
    import aiohttp  # noqa: F401  (installed: the SDK would pick it)

    async def main() -> tuple[bool, int, str | None]:
        client = async_gemini_client(conversation)
        api = _api(client)
        provider = Counting(api._async_httpx_client._transport.provider)
        api._async_httpx_client._transport._provider = provider
        reply = await client.models.generate_content(
            model=MODEL, contents="hello", config={"max_output_tokens": 50}
        )
        used_aiohttp = api._use_aiohttp() or bool(api._aiohttp_sessions)
        await client.aclose()
        return used_aiohttp, provider.calls, reply.text

    assert asyncio.run(main()) == (False, 1, "Hello there!")


def test_closing_the_client_releases_the_actor(conversation: dict[str, Any]) -> None:
    before = actor_pids()
    client = gemini_client(conversation)
    pid = _provider_of(client).actor_pid
    assert pid in actor_pids() - before
    client.close()
    assert wait_gone(pid)


def test_closing_the_async_client_releases_the_actor(conversation: dict[str, Any]) -> None:
    async def main() -> int:
        client = async_gemini_client(conversation)
        pid: int = _api(client)._async_httpx_client._transport.provider.actor_pid
        # The sync client behind .aio is closed when its genai.Client is collected; that
        # must not release the provider the async client still uses.
        gc.collect()
        reply = await client.models.generate_content(
            model=MODEL, contents="hello", config={"max_output_tokens": 50}
        )
        assert reply.text == "Hello there!"
        await client.aclose()
        return pid

    assert wait_gone(asyncio.run(main()))


def test_a_dropped_client_releases_its_actor(conversation: dict[str, Any]) -> None:
    client = gemini_client(conversation)
    pid = _provider_of(client).actor_pid
    del client
    gc.collect()
    assert wait_gone(pid)


def test_owned_http_options_are_refused_and_release_nothing(conversation: dict[str, Any]) -> None:
    before = actor_pids()
    with pytest.raises(TypeError, match="retry_options"):
        gemini_client(conversation, http_options={"retry_options": {"attempts": 3}})
    with pytest.raises(TypeError, match="client_args"):
        gemini_client(conversation, http_options=types.HttpOptions(client_args={}))
    with pytest.raises(TypeError):
        gemini_client(conversation, no_such_option=1)
    for pid in actor_pids() - before:
        assert wait_gone(pid)


def test_other_options_reach_the_sdk(conversation: dict[str, Any]) -> None:
    with gemini_client(
        conversation, http_options={"headers": {"x-app": "1"}, "api_version": "v1beta"}
    ) as client:
        reply = client.models.generate_content(
            model=MODEL, contents="hello", config={"max_output_tokens": 50}
        )
    assert reply.text == "Hello there!"


# -- the mapping's decisions -------------------------------------------------------------------


def test_an_id_less_call_gets_the_same_id_wherever_it_is_read() -> None:
    live: dict[str, Any] = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {"text": "Checking."},
                        {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}},
                    ],
                },
                "finishReason": "STOP",
            }
        ],
        "usageMetadata": {"promptTokenCount": 4, "candidatesTokenCount": 3, "totalTokenCount": 7},
    }
    neutral = vendor_gemini.from_response(live)
    call_id = neutral["tool_calls"][0]["id"]
    assert call_id == vendor_gemini.derived_call_id(0, "get_weather", '{"city":"Paris"}')
    assert neutral["finish_reason"] == "tool_calls"
    assert neutral["usage"] == {"prompt_tokens": 4, "completion_tokens": 3, "total_tokens": 7}
    from replay_actor._response import read_response

    # Replayed to Gemini the id is left out again, as the model sent it.
    body = vendor_gemini.response_body(read_response(neutral), MODEL)
    parts = body["candidates"][0]["content"]["parts"]
    assert parts == live["candidates"][0]["content"]["parts"]
    # Sent back with its answer (paired by name), the request names the same id.
    request = vendor_gemini.read_body(
        {
            "contents": [
                {"role": "user", "parts": [{"text": "Weather?"}]},
                {"role": "model", "parts": parts},
                {
                    "role": "user",
                    "parts": [{"functionResponse": {"name": "get_weather", "response": {"t": 24}}}],
                },
            ]
        }
    ).request
    assert request["messages"][1]["tool_calls"][0]["id"] == call_id
    assert request["messages"][2] == {
        "role": "tool",
        "tool_call_id": call_id,
        "content": '{"t":24}',
    }
    # And the live body for that request is the body that was read.
    again = vendor_gemini.to_body(request, MODEL)
    assert again["contents"][1]["parts"] == parts
    assert again["contents"][2]["parts"] == [
        {"functionResponse": {"name": "get_weather", "response": {"t": 24}}}
    ]


def test_reasoning_replays_to_gemini_only_and_is_not_hashed() -> None:
    from replay_actor._response import read_response
    from replay_actor.vendors.anthropic import messages as vendor_anthropic

    live: dict[str, Any] = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {"text": "The user wants weather.", "thought": True},
                        {
                            "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                            "thoughtSignature": "c2lnbmF0dXJl",
                        },
                    ],
                },
                "finishReason": "STOP",
            }
        ]
    }
    neutral = vendor_gemini.from_response(live)
    assert neutral["reasoning"]["vendor"] == "gemini"
    response = read_response(neutral)
    body = vendor_gemini.response_body(response, MODEL)
    parts = body["candidates"][0]["content"]["parts"]
    assert parts == live["candidates"][0]["content"]["parts"]
    # Another vendor never sees Gemini's reasoning.
    assert [b["type"] for b in vendor_anthropic.response_body(response, "c")["content"]] == [
        "tool_use"
    ]
    # Sent back, the thought and the signature are not hashed: they ride on the assistant
    # message as its reasoning, which to_body puts back exactly as it came.
    with_thoughts = {
        "contents": [{"role": "user", "parts": [{"text": "?"}]}, {"role": "model", "parts": parts}]
    }
    without = {
        "contents": [
            {"role": "user", "parts": [{"text": "?"}]},
            {
                "role": "model",
                "parts": [{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}],
            },
        ]
    }
    carried = vendor_gemini.read_body(with_thoughts).request
    assert request_hash(carried) == request_hash(vendor_gemini.read_body(without).request)
    assert carried["messages"][1]["reasoning"]["vendor"] == "gemini"
    assert vendor_gemini.to_body(carried, MODEL)["contents"][1]["parts"] == parts


def test_a_refusal_replays_as_a_safety_stop() -> None:
    from replay_actor._response import read_response

    body = vendor_gemini.response_body(read_response({"refusal": "I can't help with that."}), MODEL)
    candidate = body["candidates"][0]
    assert candidate["finishReason"] == "SAFETY"
    assert candidate["content"]["parts"] == [{"text": "I can't help with that."}]
    blocked = vendor_gemini.from_response(
        {"candidates": [{"finishReason": "PROHIBITED_CONTENT", "content": {"parts": []}}]}
    )
    assert (blocked["refusal"], blocked["finish_reason"]) == ("", "content_filter")
    assert (
        vendor_gemini.response_body(read_response(blocked), MODEL)["candidates"][0]["finishReason"]
        == "SAFETY"
    )


def test_json_schema_output_is_the_chat_response_format(conversation: dict[str, Any]) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    for generation in (
        {"responseMimeType": "application/json", "responseJsonSchema": schema},
        {
            "responseMimeType": "application/json",
            "responseSchema": {"type": "OBJECT", "properties": {"a": {"type": "INTEGER"}}},
        },
    ):
        read = vendor_gemini.read_body(
            {"contents": [{"parts": [{"text": "x"}]}], "generationConfig": generation}
        )
        assert read.request["response_format"] == {
            "type": "json_schema",
            "json_schema": {"schema": schema},
        }
        assert "params" not in read.request
    plain = vendor_gemini.read_body(
        {
            "contents": [{"parts": [{"text": "x"}]}],
            "generationConfig": {"responseMimeType": "application/json"},
        }
    )
    assert plain.request["response_format"] == {"type": "json_object"}


def test_snake_case_fields_read_as_camel_case() -> None:
    camel = {"contents": [{"parts": [{"text": "x"}]}], "generationConfig": {"maxOutputTokens": 5}}
    snake = {
        "contents": [{"parts": [{"text": "x"}]}],
        "generation_config": {"max_output_tokens": 5},
    }
    assert vendor_gemini.read_body(camel).request == vendor_gemini.read_body(snake).request
    with pytest.raises(RequestError, match="generationConfig"):
        vendor_gemini.read_body({**camel, "generation_config": {}})


def test_ids_come_from_the_response_not_the_request() -> None:
    from replay_actor._response import read_response

    response = read_response(GREETING)
    assert vendor_gemini.response_body(response, MODEL)["responseId"] == response_id(response, "")


def test_the_registry_routes_gemini_paths() -> None:
    from replay_actor.serving import Exchange

    exchange = Exchange(None)
    body = json.dumps({"contents": [{"parts": [{"text": "hello"}]}]}).encode()
    for path, stream in (
        (f"/v1beta/models/{MODEL}:generateContent", False),
        (f"/v1/models/{MODEL}:streamGenerateContent", True),
    ):
        got = exchange.prepare("POST", path, body)
        assert len(got) == 2
        vendor, call = got
        assert vendor.name == "gemini" and (call.model, call.stream) == (MODEL, stream)
    counted = exchange.prepare("POST", f"/v1beta/models/{MODEL}:countTokens", body)
    assert len(counted) == 2 and counted[0].name == "gemini-count-tokens"
    missing = exchange.prepare("POST", f"/v1beta/models/{MODEL}:computeTokens", body)
    assert len(missing) == 3 and missing[0] == 404


def test_refusal_and_foreign_reasoning_through_the_sdk(tmp_path: Path) -> None:
    """A stored refusal is a SAFETY stop with its text, plain and streamed; reasoning
    another vendor produced is never shown to Gemini."""
    refused = {"content": None, "refusal": "I can't help with that.", "finish_reason": "stop"}
    thoughtful = {
        "content": "Hello!",
        "reasoning": {
            "vendor": "anthropic",
            "items": [{"type": "thinking", "thinking": "hmm", "signature": "c2ln"}],
        },
    }
    ask = request_hash({"messages": [{"role": "user", "content": "something forbidden"}]})
    hello = request_hash({"messages": [{"role": "user", "content": "hello"}]})
    fixture = write_fixture(tmp_path / "shapes.jsonl", {ask: refused, hello: thoughtful})
    with gemini_client({"provider": {"kind": "replay", "fixture": str(fixture)}}) as client:
        plain = client.models.generate_content(model=MODEL, contents="something forbidden")
        streamed = list(
            client.models.generate_content_stream(model=MODEL, contents="something forbidden")
        )
        greeting = client.models.generate_content(model=MODEL, contents="hello")
    assert _gather(streamed) == (plain.text, [], types.FinishReason.SAFETY)
    assert plain.text == "I can't help with that."
    assert plain.candidates and plain.candidates[0].finish_reason == types.FinishReason.SAFETY
    assert greeting.candidates and greeting.candidates[0].content
    assert greeting.candidates[0].content.model_dump(exclude_none=True) == {
        "role": "model",
        "parts": [{"text": "Hello!"}],
    }


def test_what_an_answer_carries_back_says_nothing_new() -> None:
    """A model turn sent back with ``thought: false``, an empty call id or a lone
    signature part hashes as the turn without them."""
    plain = {
        "contents": [
            {"role": "user", "parts": [{"text": "?"}]},
            {
                "role": "model",
                "parts": [
                    {"text": "Checking."},
                    {"functionCall": {"name": "get_weather", "args": {"city": "X"}}},
                ],
            },
        ]
    }
    echoed = {
        "contents": [
            {"role": "user", "parts": [{"text": "?"}]},
            {
                "role": "model",
                "parts": [
                    {"text": "Checking.", "thought": False},
                    {"thoughtSignature": "c2ln"},
                    {"functionCall": {"id": "", "name": "get_weather", "args": {"city": "X"}}},
                ],
            },
        ]
    }
    assert vendor_gemini.read_body(echoed).request == vendor_gemini.read_body(plain).request
    with pytest.raises(RequestError, match=r"contents\[1\]\.parts\[0\]\.functionResponse"):
        vendor_gemini.read_body(
            {
                "contents": [
                    {"role": "user", "parts": [{"text": "?"}]},
                    {"role": "model", "parts": [{"functionResponse": {"name": "f"}}]},
                ]
            }
        )
    with pytest.raises(RequestError, match="answers no functionCall"):
        vendor_gemini.read_body(
            {"contents": [{"role": "user", "parts": [{"functionResponse": {"name": "f"}}]}]}
        )


GEMINI_WORKFLOW = """
import asyncio
import sys
from google.genai import errors
from replay_actor import async_gemini_client, gemini_client
manifest = {"provider": {"kind": "replay", "fixture": sys.argv[1]}}
config = {"max_output_tokens": 50}
with gemini_client(manifest) as client:
    print(client.models.generate_content(model="m", contents="hello", config=config).text)
    try:
        client.models.generate_content(model="m", contents="?")
    except errors.ClientError as exc:
        print(exc.status)
async def main():
    async with async_gemini_client(manifest) as aio:
        stream = await aio.models.generate_content_stream(
            model="m", contents="hello", config=config
        )
        print("".join([chunk.text async for chunk in stream]))
asyncio.run(main())
"""


def test_the_gemini_replay_path_creates_only_unix_sockets(
    conversation: dict[str, Any], tmp_path: Path
) -> None:
    """Sync and async (aiohttp installed), the SDK's calls never open an internet
    socket: the provider's pipes are the only sockets."""
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
        [sys.executable, "-c", GEMINI_WORKFLOW, conversation["provider"]["fixture"]],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["Hello there!", "replay_miss", "Hello there!"]
    families = {int(line.split()[2]) for line in log.read_text().splitlines()}
    assert families == {int(socket.AF_UNIX)}


@pytest.mark.parametrize(
    ("calling", "choice"),
    [
        ({"mode": "AUTO"}, "auto"),
        ({"mode": "NONE", "allowedFunctionNames": ["a"]}, "none"),
        ({"mode": "ANY"}, "required"),
        ({"mode": "ANY", "allowedFunctionNames": ["a"]}, {"name": "a"}),
        (
            {"mode": "AUTO", "allowedFunctionNames": ["a", "b"]},
            {
                "type": "allowed_tools",
                "allowed_tools": {
                    "mode": "auto",
                    "tools": [
                        {"type": "function", "function": {"name": "a"}},
                        {"type": "function", "function": {"name": "b"}},
                    ],
                },
            },
        ),
    ],
)
def test_function_calling_modes_are_the_neutral_tool_choice(calling: Any, choice: Any) -> None:
    body = {
        "contents": [{"parts": [{"text": "x"}]}],
        "tools": [{"functionDeclarations": [{"name": "a"}, {"name": "b"}]}],
        "toolConfig": {"functionCallingConfig": calling},
    }
    request = vendor_gemini.read_body(body).request
    assert request["tool_choice"] == choice
    # The live body says it again (a NONE's names say nothing and are not sent).
    sent = vendor_gemini.to_body(request, MODEL)["toolConfig"]["functionCallingConfig"]
    expected = dict(calling)
    if calling["mode"] == "NONE":
        expected.pop("allowedFunctionNames")
    assert sent == expected
    with pytest.raises(RequestError, match="VALIDATED"):
        vendor_gemini.read_body(
            {**body, "toolConfig": {"functionCallingConfig": {"mode": "VALIDATED"}}}
        )
