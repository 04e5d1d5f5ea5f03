"""Live and record through ``google-genai``, against a real 127.0.0.1 server speaking
Gemini's wire (tests/support/gemini_server.py): the ``gemini`` adapter sends the neutral request
as a ``generateContent`` body and reads the answer back; the same SDK call runs in live,
record and replay; a recording made through Gemini replays through the OpenAI SDK. A
planted API key never reaches a fixture or an exception.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

import openai
import pytest
from google import genai
from google.genai import errors, types

from replay_actor import LiveProviderError, ManifestError, gemini_client, open_provider
from replay_actor import openai_client as make_openai_client
from replay_actor.adapters.builtin import GeminiAdapter
from tests.support.gemini_server import SIGNATURE, THOUGHT, GeminiServer

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(60)]

SECRET_KEY = "AIza-PLANTED-3f9d0c8e1b7a"
KEY_VAR = "REPLAY_ACTOR_GEMINI_TEST_KEY"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
TOOLS: list[Any] = [
    types.Tool(
        function_declarations=[
            types.FunctionDeclaration(
                name="get_weather", description="Weather for a city", parameters_json_schema=SCHEMA
            )
        ]
    )
]


@pytest.fixture
def key_env(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_VAR, SECRET_KEY)
    return KEY_VAR


def table(server: GeminiServer, scenario: str = "echo", **extra: Any) -> dict[str, Any]:
    return {
        "adapter": "gemini",
        "model": "gemini-live",
        "base_url": server.base_url(scenario),
        "api_key_env": KEY_VAR,
        "retry_backoff": 0.0,
        **extra,
    }


def live(config: dict[str, Any]) -> dict[str, Any]:
    return {"provider": {"kind": "live", **config}}


def record(config: dict[str, Any], fixture: Path) -> dict[str, Any]:
    return {"provider": {"kind": "record", "fixture": str(fixture), "live": config}}


def replay(fixture: Path) -> dict[str, Any]:
    return {"provider": {"kind": "replay", "fixture": str(fixture)}}


def app(client: genai.Client) -> list[Any]:
    """The application: two unchanged SDK calls."""
    with client:
        return [
            client.models.generate_content(
                model="gemini-x",
                contents=text,
                config=types.GenerateContentConfig(max_output_tokens=20, temperature=0),
            ).text
            for text in ("first", "second")
        ]


def test_live_record_replay(gemini_server: GeminiServer, key_env: str, tmp_path: Path) -> None:
    config = table(gemini_server)
    assert app(gemini_client(live(config))) == ["1: first", "2: second"]
    fixture = tmp_path / "recorded.jsonl"
    recorded = app(gemini_client(record(config, fixture)))
    assert recorded == ["3: first", "4: second"]
    hits = gemini_server.count("echo")
    assert app(gemini_client(replay(fixture))) == recorded
    assert gemini_server.count("echo") == hits  # replay sent nothing
    sent = gemini_server.received[-1]
    assert sent.path == "/echo/v1beta/models/gemini-live:generateContent"
    assert sent.headers["x-goog-api-key"] == SECRET_KEY
    assert "authorization" not in sent.headers
    assert sent.body == {
        "contents": [{"role": "user", "parts": [{"text": "second"}]}],
        "generationConfig": {"maxOutputTokens": 20, "temperature": 0},
    }
    assert SECRET_KEY not in fixture.read_text()


def test_thinking_and_id_less_calls_record_and_replay_as_they_came(
    gemini_server: GeminiServer, key_env: str, tmp_path: Path
) -> None:
    """A thinking model's answer (a thought part, a call with no id and a signature) is
    recorded verbatim and replayed to Gemini exactly; sent back in the next turn, the
    thought and signature are not hashed, and the call pairs with its answer by name."""
    fixture = tmp_path / "thinking.jsonl"
    config = types.GenerateContentConfig(system_instruction="Be brief.", tools=TOOLS)
    with gemini_client(record(table(gemini_server, "tools"), fixture)) as client:
        recorded = client.models.generate_content(
            model="gemini-x", contents="Weather in Paris?", config=config
        )
    with gemini_client(replay(fixture)) as client:
        replayed = client.models.generate_content(
            model="gemini-x", contents="Weather in Paris?", config=config
        )
    for answer in (recorded, replayed):
        assert answer.candidates and answer.candidates[0].content
        parts = answer.candidates[0].content.model_dump(exclude_none=True, by_alias=True)
        assert parts["parts"][0] == {"text": THOUGHT["text"], "thought": True}
        call = answer.candidates[0].content.parts[1]  # type: ignore[index]
        assert call.function_call is not None and call.function_call.id is None
        assert (call.function_call.name, call.function_call.args) == (
            "get_weather",
            {"city": "Paris"},
        )
        assert call.thought_signature is not None
    # The live body: the declaration as JSON Schema, the system instruction, no ids.
    sent = gemini_server.received[-1].body
    assert sent["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert sent["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "Weather for a city",
                    "parametersJsonSchema": SCHEMA,
                }
            ]
        }
    ]


def test_record_through_gemini_replay_through_openai(
    gemini_server: GeminiServer, key_env: str, tmp_path: Path
) -> None:
    fixture = tmp_path / "cross.jsonl"
    with gemini_client(record(table(gemini_server, "tools"), fixture)) as client:
        client.models.generate_content(
            model="gemini-x",
            contents="Weather in Paris?",
            config=types.GenerateContentConfig(
                system_instruction="Be brief.", tools=TOOLS, max_output_tokens=64
            ),
        )
    with make_openai_client(replay(fixture)) as oa:
        reply = oa.chat.completions.create(
            model="gpt-x",
            messages=[
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Weather in Paris?"},
            ],
            tools=[
                {
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "description": "Weather for a city",
                        "parameters": SCHEMA,
                    },
                }
            ],
            max_tokens=64,
        )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    call: Any = (choice.message.tool_calls or [])[0]
    assert call.function.name == "get_weather" and call.id.startswith("call_")
    assert reply.usage is not None and reply.usage.total_tokens == 7
    # Gemini's thought parts are not another vendor's to see.
    assert "thought" not in reply.model_dump_json()
    assert SIGNATURE not in reply.model_dump_json()


def test_a_blocked_prompt_is_a_refusal_everywhere(
    gemini_server: GeminiServer, key_env: str, tmp_path: Path
) -> None:
    fixture = tmp_path / "blocked.jsonl"
    with gemini_client(record(table(gemini_server, "blocked"), fixture)) as client:
        blocked = client.models.generate_content(model="gemini-x", contents="something bad")
    assert blocked.candidates and blocked.candidates[0].finish_reason == types.FinishReason.SAFETY
    with make_openai_client(replay(fixture)) as oa:
        reply = oa.chat.completions.create(
            model="gpt-x", messages=[{"role": "user", "content": "something bad"}]
        )
    assert reply.choices[0].message.refusal == ""
    assert reply.choices[0].message.content is None


def test_retries_then_answers(gemini_server: GeminiServer, key_env: str) -> None:
    with open_provider(live(table(gemini_server, "429x1"))) as provider:
        answer = provider.complete({"messages": [{"role": "user", "content": "hi"}]})
    assert answer["content"] == "2: hi"
    assert gemini_server.count("429x1") == 2


@pytest.mark.parametrize("scenario", ["500", "401"])
def test_key_and_prompt_never_in_an_error(
    gemini_server: GeminiServer, key_env: str, scenario: str
) -> None:
    prompt = "a private question about OSPREY"
    with (
        open_provider(live(table(gemini_server, scenario, max_retries=1))) as provider,
        pytest.raises(LiveProviderError) as caught,
    ):
        provider.complete({"messages": [{"role": "user", "content": prompt}]})
    said = [str(caught.value), repr(caught.value), repr(vars(caught.value))]
    said.extend(traceback.format_exception(caught.value))
    # The secrets did reach the server (so the test can fail)...
    assert gemini_server.received[0].headers["x-goog-api-key"] == SECRET_KEY
    assert "OSPREY" in str(gemini_server.received[0].body)
    # ...and nothing the caller sees repeats them.
    for text in said:
        assert SECRET_KEY not in text and "OSPREY" not in text
    assert caught.value.__context__ is None and caught.value.__cause__ is None
    assert f"HTTP {scenario}" in str(caught.value)
    # Through the SDK, the same failure is google-genai's own error, asked once.
    with gemini_client(live(table(gemini_server, scenario, max_retries=0))) as client:
        before = gemini_server.count(scenario)
        with pytest.raises(errors.ServerError) as sdk:
            client.models.generate_content(model="gemini-x", contents=prompt)
    assert gemini_server.count(scenario) == before + 1
    assert sdk.value.status == "live_provider_error"
    assert SECRET_KEY not in str(sdk.value) and "OSPREY" not in str(sdk.value)


def test_the_adapter_maps_the_whole_request(gemini_server: GeminiServer, key_env: str) -> None:
    request = {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "tool_calls": [{"id": "c1", "name": "get_weather", "arguments": '{"city":"X"}'}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
            {"role": "user", "content": "and tomorrow?"},
        ],
        "tools": [{"name": "get_weather", "description": "w", "parameters": SCHEMA}],
        "tool_choice": {"name": "get_weather"},
        "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": SCHEMA}},
        "params": {
            "max_tokens": 30,
            "top_p": 0.5,
            "stop": ["END"],
            "thinkingConfig": {"thinkingBudget": 0},
            "safetySettings": [{"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "OFF"}],
        },
    }
    with open_provider(live(table(gemini_server))) as provider:
        provider.complete(request)
    assert gemini_server.received[-1].body == {
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "contents": [
            {"role": "user", "parts": [{"text": "Weather?"}]},
            {
                "role": "model",
                "parts": [
                    {"functionCall": {"id": "c1", "name": "get_weather", "args": {"city": "X"}}}
                ],
            },
            {
                "role": "user",
                "parts": [
                    {
                        "functionResponse": {
                            "id": "c1",
                            "name": "get_weather",
                            "response": {"result": "sunny"},
                        }
                    },
                    {"text": "and tomorrow?"},
                ],
            },
        ],
        "tools": [
            {
                "functionDeclarations": [
                    {"name": "get_weather", "description": "w", "parametersJsonSchema": SCHEMA}
                ]
            }
        ],
        "toolConfig": {
            "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}
        },
        "safetySettings": [{"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "OFF"}],
        "generationConfig": {
            "maxOutputTokens": 30,
            "topP": 0.5,
            "stopSequences": ["END"],
            "thinkingConfig": {"thinkingBudget": 0},
            "responseMimeType": "application/json",
            "responseJsonSchema": SCHEMA,
        },
    }


def test_the_adapter_is_registered_with_the_vendors_defaults() -> None:
    import importlib.metadata

    from replay_actor.adapters.base import ADAPTER_GROUP, load_adapter_factory

    names = [ep.name for ep in importlib.metadata.entry_points(group=ADAPTER_GROUP)]
    assert "gemini" in names
    assert load_adapter_factory("gemini") is GeminiAdapter
    adapter = GeminiAdapter({"model": "models/gemini-2.5-flash"})
    try:
        assert adapter._config.url == (
            "https://generativelanguage.googleapis.com/v1beta/models/"
            "gemini-2.5-flash:generateContent"
        )
    finally:
        adapter.close()
    with pytest.raises(ManifestError) as caught:
        GeminiAdapter({"model": "m", "organization": "x"})
    assert caught.value.key == "organization"
    with pytest.raises(ManifestError) as version:
        GeminiAdapter({"model": "m", "api_version": "../x"})
    assert version.value.key == "api_version"
    with pytest.raises(ManifestError) as model:
        GeminiAdapter({})
    assert model.value.key == "model"


def test_openai_sdk_is_not_needed_for_gemini() -> None:
    # The OpenAI SDK is imported above only for the cross-shape test.
    assert openai.__name__ == "openai"
