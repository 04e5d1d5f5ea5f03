"""The live provider and the built-in ``openai`` adapter, against a real 127.0.0.1 server.

Every test talks HTTP to ``chat_server.ChatServer``; nothing is mocked. What the server
received is checked as the vendor would see it.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import sys
import textwrap
import traceback
from pathlib import Path
from typing import Any

import pytest

from replay_actor import LiveProviderError, ManifestError, ProviderClosed, RequestError
from replay_actor.adapters._aclients import Answer as _Answer
from replay_actor.adapters.base import ADAPTER_GROUP, Adapter, load_adapter_factory
from replay_actor.adapters.builtin import OpenAIAdapter
from replay_actor.adapters.live import LiveProvider
from replay_actor.manifest import open_provider
from tests.support.chat_server import ChatServer

SECRET_KEY = "sk-test-SECRET-5f2c9a71e0d4"
SECRET_PROMPT = "my confidential prompt about project NIGHTJAR"
KEY_VAR = "REPLAY_ACTOR_TEST_KEY"


@pytest.fixture
def key_env(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_VAR, SECRET_KEY)
    return KEY_VAR


def live_manifest(chat: ChatServer, scenario: str = "echo", **extra: Any) -> dict[str, Any]:
    provider: dict[str, Any] = {
        "kind": "live",
        "adapter": "openai",
        "model": "test-model",
        "base_url": chat.base_url(scenario),
        "retry_backoff": 0.0,
    }
    provider.update(extra)
    return {"provider": provider}


def hi(text: str = "hi") -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


# -- mapping -------------------------------------------------------------------------------


def test_request_is_mapped_to_a_chat_completions_body(chat: ChatServer, key_env: str) -> None:
    request = {
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "weather?", "name": "ann"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "name": "get_weather", "arguments": '{"city":"X"}'}],
            },
            {"role": "tool", "content": "sunny", "tool_call_id": "c1"},
            {"role": "user", "content": [{"type": "text", "text": "and tomorrow?"}]},
        ],
        "tools": [
            {
                "name": "get_weather",
                "description": "Weather for a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
            {"name": "now"},
        ],
        "tool_choice": {"name": "get_weather"},
        "response_format": {"type": "json_object"},
        "params": {"temperature": 0.0, "max_tokens": 50, "seed": 7, "stop": ["\n"]},
    }
    with open_provider(live_manifest(chat, api_key_env=key_env)) as llm:
        llm.complete(request)
    [got] = chat.received
    assert got.path == "/echo/v1/chat/completions"
    assert got.headers["authorization"] == f"Bearer {SECRET_KEY}"
    assert got.headers["content-type"] == "application/json"
    assert got.body == {
        "temperature": 0,
        "max_tokens": 50,
        "seed": 7,
        "stop": ["\n"],
        "model": "test-model",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "weather?", "name": "ann"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"X"}'},
                    }
                ],
            },
            {"role": "tool", "content": "sunny", "tool_call_id": "c1"},
            {"role": "user", "content": [{"type": "text", "text": "and tomorrow?"}]},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Weather for a city",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                },
            },
            {
                "type": "function",
                "function": {"name": "now", "parameters": {"type": "object", "properties": {}}},
            },
        ],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "response_format": {"type": "json_object"},
    }


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ("lookup", {"type": "function", "function": {"name": "lookup"}}),
        (
            {"type": "function", "function": {"name": "x"}},
            {"type": "function", "function": {"name": "x"}},
        ),
    ],
)
def test_tool_choice_forms(chat: ChatServer, choice: Any, sent: Any) -> None:
    with open_provider(live_manifest(chat)) as llm:
        llm.complete({**hi(), "tool_choice": choice})
    assert chat.received[0].body["tool_choice"] == sent


def test_no_authorization_header_without_api_key_env(chat: ChatServer) -> None:
    with open_provider(live_manifest(chat)) as llm:
        llm.complete(hi())
    assert "authorization" not in chat.received[0].headers


def test_extra_headers_are_sent(chat: ChatServer) -> None:
    with open_provider(live_manifest(chat, headers={"X-Team": "evals"})) as llm:
        llm.complete(hi())
    assert chat.received[0].headers["x-team"] == "evals"


def test_params_may_not_override_the_mapping(chat: ChatServer) -> None:
    with open_provider(live_manifest(chat)) as llm, pytest.raises(RequestError, match="model"):
        llm.complete({**hi(), "params": {"model": "other"}})
    assert chat.received == []


def test_invalid_request_is_rejected_before_the_network(chat: ChatServer) -> None:
    with open_provider(live_manifest(chat)) as llm, pytest.raises(RequestError):
        llm.complete({"messages": []})
    assert chat.received == []


# -- response normalisation ---------------------------------------------------------------


def test_content_response_is_normalised(chat: ChatServer) -> None:
    with open_provider(live_manifest(chat)) as llm:
        answer = llm.complete(hi("hello"))
    assert answer == {
        "content": "1: hello",
        "tool_calls": [],
        "finish_reason": "stop",
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }


def test_tool_call_response_is_normalised(chat: ChatServer) -> None:
    with open_provider(live_manifest(chat, "tools")) as llm:
        answer = llm.complete(hi("weather in Paris?"))
    assert answer["content"] is None
    assert answer["tool_calls"] == [
        {"id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'}
    ]
    assert answer["finish_reason"] == "tool_calls"


def test_acomplete_works_from_several_event_loops(chat: ChatServer) -> None:
    with open_provider(live_manifest(chat)) as llm:

        async def ask(text: str) -> dict[str, Any]:
            return await llm.acomplete(hi(text))

        first = asyncio.run(ask("a"))
        second = asyncio.run(ask("b"))

        async def both() -> list[dict[str, Any]]:
            return list(await asyncio.gather(ask("c"), ask("d")))

        third = asyncio.run(both())
    assert first["content"] == "1: a"
    assert second["content"] == "2: b"
    assert sorted(a["content"][3:] for a in third) == ["c", "d"]


# -- retries and failures -------------------------------------------------------------------


def test_429_then_success(chat: ChatServer) -> None:
    with open_provider(live_manifest(chat, "429x2", max_retries=2)) as llm:
        answer = llm.complete(hi())
    assert answer["content"] == "3: hi"
    assert chat.count("429x2") == 3


def test_429_past_the_retry_budget_fails(chat: ChatServer) -> None:
    with (
        open_provider(live_manifest(chat, "429x2", max_retries=1)) as llm,
        pytest.raises(LiveProviderError) as caught,
    ):
        llm.complete(hi())
    assert caught.value.status == 429
    assert chat.count("429x2") == 2


def test_500_storm_exhausts_the_retries(chat: ChatServer) -> None:
    with open_provider(live_manifest(chat, "500", max_retries=3)) as llm:
        with pytest.raises(LiveProviderError, match="HTTP 500") as caught:
            llm.complete(hi())
        snap = llm.snapshot()
    assert caught.value.status == 500
    assert chat.count("500") == 4
    assert snap["calls"] == 1
    assert snap["failures"] == 1


def test_async_500_storm_exhausts_the_retries(chat: ChatServer) -> None:
    with (
        open_provider(live_manifest(chat, "500", max_retries=2)) as llm,
        pytest.raises(LiveProviderError) as caught,
    ):
        asyncio.run(llm.acomplete(hi()))
    assert caught.value.status == 500
    assert chat.count("500") == 3


def test_4xx_is_not_retried(chat: ChatServer) -> None:
    with (
        open_provider(live_manifest(chat, "401", max_retries=3)) as llm,
        pytest.raises(LiveProviderError, match="invalid_api_key") as caught,
    ):
        llm.complete(hi())
    assert caught.value.status == 401
    assert chat.count("401") == 1


def test_slow_reply_past_the_timeout(chat: ChatServer) -> None:
    with (
        open_provider(live_manifest(chat, "slow", timeout=0.3, max_retries=1)) as llm,
        pytest.raises(LiveProviderError, match="timeout") as caught,
    ):
        llm.complete(hi())
    assert caught.value.status is None
    assert chat.count("slow") == 2


@pytest.mark.parametrize(("scenario", "match"), [("badjson", "JSON"), ("nochoices", "choices")])
def test_malformed_body(chat: ChatServer, scenario: str, match: str) -> None:
    with open_provider(live_manifest(chat, scenario)) as llm:
        with pytest.raises(LiveProviderError, match=match) as caught:
            llm.complete(hi())
        with pytest.raises(LiveProviderError, match=match):
            asyncio.run(llm.acomplete(hi()))
    assert caught.value.status == 200


def test_unreachable_endpoint(chat: ChatServer) -> None:
    port = chat.port
    chat.close()
    manifest = {
        "provider": {
            "kind": "live",
            "adapter": "openai",
            "model": "m",
            "base_url": f"http://127.0.0.1:{port}/v1",
            "max_retries": 1,
            "retry_backoff": 0.0,
        }
    }
    with (
        open_provider(manifest) as llm,
        pytest.raises(LiveProviderError, match="reached") as caught,
    ):
        llm.complete(hi())
    assert caught.value.status is None


def _everything_said(exc: BaseException) -> str:
    parts = [str(exc), repr(exc), repr(exc.args), repr(vars(exc))]
    parts.extend(traceback.format_exception(exc))
    seen: BaseException | None = exc
    while seen is not None:
        parts.append(repr(seen))
        seen = seen.__cause__ or seen.__context__
    return "\n".join(parts)


@pytest.mark.parametrize("scenario", ["500", "401", "badjson", "nochoices", "slow", "dropped"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_key_and_prompt_never_in_an_error(
    chat: ChatServer, key_env: str, scenario: str, mode: str
) -> None:
    manifest = live_manifest(chat, scenario, api_key_env=key_env, timeout=0.3, max_retries=1)
    with open_provider(manifest) as llm:

        def ask() -> object:
            if mode == "sync":
                return llm.complete(hi(SECRET_PROMPT))
            return asyncio.run(llm.acomplete(hi(SECRET_PROMPT)))

        with pytest.raises(LiveProviderError) as caught:
            ask()
        said = _everything_said(caught.value) + repr(llm) + repr(llm.snapshot())
    # The secrets did reach the server (so the test can fail)...
    assert chat.received[0].headers["authorization"] == f"Bearer {SECRET_KEY}"
    assert SECRET_PROMPT in str(chat.received[0].body)
    # ...and nothing the caller sees repeats them.
    assert SECRET_KEY not in said
    assert "NIGHTJAR" not in said
    assert caught.value.__context__ is None
    assert caught.value.__cause__ is None


# -- the provider ----------------------------------------------------------------------------


def test_snapshot_and_release(chat: ChatServer, key_env: str) -> None:
    llm = open_provider(live_manifest(chat, api_key_env=key_env))
    assert not llm.closed
    llm.complete(hi())
    asyncio.run(llm.acomplete(hi()))
    snap = llm.snapshot()
    assert snap == {
        "kind": "live",
        "adapter": "openai",
        "model": "test-model",
        "calls": 2,
        "failures": 0,
        "retries": 0,
    }
    llm.release()
    llm.release()
    assert llm.closed
    with pytest.raises(ProviderClosed):
        llm.complete(hi())
    with pytest.raises(ProviderClosed):
        asyncio.run(llm.acomplete(hi()))
    assert chat.count("echo") == 2


def test_threads_share_one_live_provider(chat: ChatServer) -> None:
    import threading

    results: list[str] = []
    lock = threading.Lock()
    with open_provider(live_manifest(chat)) as llm:

        def worker(i: int) -> None:
            answer = llm.complete(hi(f"t{i}"))
            with lock:
                results.append(answer["content"].split(": ")[1])

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert llm.snapshot()["calls"] == 8
    assert sorted(results) == sorted(f"t{i}" for i in range(8))


# -- the adapter registry -------------------------------------------------------------------


def test_openai_is_found_through_its_entry_point() -> None:
    names = [ep.name for ep in importlib.metadata.entry_points(group=ADAPTER_GROUP)]
    assert "openai" in names
    assert load_adapter_factory("openai") is OpenAIAdapter


def test_openai_falls_back_to_the_builtin_with_stale_metadata(
    monkeypatch: pytest.MonkeyPatch, chat: ChatServer
) -> None:
    def nothing(**_: Any) -> list[Any]:
        return []

    monkeypatch.setattr(importlib.metadata, "entry_points", nothing)
    assert load_adapter_factory("openai") is OpenAIAdapter
    with open_provider(live_manifest(chat)) as llm:
        assert llm.complete(hi())["content"] == "1: hi"


def test_unknown_adapter_names_the_key() -> None:
    with pytest.raises(ManifestError, match="unknown adapter") as caught:
        open_provider({"provider": {"kind": "live", "adapter": "nope", "model": "m"}})
    assert caught.value.key == "provider.adapter"


def test_third_party_adapter_registers_through_entry_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "echo_adapter_pkg.py").write_text(
        textwrap.dedent(
            """
            from replay_actor import ManifestError

            class EchoAdapter:
                def __init__(self, config):
                    unknown = set(config) - {"model", "prefix"}
                    if unknown:
                        key = sorted(unknown)[0]
                        raise ManifestError(f"{key} is not an echo key", key=key)
                    self.prefix = config.get("prefix", "")
                    self.closed = False

                def complete(self, request):
                    text = self.prefix + request["messages"][-1]["content"]
                    return {"content": text, "tool_calls": [],
                            "finish_reason": "stop", "usage": None}

                async def acomplete(self, request):
                    return self.complete(request)

                def close(self):
                    self.closed = True

                async def aclose(self):
                    self.closed = True
            """
        )
    )
    dist = tmp_path / "echo_adapter_pkg-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-adapter-pkg\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[replay_actor.adapters]\necho = echo_adapter_pkg:EchoAdapter\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    manifest = {"provider": {"kind": "live", "adapter": "echo", "model": "m", "prefix": "> "}}
    with open_provider(manifest) as llm:
        assert isinstance(llm, LiveProvider)
        assert isinstance(llm._adapter, Adapter)
        assert llm.complete(hi("x"))["content"] == "> x"
        assert asyncio.run(llm.acomplete(hi("y")))["content"] == "> y"
        assert llm.snapshot()["adapter"] == "echo"
        adapter: Any = llm._adapter
    assert adapter.closed
    # The adapter's own ManifestError is re-keyed to the full dotted path.
    bad = {"provider": {"kind": "live", "adapter": "echo", "model": "m", "colour": "red"}}
    with pytest.raises(ManifestError) as caught:
        open_provider(bad)
    assert caught.value.key == "provider.colour"
    assert str(caught.value).startswith("provider.colour ")
    sys.modules.pop("echo_adapter_pkg", None)


def test_broken_entry_point_is_a_manifest_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dist = tmp_path / "broken_adapter-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-adapter\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[replay_actor.adapters]\nbroken = no_such_module_xyz:Adapter\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ManifestError, match="could not be loaded") as caught:
        open_provider({"provider": {"kind": "live", "adapter": "broken", "model": "m"}})
    assert caught.value.key == "provider.adapter"


def test_missing_httpx2_is_a_clear_manifest_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "httpx2", None)
    with pytest.raises(ManifestError, match=r"replay-actor\[live\]") as caught:
        open_provider({"provider": {"kind": "live", "adapter": "openai", "model": "m"}})
    assert caught.value.key == "provider.adapter"


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "3"}, 3.0),
        ({"Retry-After": "3600"}, 5.0),  # capped at retry_max_wait
        ({"retry-after-ms": "250"}, 0.25),
        ({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),  # a date in the past
        ({"Retry-After": "Fri, 01 Jan 9999 00:00:00 GMT"}, 5.0),  # far future: capped
    ],
)
def test_retry_after_is_honoured_within_the_cap(headers: dict[str, str], expected: float) -> None:
    import httpx2

    adapter = OpenAIAdapter({"model": "m", "retry_max_wait": 5.0, "retry_backoff": 100.0})
    try:
        response = _Answer(429, httpx2.Headers(headers), b"")
        assert adapter._delay(0, response) == pytest.approx(expected)
        # Without the header: exponential backoff, jittered, under the same cap.
        assert adapter._delay(3, _Answer(503, httpx2.Headers(), b"")) == 5.0
    finally:
        adapter.close()


def test_backoff_doubles_and_is_jittered() -> None:
    adapter = OpenAIAdapter({"model": "m", "retry_backoff": 1.0, "retry_max_wait": 100.0})
    try:
        for attempt in range(4):
            delay = adapter._delay(attempt, None)
            assert 0.5 * 2**attempt <= delay <= 2**attempt
    finally:
        adapter.close()
