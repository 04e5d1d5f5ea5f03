"""The neutral response's refusal and reasoning through the real SDKs (docs/sdk.md,
"Refusals and reasoning"), and the one typed reading of a response (docs/request.md,
"The neutral response")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from replay_actor import RequestError, anthropic_client, entry_line, openai_client, request_hash
from replay_actor._response import Response, Unexpressible, read_response
from replay_actor.vendors import make_vendor, vendor_names
from replay_actor.vendors.anthropic import messages as vendor_anthropic
from replay_actor.vendors.openai import chat as vendor_openai

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(60)]

REFUSED = {"content": None, "refusal": "I can't help with that.", "finish_reason": "stop"}
THINKING = [
    {"type": "thinking", "thinking": "The user greets me.", "signature": "c2lnbmF0dXJl"},
    {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"},
]
THOUGHTFUL = {
    "content": "Hello!",
    "finish_reason": "stop",
    "reasoning": {"vendor": "anthropic", "items": THINKING},
}
ASK = [{"role": "user", "content": "hello"}]
ASK_REFUSED = [{"role": "user", "content": "something forbidden"}]


def _openai_hash(messages: list[Any], **extra: Any) -> str:
    return request_hash(
        vendor_openai.read_body({"model": "m", "messages": messages, **extra}).request
    )


def _anthropic_hash(messages: list[Any], **extra: Any) -> str:
    body = {"model": "c", "max_tokens": 64, "messages": messages, **extra}
    return request_hash(vendor_anthropic.read_body(body).request)


@pytest.fixture
def fixture_path(tmp_path: Path) -> Path:
    path = tmp_path / "shapes.jsonl"
    lines = [
        entry_line(_openai_hash(ASK_REFUSED), response=REFUSED),
        entry_line(_openai_hash(ASK), response=THOUGHTFUL),
        entry_line(_anthropic_hash(ASK_REFUSED), response=REFUSED),
        entry_line(_anthropic_hash(ASK), response=THOUGHTFUL),
    ]
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def test_a_refusal_replays_as_a_refusal_through_openai(fixture_path: Path) -> None:
    with openai_client({"provider": {"kind": "replay", "fixture": str(fixture_path)}}) as client:
        plain = client.chat.completions.create(model="m", messages=ASK_REFUSED)  # type: ignore[arg-type]
        with client.chat.completions.stream(model="m", messages=ASK_REFUSED) as stream:  # type: ignore[arg-type]
            streamed = stream.get_final_completion()
    for completion in (plain, streamed):
        message = completion.choices[0].message
        assert message.refusal == REFUSED["refusal"]
        assert message.content is None
    assert plain.id == streamed.id


def test_a_refusal_replays_as_a_refusal_through_anthropic(fixture_path: Path) -> None:
    manifest = {"provider": {"kind": "replay", "fixture": str(fixture_path)}}
    with anthropic_client(manifest) as client:
        plain = client.messages.create(model="c", max_tokens=64, messages=ASK_REFUSED)  # type: ignore[arg-type]
        with client.messages.stream(model="c", max_tokens=64, messages=ASK_REFUSED) as stream:  # type: ignore[arg-type]
            streamed = stream.get_final_message()
    for message in (plain, streamed):
        assert message.stop_reason == "refusal"
        assert [b.type for b in message.content] == ["text"]
        assert message.content[0].text == REFUSED["refusal"]  # type: ignore[union-attr]


def test_reasoning_goes_back_to_its_vendor_only(fixture_path: Path) -> None:
    manifest = {"provider": {"kind": "replay", "fixture": str(fixture_path)}}
    with anthropic_client(manifest) as client:
        plain = client.messages.create(model="c", max_tokens=64, messages=ASK)  # type: ignore[arg-type]
        with client.messages.stream(model="c", max_tokens=64, messages=ASK) as stream:  # type: ignore[arg-type]
            streamed = stream.get_final_message()
    for message in (plain, streamed):
        blocks = [b.model_dump(exclude_none=True) for b in message.content]
        assert blocks[:2] == THINKING  # verbatim, signatures included
        assert blocks[2] == {"type": "text", "text": "Hello!"}
    assert plain.model_dump() == streamed.model_dump()
    with openai_client(manifest) as oai:
        answer = oai.chat.completions.create(model="m", messages=ASK)  # type: ignore[arg-type]
    # Another vendor's reasoning items mean nothing to OpenAI chat completions.
    assert answer.choices[0].message.content == "Hello!"
    assert "thinking" not in answer.model_dump_json()


def test_a_refusal_sent_back_hashes_as_what_the_model_said() -> None:
    turn = [*ASK_REFUSED, {"role": "assistant", "content": None, "refusal": "No."}]
    said = [*ASK_REFUSED, {"role": "assistant", "content": "No."}]
    assert _openai_hash(turn) == _openai_hash(said)
    both = [*ASK_REFUSED, {"role": "assistant", "content": "x", "refusal": "No."}]
    with pytest.raises(RequestError, match="refusal"):
        _openai_hash(both)


def test_read_response_tolerates_missing_keys_and_names_wrong_types() -> None:
    assert read_response({}) == Response()
    assert read_response({"content": "x", "extra": 1, "tool_calls": [{"name": "f"}]}) == Response(
        content="x", tool_calls=[vendor_call("f")]
    )
    secret = "PLANTED-SECRET-7f3a"
    with pytest.raises(Unexpressible) as info:
        read_response({"content": 3, "usage": {"note": secret}})
    assert "content" in str(info.value)
    assert secret not in str(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__


def vendor_call(name: str) -> Any:
    from replay_actor._response import ResponseCall

    return ResponseCall(name=name)


def test_the_registry_makes_every_vendor_on_one_contract() -> None:
    assert vendor_names()[:2] == ("openai", "anthropic")
    for name in vendor_names():
        vendor = make_vendor(name)
        assert vendor.name == name
        assert vendor.routes
        error = vendor.error_body("replay_miss", "no replay fixture matches", None)
        assert "no replay fixture matches" in str(error)
    with pytest.raises(ValueError, match="'openai'"):
        make_vendor("nope")
