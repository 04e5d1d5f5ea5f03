"""The Cohere family (docs/cohere.md): the real ``cohere`` SDK records a tool conversation
through the ``cohere`` live adapter from a loopback server speaking Cohere's v2 chat,
then replays it in process (sync, async, streamed) and, unchanged, under
``replay-actor run``; one conversation hashes alike through Cohere's and OpenAI's
shapes; misses and refusals are the SDK's own errors; ``run`` points the SDK at the
front door.

The family is one folder (``replay_actor/vendors/cohere/``) and one line in
``vendors._FAMILY_FOLDERS``: everything tested here comes from the record it declares.
"""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from replay_actor import open_provider, request_hash
from replay_actor.frontdoor.environment import child_environment, foreign_key_warning
from replay_actor.integrations.httpx_transport import (
    AsyncHttpxProviderTransport,
    HttpxProviderTransport,
)
from replay_actor.serving import Exchange
from replay_actor.serving._routes import looks_like
from replay_actor.vendors import make_vendor
from replay_actor.vendors.cohere import chat as vendor_cohere
from replay_actor.vendors.openai import chat as vendor_openai
from tests.support.chat_server import JSONHandler, LoopbackServer
from tests.support.frontdoor_util import (
    quiet_env,
    record_manifest,
    replay_manifest,
    run_cli,
    serving,
    summary,
)

cohere = pytest.importorskip("cohere")
httpx = pytest.importorskip("httpx")

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(180)]

KEY_VAR = "REPLAY_ACTOR_TEST_COHERE_KEY"
SECRET = "co-test-SECRET-5b1f-0123456789"
MODEL = "command-a-03-2025"
PLAN = "I will look up the weather in Paris."
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
QUESTION = [
    {"role": "system", "content": "You answer in one sentence."},
    {"role": "user", "content": "What is the weather in Paris?"},
]


class _Handler(JSONHandler):
    """Cohere's v2 chat: a tool call (with its plan) for a question, the forecast once
    the last message is the tool's result; 401 without the key."""

    def do_POST(self) -> None:
        got, _ = self._receive()
        if got.headers.get("authorization") != f"Bearer {SECRET}":
            self._send(401, json.dumps({"message": "invalid api token"}).encode())
            return
        messages = got.body["messages"]
        usage = {"input_tokens": 20, "output_tokens": 5}
        if messages[-1]["role"] == "tool":
            message: dict[str, Any] = {
                "role": "assistant",
                "content": [{"type": "text", "text": "It is sunny in Paris."}],
            }
            finish = "COMPLETE"
        else:
            call = {
                "id": "get_weather_k4x9",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
            message = {"role": "assistant", "tool_plan": PLAN, "tool_calls": [call]}
            finish = "TOOL_CALL"
        answer = {
            "id": f"live-{len(messages)}",
            "finish_reason": finish,
            "message": message,
            "usage": {"billed_units": usage, "tokens": usage},
        }
        self._send(200, json.dumps(answer).encode())


class CohereServer(LoopbackServer):
    handler = _Handler
    name = "cohere-server"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
def server() -> Iterator[CohereServer]:
    with CohereServer() as running:
        yield running


@contextmanager
def _client(manifest: Any) -> Iterator[Any]:
    """A ``cohere.ClientV2`` on the httpx transport over the manifest's provider; closing
    its HTTP client releases the provider."""
    http = httpx.Client(transport=HttpxProviderTransport(open_provider(manifest), "cohere"))
    try:
        yield cohere.ClientV2(
            api_key="unused",
            base_url="http://cohere.replay-actor.invalid",
            httpx_client=http,
            max_retries=0,
        )
    finally:
        http.close()


def _converse(client: Any) -> tuple[Any, Any]:
    """The tool conversation: the question, the model's tool call, the tool's result."""
    messages: list[Any] = list(QUESTION)
    first = client.chat(model=MODEL, messages=messages, tools=TOOLS, temperature=0.3)
    messages.append(first.message)
    for call in first.message.tool_calls or []:
        result = [{"type": "text", "text": json.dumps({"forecast": "sunny"})}]
        messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    second = client.chat(model=MODEL, messages=messages, tools=TOOLS, temperature=0.3)
    return first, second


def _record(tmp_path: Path, server: CohereServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(KEY_VAR, SECRET)
    fixture = tmp_path / "cohere.jsonl"
    live = {
        "adapter": "cohere",
        "model": MODEL,
        "base_url": server.base_url,
        "api_key_env": KEY_VAR,
        "retry_backoff": 0.0,
    }
    record = {"provider": {"kind": "record", "fixture": str(fixture), "live": live}}
    with _client(record) as client:
        first, second = _converse(client)
    assert first.finish_reason == "TOOL_CALL"
    assert second.message.content[0].text == "It is sunny in Paris."
    return fixture


def test_a_tool_conversation_is_recorded_live_and_replayed_in_process(
    tmp_path: Path, server: CohereServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    fixture = _record(tmp_path, server, monkeypatch)
    asked = [got.body for got in server.received]
    assert len(asked) == 2 and len(fixture.read_text("utf-8").splitlines()) == 2
    # The adapter's body is Cohere's: the model, the tools, the parameters, and the
    # model's plan sent back beside its tool call (carried, not hashed).
    assert asked[0]["model"] == MODEL and asked[0]["temperature"] == 0.3
    assert asked[0]["tools"] == TOOLS
    assert asked[1]["messages"][2]["tool_plan"] == PLAN
    assert asked[1]["messages"][2]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert asked[1]["messages"][3]["role"] == "tool"
    replay = {"provider": {"kind": "replay", "fixture": str(fixture)}}
    with _client(replay) as client:
        first, second = _converse(client)
    assert len(server.received) == 2  # replay never reached the server
    assert first.message.tool_plan == PLAN
    assert first.message.tool_calls[0].function.arguments == '{"city":"Paris"}'
    assert first.usage.tokens.input_tokens == 20
    assert second.finish_reason == "COMPLETE"
    assert second.message.content[0].text == "It is sunny in Paris."


def test_the_async_client_and_the_stream_replay_the_same_answers(
    tmp_path: Path, server: CohereServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    fixture = _record(tmp_path, server, monkeypatch)
    replay = {"provider": {"kind": "replay", "fixture": str(fixture)}}

    async def ask() -> Any:
        transport = AsyncHttpxProviderTransport(open_provider(replay), "cohere")
        async with httpx.AsyncClient(transport=transport) as http:
            client = cohere.AsyncClientV2(
                api_key="unused",
                base_url="http://cohere.replay-actor.invalid",
                httpx_client=http,
                max_retries=0,
            )
            return await client.chat(model=MODEL, messages=QUESTION, tools=TOOLS, temperature=0.3)

    answer = asyncio.run(ask())
    assert answer.message.tool_calls[0].function.name == "get_weather"
    with _client(replay) as client:
        events = list(
            client.chat_stream(model=MODEL, messages=QUESTION, tools=TOOLS, temperature=0.3)
        )
    kinds = [event.type for event in events]
    assert kinds[0] == "message-start" and kinds[-1] == "message-end"
    plan = "".join(e.delta.message.tool_plan for e in events if e.type == "tool-plan-delta")
    started = [e.delta.message.tool_calls for e in events if e.type == "tool-call-start"]
    arguments = "".join(
        e.delta.message.tool_calls.function.arguments for e in events if e.type == "tool-call-delta"
    )
    assert plan == answer.message.tool_plan
    assert [(c.id, c.function.name) for c in started] == [
        (c.id, c.function.name) for c in answer.message.tool_calls
    ]
    assert arguments == answer.message.tool_calls[0].function.arguments
    assert events[-1].delta.finish_reason == "TOOL_CALL"
    assert len(server.received) == 2


APP = f"""
    import json
    import cohere

    client = cohere.ClientV2()  # CO_API_URL and CO_API_KEY from the environment
    messages = {QUESTION!r}
    tools = {TOOLS!r}
    first = client.chat(model={MODEL!r}, messages=messages, tools=tools, temperature=0.3)
    messages.append(first.message)
    for call in first.message.tool_calls:
        result = [{{"type": "text", "text": json.dumps({{"forecast": "sunny"}})}}]
        messages.append({{"role": "tool", "tool_call_id": call.id, "content": result}})
    second = client.chat(model={MODEL!r}, messages=messages, tools=tools, temperature=0.3)
    print(second.message.content[0].text)
"""


def test_an_unchanged_cohere_app_records_and_replays_under_run(
    tmp_path: Path, server: CohereServer
) -> None:
    app = [sys.executable, "-c", textwrap.dedent(APP)]
    # The real key is read by run's live adapter, never by the child: the child's
    # CO_API_KEY is the run's token.
    env = quiet_env(**{KEY_VAR: SECRET, "CO_API_KEY": SECRET})
    record = record_manifest(
        tmp_path, server.base_url, adapter="cohere", model=MODEL, api_key_env=KEY_VAR
    )
    recorded = run_cli(record, app, env=env, flags=("--seal", "namespace"))
    assert recorded.returncode == 0, recorded.stderr
    assert recorded.stdout.strip() == "It is sunny in Paris."
    assert summary(recorded.stderr).endswith("(2 recorded); sealed (namespace)")
    assert len(server.received) == 2
    replayed = run_cli(replay_manifest(tmp_path, tmp_path / "recorded.jsonl"), app, env=env)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.stdout
    assert summary(replayed.stderr).startswith("replay-actor: 2 served, 0 missed,")
    assert len(server.received) == 2  # the replay asked the vendor nothing


def test_serve_names_the_cohere_base_url_and_a_miss_is_the_sdks_not_found(
    tmp_path: Path,
) -> None:
    fixture = tmp_path / "empty.jsonl"
    fixture.write_text("", encoding="utf-8")
    with serving(replay_manifest(tmp_path, fixture)) as (_, info):
        assert info["cohere_base_url"] == info["url"]
        assert list(info) == [
            "url",
            "openai_base_url",
            "anthropic_base_url",
            "gemini_base_url",
            "cohere_base_url",
            "token",
        ]
        client = cohere.ClientV2(
            api_key=info["token"], base_url=info["cohere_base_url"], max_retries=0
        )
        with pytest.raises(cohere.NotFoundError) as missed:
            client.chat(model=MODEL, messages=QUESTION)
        with pytest.raises(cohere.BadRequestError) as refused:
            client.chat(model=MODEL, messages=QUESTION, logprobs=True)
        with pytest.raises(cohere.NotFoundError) as unserved:
            client.embed(model="embed-v4.0", texts=["hi"], input_type="search_query")
    expected = request_hash(vendor_cohere.read_body({"model": MODEL, "messages": QUESTION}).request)
    assert missed.value.body["type"] == "replay_miss"
    assert missed.value.body["message"].startswith(
        f"no replay fixture matches this request (request_hash: {expected})"
    )
    assert missed.value.headers["x-should-retry"] == "false"
    assert refused.value.body == {
        "message": "logprobs cannot be replayed or recorded",
        "type": "invalid_request",
    }
    # A Cohere path nobody serves: a 404 in Cohere's envelope, listing what is served.
    assert unserved.value.body["type"] == "not_found"
    assert "POST /v2/chat" in unserved.value.body["message"]


def test_one_conversation_hashes_alike_through_cohere_and_openai() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
    cohere_body = {
        "model": MODEL,
        "messages": [
            *QUESTION,
            {"role": "assistant", "tool_plan": PLAN, "tool_calls": [call], "citations": None},
            {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "sun"}]},
        ],
        "tools": TOOLS,
        "tool_choice": "REQUIRED",
        "temperature": 0.3,
        "max_tokens": 50,
        "stop_sequences": ["END"],
        "p": 0.9,
        "stream": True,
        "priority": 1,
    }
    openai_body = {
        "model": "gpt-4.1-mini",
        "messages": [
            *QUESTION,
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "sun"},
        ],
        "tools": TOOLS,
        "tool_choice": "required",
        "temperature": 0.3,
        "max_tokens": 50,
        "stop": "END",
        "top_p": 0.9,
    }
    from_cohere = vendor_cohere.read_body(cohere_body).request
    assert request_hash(from_cohere) == request_hash(vendor_openai.read_body(openai_body).request)
    # The plan sent back is the model's own output: carried, not hashed.
    assert from_cohere["messages"][2]["reasoning"] == {
        "vendor": "cohere",
        "items": [{"type": "tool_plan", "tool_plan": PLAN}],
    }
    # A different conversation is a different hash.
    cohere_body["p"] = 0.8
    assert request_hash(vendor_cohere.read_body(cohere_body).request) != request_hash(from_cohere)


def test_the_live_body_and_answer_round_trip() -> None:
    request = vendor_cohere.read_body(
        {"model": MODEL, "messages": QUESTION, "tools": TOOLS, "k": 5, "stop_sequences": ["."]}
    ).request
    body = vendor_cohere.to_body(request, MODEL)
    assert body == {
        "k": 5,
        "stop_sequences": ["."],
        "model": MODEL,
        "messages": [dict(m) for m in QUESTION],
        "tools": TOOLS,
    }
    with pytest.raises(Exception, match="no Cohere equivalent"):
        vendor_cohere.to_body({**request, "tool_choice": {"name": "get_weather"}}, MODEL)
    with pytest.raises(Exception, match="no message"):
        vendor_cohere.from_response({"id": "x"})


def test_runs_environment_points_the_cohere_sdk_at_the_front_door() -> None:
    info = {"url": "http://127.0.0.1:9", "token": "tok"}
    env = child_environment({"CO_API_KEY": SECRET, "COHERE_API_KEY": SECRET}, info, ())
    assert env["CO_API_URL"] == "http://127.0.0.1:9"
    assert env["CO_API_KEY"] == env["COHERE_API_KEY"] == "tok"
    assert SECRET not in json.dumps(env)
    # Its key is redirected now: no longer named as a foreign key.
    assert foreign_key_warning({"CO_API_KEY": SECRET}) is None


def test_cohere_paths_look_like_cohere_and_its_shape_is_served_by_the_front_door() -> None:
    assert looks_like("/v2/rerank") == "cohere"
    assert looks_like("/v2/chat", ("anthropic-version",)) == "cohere"
    assert Exchange(None).serves_post("/v2/chat")
    assert Exchange("cohere").serves_post("/v2/chat")
    assert not Exchange("openai").serves_post("/v2/chat")
    assert make_vendor("cohere").live.base_url == "https://api.cohere.com"
