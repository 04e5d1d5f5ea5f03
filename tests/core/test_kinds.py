"""Request kinds: chat hashes unchanged, every kind hashed apart, the other kinds validated."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pytest

from replay_actor import (
    CompletionRequest,
    EmbeddingRequest,
    Request,
    RequestError,
    request_hash,
)
from replay_actor._request import canonical_request, normalise_request
from tests.support.paths import ROOT

#: Computed on main before kinds existed: a chat request's hash must never move.
PINNED = {
    "capital.json": "sha256:b6872e8cdddcb9181743747e9b56b0d94ead3d885b80aa7f555e7e1b4640c1e1",
    "greeting.json": "sha256:236cc1b87589f127402571a4d2fda7dc698d47a81cc7b293697fdcb91e7c878c",
    "next_step.json": "sha256:44b6f090a196dc05f8272e8492be84ef7784881895b2284e792dccfbbaa5a55c",
    "weather_tool.json": "sha256:a804c39318fdfb2af8ae4dc47f756795bc588c790b6a103ad5290a45269def68",
}
CHAT = {"messages": [{"role": "user", "content": "hi"}], "params": {"temperature": 0}}


@pytest.mark.parametrize("name", sorted(PINNED))
def test_chat_hashes_are_unchanged(name: str) -> None:
    request = json.loads((ROOT / "examples" / "request-files" / name).read_text())
    assert request_hash(request) == PINNED[name]
    assert request_hash({**request, "kind": None}) == PINNED[name]


def test_count_tokens_leads_the_canonical_bytes_and_hashes_apart() -> None:
    counted = {**CHAT, "kind": "count_tokens"}
    assert canonical_request(counted) == (
        b'{"kind":"count_tokens","messages":[{"content":"hi","role":"user"}],'
        b'"params":{"temperature":0}}'
    )
    assert request_hash(counted) != request_hash(CHAT)
    assert request_hash(Request(**{**CHAT, "kind": "count_tokens"})) == request_hash(counted)  # type: ignore[arg-type]
    assert normalise_request(counted) == msgspec_request(counted)


def msgspec_request(plain: Mapping[str, object]) -> Request:
    import msgspec

    return msgspec.convert(plain, Request)


def test_every_kind_hashes_apart_from_every_other() -> None:
    hashes = {
        request_hash({"messages": [{"role": "user", "content": "hi"}]}),
        request_hash({"messages": [{"role": "user", "content": "hi"}], "kind": "count_tokens"}),
        request_hash({"kind": "completion", "prompt": "hi"}),
        request_hash({"kind": "embedding", "model": "m", "texts": ["hi"]}),
        request_hash({"kind": "mcp", "method": "hi"}),
    }
    assert len(hashes) == 5


def test_an_embedding_hashes_its_model_and_dimensions() -> None:
    base = {"kind": "embedding", "model": "a", "texts": ["x", "y"]}
    assert request_hash(base) != request_hash({**base, "model": "b"})
    assert request_hash(base) != request_hash({**base, "dimensions": 8})
    assert request_hash(base) != request_hash({**base, "texts": ["y", "x"]})
    assert canonical_request(base) == b'{"kind":"embedding","model":"a","texts":["x","y"]}'
    struct = EmbeddingRequest(model="a", texts=["x", "y"])
    assert request_hash(struct) == request_hash(base)
    assert normalise_request(base) == struct
    # An empty scope pairs nothing apart, as for chat.
    assert request_hash({**base, "scope": {}}) == request_hash(base)
    assert request_hash({**base, "scope": {"epoch": 1}}) != request_hash(base)


def test_a_completion_is_its_own_kind() -> None:
    plain = {"kind": "completion", "prompt": "Once", "params": {"max_tokens": 5}}
    assert canonical_request(plain) == (
        b'{"kind":"completion","params":{"max_tokens":5},"prompt":"Once"}'
    )
    assert normalise_request(plain) == CompletionRequest(prompt="Once", params={"max_tokens": 5})


@pytest.mark.parametrize(
    ("bad", "where"),
    [
        ({"kind": "embedding", "model": "", "texts": ["a"]}, "$.model"),
        ({"kind": "embedding", "texts": ["a"]}, "model"),
        ({"kind": "embedding", "model": "m", "texts": []}, "$.texts"),
        ({"kind": "embedding", "model": "m", "texts": [1]}, "$.texts[0]"),
        ({"kind": "embedding", "model": "m", "texts": ["a"], "dimensions": 0}, "$.dimensions"),
        ({"kind": "embedding", "model": "m", "texts": ["a"], "messages": []}, "messages"),
        ({"kind": "completion", "prompt": 3}, "$.prompt"),
        ({"kind": "completion", "prompt": "x", "params": {"t": float("nan")}}, "$.params.t"),
        ({**CHAT, "kind": "other"}, "$.kind"),
        ({**CHAT, "kind": 3}, "$.kind"),
    ],
)
def test_a_bad_request_of_any_kind_is_a_request_error(bad: dict[str, object], where: str) -> None:
    with pytest.raises(RequestError, match=r"kind|model|texts|dimensions|messages|prompt|params"):
        request_hash(bad)
    with pytest.raises(RequestError) as caught:
        normalise_request(bad)
    assert where in str(caught.value)
