"""The OpenAI Responses API shape (docs/responses.md): the body -> neutral mapping and its
hashes, the answers and streams through the real ``openai`` SDK, ``previous_response_id``,
ids, refusals and reasoning, the live/record adapter against a loopback Responses server,
and the not-hashed transport hints in every mapping."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.types.responses import Response

from replay_actor import RequestError, entry_line, openai_client, request_hash
from replay_actor.cli import main
from replay_actor.vendors import make_vendor
from replay_actor.vendors._common import MalformedResponse
from replay_actor.vendors.anthropic import messages as vendor_anthropic
from replay_actor.vendors.openai import chat as vendor_openai
from replay_actor.vendors.openai.responses import from_response, to_body
from replay_actor.vendors.openai.responses import remembering as OpenAIResponses
from tests.support.responses_server import REASONING_ITEM, ResponsesServer


def sdk(manifest: dict[str, Any]) -> Any:
    """An ``openai.OpenAI`` on the manifest's provider, typed loosely: these tests send
    hand-written dict items the SDK's TypedDict overloads do not spell."""
    return openai_client(manifest)


pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(60)]

WEATHER_TOOL: Any = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    "strict": True,
}
CHAT_TOOL: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        "strict": True,
    },
}
CALL = {"id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'}
TOOL_ANSWER = {"content": None, "tool_calls": [CALL], "finish_reason": "tool_calls"}
REFUSED = {"content": None, "refusal": "I can't help with that.", "finish_reason": "stop"}


def responses_hash(body: dict[str, Any]) -> str:
    return request_hash(make_vendor("openai-responses").read_body(body).request)


def chat_hash(body: dict[str, Any]) -> str:
    return request_hash(vendor_openai.read_body(body).request)


def write_fixture(path: Path, *entries: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    path.write_bytes(b"".join(entry_line(h, response=r) + b"\n" for h, r in entries))
    return {"provider": {"kind": "replay", "fixture": str(path)}}


# -- body -> neutral: the mapping and its hashes ------------------------------------------


def test_the_same_conversation_hashes_alike_through_chat_and_responses() -> None:
    chat = {
        "model": "gpt-4.1",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": "Let me look.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Lyon"}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
            {"role": "tool", "tool_call_id": "call_2", "content": "rain"},
        ],
        "tools": [CHAT_TOOL],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "max_completion_tokens": 50,
        "temperature": 0.2,
        "reasoning_effort": "low",
    }
    responses = {
        "model": "gpt-5",
        "instructions": "Be brief.",
        "input": [
            {"type": "message", "role": "user", "content": "Weather in Paris?"},
            # The previous output sent back verbatim (ids, status, annotations).
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "eA=="},
            {
                "type": "message",
                "id": "msg_1",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}],
            },
            {
                "type": "function_call",
                "id": "fc_1",
                "status": "completed",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": '{"city":"Paris"}',
            },
            {
                "type": "function_call",
                "call_id": "call_2",
                "name": "get_weather",
                "arguments": '{"city": "Lyon"}',
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
            {
                "type": "function_call_output",
                "call_id": "call_2",
                "output": [{"type": "input_text", "text": "rain"}],
            },
        ],
        "tools": [WEATHER_TOOL],
        "tool_choice": {"type": "function", "name": "get_weather"},
        "max_output_tokens": 50,
        "temperature": 0.2,
        "reasoning": {"effort": "low"},
        # Transport, caching and retention hints: not hashed.
        "store": True,
        "prompt_cache_key": "agents-sdk:run:random",
        "include": ["reasoning.encrypted_content"],
        "metadata": {"run": "7"},
    }
    assert responses_hash(responses) == chat_hash(chat)
    # developer is system; a string input is one user message.
    short = {"model": "m", "input": "hi", "instructions": "Be brief."}
    developer = {
        "model": "m",
        "input": [
            {"role": "developer", "content": "Be brief."},
            {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        ],
    }
    assert responses_hash(short) == responses_hash(developer)
    assert responses_hash(short) == chat_hash(
        {"model": "m", "messages": [{"role": "developer", "content": "Be brief."}, *ASK]}
    )


ASK = [{"role": "user", "content": "hi"}]


def test_text_format_hashes_as_the_chat_response_format() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    chat = {
        "model": "m",
        "messages": ASK,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "A", "schema": schema, "strict": True},
        },
    }
    responses = {
        "model": "m",
        "input": "hi",
        "text": {"format": {"type": "json_schema", "name": "A", "schema": schema, "strict": True}},
    }
    assert responses_hash(responses) == chat_hash(chat)
    plain = {"model": "m", "input": "hi", "text": {"format": {"type": "text"}}}
    assert responses_hash(plain) == chat_hash({"model": "m", "messages": ASK})


@pytest.mark.parametrize(
    ("tools", "named"),
    [
        ([{"type": "web_search"}], "web_search"),
        ([WEATHER_TOOL, {"type": "file_search", "vector_store_ids": ["v"]}], "file_search"),
        ([{"type": "code_interpreter", "container": {"type": "auto"}}], "code_interpreter"),
        ([{"type": "mcp", "server_label": "x"}, {"type": "computer_use_preview"}], "mcp, computer"),
        ([{"type": "image_generation"}], "image_generation"),
    ],
)
def test_built_in_tools_are_refused_by_name(tools: list[Any], named: str) -> None:
    with pytest.raises(RequestError, match=f"built-in tools cannot be replayed: {named}"):
        make_vendor("openai-responses").read_body({"model": "m", "input": "hi", "tools": tools})


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"input": "hi", "conversation": "conv_1"}, "conversation"),
        ({"input": "hi", "prompt": {"id": "pmpt_1"}}, "prompt"),
        ({"input": "hi", "background": True}, "background"),
        ({"input": [{"type": "web_search_call", "id": "ws"}]}, "'web_search_call'"),
        ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "item_reference"),
        ({"input": 3}, "input must be"),
        ({"input": "hi", "previous_response_id": "resp_nowhere"}, "'resp_nowhere'"),
    ],
)
def test_what_cannot_be_replayed_is_named(body: dict[str, Any], message: str) -> None:
    with pytest.raises(RequestError, match=message):
        make_vendor("openai-responses").read_body({"model": "m", **body})


NOT_HASHED = {
    "store": True,
    "prompt_cache_key": "k-1234",
    "prompt_cache_retention": "24h",
    "metadata": {"a": "b"},
    "service_tier": "flex",
    "safety_identifier": "u-1",
    "user": "someone",
    "include": ["reasoning.encrypted_content"],
}


def test_transport_hints_are_not_hashed_in_any_mapping() -> None:
    chat = {"model": "m", "messages": ASK, "max_tokens": 9}
    assert chat_hash({**chat, **NOT_HASHED}) == chat_hash(chat)
    # The hash of a request without those fields is the one it always had.
    assert chat_hash(chat) == request_hash({"messages": ASK, "params": {"max_tokens": 9}})
    claude = {"model": "c", "messages": ASK, "max_tokens": 9}

    def claude_hash(body: dict[str, Any]) -> str:
        return request_hash(vendor_anthropic.read_body(body).request)

    assert claude_hash({**claude, **NOT_HASHED}) == claude_hash(claude) == chat_hash(chat)
    responses = {"model": "m", "input": "hi", "max_output_tokens": 9}
    assert responses_hash({**responses, **NOT_HASHED}) == responses_hash(responses)
    assert responses_hash(responses) == chat_hash(chat)
    # Anything else still counts.
    assert chat_hash({**chat, "temperature": 0}) != chat_hash(chat)


def test_reasoning_and_thinking_sent_back_are_not_hashed() -> None:
    turn = [{"role": "user", "content": "hi"}]
    with_thinking = [
        *turn,
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "c2ln"},
                {"type": "redacted_thinking", "data": "ZW5j"},
                {"type": "text", "text": "Hello!"},
            ],
        },
        {"role": "user", "content": "again"},
    ]
    without = [*turn, {"role": "assistant", "content": "Hello!"}, with_thinking[-1]]

    def claude_hash(messages: list[Any]) -> str:
        body = {"model": "c", "max_tokens": 9, "messages": messages}
        return request_hash(vendor_anthropic.read_body(body).request)

    assert claude_hash(with_thinking) == claude_hash(without)
    assert claude_hash(without) == chat_hash({"model": "m", "max_tokens": 9, "messages": without})
    items = [
        {"role": "user", "content": "hi"},
        {"type": "reasoning", "id": "rs_9", "summary": [], "encrypted_content": "QUJD"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "again"},
    ]
    assert responses_hash({"model": "m", "input": items}) == chat_hash(
        {"model": "m", "messages": without}
    )


def test_a_refusal_sent_back_hashes_as_in_chat() -> None:
    refused = {
        "type": "message",
        "role": "assistant",
        "id": "msg_x",
        "status": "completed",
        "content": [{"type": "refusal", "refusal": "No."}],
    }
    body = {"model": "m", "input": [{"role": "user", "content": "bad"}, refused]}
    chat = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "bad"},
            {"role": "assistant", "content": None, "refusal": "No."},
        ],
    }
    assert responses_hash(body) == chat_hash(chat)


def test_errors_repeat_identifiers_never_payloads() -> None:
    secret = "PLANTED SECRET: the patient's name is Jane"
    vendor = make_vendor("openai-responses")
    bodies: list[dict[str, Any]] = [
        {"input": [{"type": secret}]},
        {"input": "hi", "tools": [{"type": secret}]},
        {"input": "hi", "text": {"format": {"type": secret}}},
        {"input": "hi", "previous_response_id": secret},
        {"input": "hi", "tools": [WEATHER_TOOL], "tool_choice": {"type": secret}},
    ]
    for body in bodies:
        with pytest.raises(RequestError) as caught:
            vendor.read_body({"model": "m", **body})
        assert "Jane" not in str(caught.value)
    with pytest.raises(MalformedResponse) as bad:
        from_response({"output": [{"type": secret}]})
    assert "Jane" not in str(bad.value)


def test_the_cli_hashes_a_responses_body(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = {"model": "gpt-5", "input": "hi", "instructions": "Be brief.", "store": True}
    path = tmp_path / "body.json"
    path.write_text(json.dumps(body))
    assert main(["hash", "--from", "openai-responses", str(path)]) == 0
    out, err = capsys.readouterr()
    assert out == responses_hash(body) + "\n"
    assert err == ""
    path.write_text(json.dumps({**body, "tools": [{"type": "web_search"}]}))
    assert main(["hash", "--from", "openai-responses", str(path)]) != 0
    assert "web_search" in capsys.readouterr().err


# -- neutral -> response and stream, through the SDK --------------------------------------

TEXT_BODY: dict[str, Any] = {"model": "gpt-5", "input": "hi", "instructions": "Be brief."}
TOOLS_BODY: dict[str, Any] = {
    "model": "gpt-5",
    "input": [{"role": "user", "content": "Weather in Paris?"}],
    "tools": [WEATHER_TOOL],
}
REFUSE_BODY: dict[str, Any] = {"model": "gpt-5", "input": "something forbidden"}
THINK_BODY: dict[str, Any] = {"model": "gpt-5", "input": "think first"}
CLAUDE_THINK_BODY: dict[str, Any] = {"model": "gpt-5", "input": "think like claude"}
THINKING_OF_CLAUDE = [{"type": "thinking", "thinking": "hmm", "signature": "c2ln"}]


@pytest.fixture
def manifest(tmp_path: Path) -> dict[str, Any]:
    return write_fixture(
        tmp_path / "r.jsonl",
        (responses_hash(TEXT_BODY), {"content": "Hello!", "usage": {"prompt_tokens": 3}}),
        (responses_hash(TOOLS_BODY), TOOL_ANSWER),
        (responses_hash(REFUSE_BODY), REFUSED),
        (
            responses_hash(THINK_BODY),
            {
                "content": "42",
                "reasoning": {"vendor": "openai-responses", "items": [REASONING_ITEM]},
            },
        ),
        (
            responses_hash(CLAUDE_THINK_BODY),
            {"content": "43", "reasoning": {"vendor": "anthropic", "items": THINKING_OF_CLAUDE}},
        ),
    )


def _kwargs(body: dict[str, Any]) -> Any:
    return dict(body)


@pytest.mark.parametrize("body", [TEXT_BODY, TOOLS_BODY, REFUSE_BODY, THINK_BODY])
def test_a_stream_rebuilds_exactly_the_response(
    manifest: dict[str, Any], body: dict[str, Any]
) -> None:
    with sdk(manifest) as client:
        parsed = client.responses.parse(**_kwargs(body))
        created = client.responses.create(**_kwargs(body))
        with client.responses.stream(**_kwargs(body)) as stream:
            events = list(stream)
            streamed = stream.get_final_response()
    assert streamed.model_dump() == parsed.model_dump()
    assert created.id == streamed.id
    # The answer validates against the SDK's own (pydantic) type, not only constructs.
    assert Response.model_validate(created.to_dict()) == created
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[0].type == "response.created" and events[-1].type == "response.completed"
    ids = {getattr(e, "item_id", None) for e in events} - {None}
    assert ids <= {item.id for item in created.output}


def test_answers_have_the_responses_shape(manifest: dict[str, Any]) -> None:
    with sdk(manifest) as client:
        text = client.responses.create(**_kwargs(TEXT_BODY))
        tools = client.responses.create(**_kwargs(TOOLS_BODY))
        refused = client.responses.create(**_kwargs(REFUSE_BODY))
        thought = client.responses.create(**_kwargs(THINK_BODY))
        other = client.responses.create(**_kwargs(CLAUDE_THINK_BODY))
    assert text.output_text == "Hello!"
    assert text.id.startswith("resp_") and text.output[0].id.startswith("msg_")
    assert text.instructions == "Be brief." and text.model == "gpt-5"
    assert text.usage is not None and text.usage.input_tokens == 3
    call = tools.output[0]
    assert call.type == "function_call"
    assert (call.call_id, call.name, call.arguments) == ("call_1", "get_weather", CALL["arguments"])
    assert call.id is not None and call.id.startswith("fc_")
    part = refused.output[0].content[0]
    assert part.type == "refusal" and part.refusal == REFUSED["refusal"]
    # Reasoning goes back verbatim to the vendor that produced it, and to no other.
    assert thought.output[0].model_dump(exclude_none=True) == REASONING_ITEM
    assert thought.output_text == "42"
    assert [o.type for o in other.output] == ["message"]
    assert "thinking" not in other.model_dump_json()


# -- previous_response_id and ids ---------------------------------------------------------

FIRST = {"model": "m", "input": "Weather in Paris?", "tools": [WEATHER_TOOL]}
OUTPUT_ITEM: Any = {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}
SECOND_FULL = {
    "model": "m",
    "input": [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city":"Paris"}',
        },
        OUTPUT_ITEM,
    ],
    "tools": [WEATHER_TOOL],
}
# Another conversation that ends in the very same first answer.
OTHER_FIRST = {"model": "m", "input": "Weather where I am?", "tools": [WEATHER_TOOL]}
OTHER_SECOND = {
    "model": "m",
    "input": [
        {"role": "user", "content": "Weather where I am?"},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city":"Paris"}',
        },
        OUTPUT_ITEM,
    ],
    "tools": [WEATHER_TOOL],
}


@pytest.fixture
def multi_turn(tmp_path: Path) -> dict[str, Any]:
    return write_fixture(
        tmp_path / "turns.jsonl",
        (responses_hash(FIRST), TOOL_ANSWER),
        (responses_hash(SECOND_FULL), {"content": "Sunny in Paris."}),
        (responses_hash(OTHER_FIRST), TOOL_ANSWER),
        (responses_hash(OTHER_SECOND), {"content": "Sunny where you are."}),
    )


def _chain(client: Any, first: dict[str, Any]) -> tuple[Any, Any]:
    one = client.responses.create(**first)
    two = client.responses.create(
        model="m",
        previous_response_id=one.id,
        input=[OUTPUT_ITEM],
        tools=[WEATHER_TOOL],
    )
    return one, two


def test_previous_response_id_expands_what_this_provider_served(
    multi_turn: dict[str, Any],
) -> None:
    with sdk(multi_turn) as client:
        one, two = _chain(client, FIRST)
        other_one, other_two = _chain(client, OTHER_FIRST)
        # The same conversation resent whole: the same entry and the same ids.
        resent = client.responses.create(**SECOND_FULL)
        # A streamed turn is remembered too.
        with client.responses.stream(**FIRST) as stream:
            streamed_one = stream.get_final_response()
    assert two.output_text == "Sunny in Paris."
    assert other_two.output_text == "Sunny where you are."
    # The same answer ending two conversations: two ids, each expanding to its own.
    assert [o.call_id for o in one.output] == [o.call_id for o in other_one.output]
    assert one.id != other_one.id
    assert streamed_one.id == one.id
    assert resent.id == two.id and resent.output[0].id == two.output[0].id
    with sdk(multi_turn) as again:
        rerun_one, rerun_two = _chain(again, FIRST)
    # Stable: a rerun of the same conversation sees the same ids.
    assert (rerun_one.id, rerun_two.id) == (one.id, two.id)
    assert [o.id for o in rerun_two.output] == [o.id for o in two.output]


def test_an_unknown_previous_response_id_is_a_400_naming_it(multi_turn: dict[str, Any]) -> None:
    with sdk(multi_turn) as client, pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="m", previous_response_id="resp_never", input="hi")
    assert "resp_never" in str(caught.value)


def test_the_transcript_memory_is_bounded() -> None:
    from replay_actor._response import read_response

    vendor = OpenAIResponses(capacity=2)
    ids = []
    for i in range(3):
        call = vendor.read_body({"model": "m", "input": f"q{i}"})
        ids.append(vendor.response_body(read_response({"content": f"a{i}"}), call)["id"])
    with pytest.raises(RequestError, match=ids[0]):
        vendor.read_body({"model": "m", "input": "more", "previous_response_id": ids[0]})
    expanded = vendor.read_body({"model": "m", "input": "more", "previous_response_id": ids[2]})
    assert expanded.request["messages"] == [
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "a2"},
        {"role": "user", "content": "more"},
    ]


def test_private_mode_puts_no_request_hash_in_an_answer(tmp_path: Path) -> None:
    fixture = write_fixture(tmp_path / "p.jsonl", (responses_hash(TEXT_BODY), {"content": "ok"}))
    private = {"provider": {**fixture["provider"], "data": "private"}}
    with sdk(private) as client:
        answer = client.responses.create(**_kwargs(TEXT_BODY))
        with pytest.raises(openai.NotFoundError) as caught:
            client.responses.create(model="m", input="not in the fixture")
    digest = responses_hash(TEXT_BODY).removeprefix("sha256:")
    assert digest[:24] not in answer.model_dump_json()
    missed = responses_hash({"model": "m", "input": "not in the fixture"}).removeprefix("sha256:")
    assert missed not in str(caught.value) and missed not in json.dumps(caught.value.body)
    body: Any = caught.value.body
    assert body["message"] == "no replay fixture matches this request"


# -- live and record: the openai-responses adapter ----------------------------------------


def _record(server: ResponsesServer, scenario: str, fixture: Path) -> dict[str, Any]:
    live = {
        "adapter": "openai-responses",
        "model": "test-model",
        "base_url": server.base_url(scenario),
        "max_retries": 0,
        "retry_backoff": 0.0,
    }
    return {"provider": {"kind": "record", "fixture": str(fixture), "live": live}}


def test_record_keeps_reasoning_and_refusals_and_replays_them(
    responses_server: ResponsesServer, tmp_path: Path
) -> None:
    fixture = tmp_path / "rec.jsonl"
    with sdk(_record(responses_server, "reasoning", fixture)) as client:
        recorded = client.responses.create(model="gpt-5", input="hello", store=False)
    body = responses_server.received[0].body
    assert body["input"] == [{"type": "message", "role": "user", "content": "hello"}]
    assert body["model"] == "test-model" and "store" not in body
    with sdk({"provider": {"kind": "replay", "fixture": str(fixture)}}) as client:
        replayed = client.responses.create(model="gpt-5", input="hello")
    assert replayed.output[0].model_dump(exclude_none=True) == REASONING_ITEM
    assert replayed.output_text == recorded.output_text == "Hello!"
    assert replayed.output == recorded.output
    fixture2 = tmp_path / "refusal.jsonl"
    with sdk(_record(responses_server, "refusal", fixture2)) as client:
        client.responses.create(model="gpt-5", input="forbidden")
    stored = json.loads(fixture2.read_text())["response"]
    assert stored["refusal"] == "I can't help with that." and stored["content"] is None


def test_record_a_tool_loop_sends_the_responses_wire(
    responses_server: ResponsesServer, tmp_path: Path
) -> None:
    fixture = tmp_path / "loop.jsonl"
    with sdk(_record(responses_server, "weather", fixture)) as client:
        one = client.responses.create(
            model="m",
            input="Weather?",
            tools=[WEATHER_TOOL],
            max_output_tokens=40,
        )
        call = one.output[0]
        assert call.type == "function_call"
        output = {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}
        two = client.responses.create(
            model="m",
            previous_response_id=one.id,
            input=[output],
            tools=[WEATHER_TOOL],
        )
    assert two.output_text == "Forecast: sunny"
    sent = responses_server.received[1].body
    assert sent["input"][1:] == [
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city":"Paris"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
    ]
    assert responses_server.received[0].body["max_output_tokens"] == 40
    assert responses_server.received[0].body["tools"] == [WEATHER_TOOL]
    assert "previous_response_id" not in sent


def test_a_live_answer_with_a_built_in_tool_item_fails_closed(
    responses_server: ResponsesServer, tmp_path: Path
) -> None:
    fixture = tmp_path / "b.jsonl"
    manifest = _record(responses_server, "builtin", fixture)
    with sdk(manifest) as client, pytest.raises(openai.APIStatusError) as caught:
        client.responses.create(model="m", input="search")
    assert caught.value.status_code == 502
    assert not fixture.exists() or fixture.read_text() == ""


def test_live_mapping_both_ways() -> None:
    request = {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "Let me look.", "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        ],
        "tools": [{"name": "get_weather", "parameters": {"type": "object"}}],
        "tool_choice": {"name": "get_weather"},
        "response_format": {"type": "json_schema", "json_schema": {"name": "A", "schema": {}}},
        "params": {"max_tokens": 5, "reasoning_effort": "low", "temperature": 0},
    }
    body = to_body(request, "gpt-5")
    # The live body reads back as the same neutral request.
    assert make_vendor("openai-responses").read_body(body).request == request
    with pytest.raises(RequestError, match="stop"):
        to_body({"messages": ASK, "params": {"stop": ["x"]}}, "m")
    answer = from_response(
        {
            "object": "response",
            "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"},
            "created_at": 5,
            "output": [{"type": "message", "content": [{"type": "output_text", "text": "Hel"}]}],
        }
    )
    assert answer["finish_reason"] == "length" and answer["content"] == "Hel"
    assert answer["created"] == 5


def test_structured_output_through_either_sdk_helper_meets_one_entry(tmp_path: Path) -> None:
    """``responses.parse(text_format=M)`` sends ``text.format``; ``chat.completions.parse(
    response_format=M)`` sends ``response_format``: one neutral request, one entry."""
    from pydantic import BaseModel

    class City(BaseModel):
        name: str
        country: str

    empty = write_fixture(tmp_path / "empty.jsonl")
    with sdk(empty) as client, pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.parse(model="m", messages=ASK, response_format=City)
    missed = caught.value.body["message"]  # type: ignore[index]
    digest = missed.rpartition("request_hash: ")[2].rstrip(")")
    assert digest.startswith("sha256:")
    answer = {"content": '{"name":"Porto","country":"Portugal"}'}
    fixture = write_fixture(tmp_path / "city.jsonl", (digest, answer))
    with sdk(fixture) as client:
        parsed = client.responses.parse(model="gpt-5", input="hi", text_format=City)
        chat = client.chat.completions.parse(model="m", messages=ASK, response_format=City)
    assert parsed.output_parsed == City(name="Porto", country="Portugal")
    assert chat.choices[0].message.parsed == parsed.output_parsed


def test_a_transport_for_openai_answers_both_shapes_and_one_for_responses_only_that(
    manifest: dict[str, Any],
) -> None:
    import httpx2

    from replay_actor import ProviderTransport, open_provider

    provider = open_provider(manifest)
    http = httpx2.Client(transport=ProviderTransport(provider, "openai-responses"))
    client: Any = openai.OpenAI(api_key="unused", http_client=http, max_retries=0)
    try:
        assert client.responses.create(**TEXT_BODY).output_text == "Hello!"
        with pytest.raises(openai.NotFoundError, match="/responses"):
            client.chat.completions.create(model="m", messages=ASK)
    finally:
        client.close()
    assert provider.closed
