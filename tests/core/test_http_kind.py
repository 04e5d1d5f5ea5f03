"""The ``http`` kind (docs/tools.md, "What is hashed"): a tool's exchange hashed apart from
every other kind, its JSON body canonical, its credentials never part of it, and the
neutral http response read and written."""

from __future__ import annotations

import base64
from typing import Any

import msgspec
import pytest

from replay_actor import HttpRequest, RequestError, request_hash
from replay_actor._http_kind import (
    http_response,
    is_credential_header,
    is_credential_parameter,
    read_http_response,
)
from replay_actor._request import canonical_request, normalise_request
from replay_actor._response import Unexpressible

SEARCH: dict[str, Any] = {
    "kind": "http",
    "method": "POST",
    "scheme": "https",
    "host": "api.search.example",
    "port": 443,
    "path": "/v1/search",
    "query": [["lang", "en"]],
    "headers": {"content-type": "application/json"},
    "json": {"query": "weather in Paris", "limit": 3},
}


def test_an_http_request_hashes_apart_from_every_other_kind() -> None:
    chat = {"messages": [{"role": "user", "content": "weather in Paris"}]}
    completion = {"kind": "completion", "prompt": "weather in Paris"}
    hashes = {request_hash(SEARCH), request_hash(chat), request_hash(completion)}
    assert len(hashes) == 3
    assert b'"kind":"http"' in canonical_request(SEARCH)


def test_the_json_body_is_canonical_and_the_struct_hashes_as_the_mapping() -> None:
    reordered = {**SEARCH, "json": {"limit": 3.0, "query": "weather in Paris"}}
    assert request_hash(reordered) == request_hash(SEARCH)
    struct = HttpRequest(
        method="POST",
        scheme="https",
        host="api.search.example",
        port=443,
        path="/v1/search",
        query=[("lang", "en")],
        headers={"content-type": "application/json"},
        json={"query": "weather in Paris", "limit": 3},
    )
    assert request_hash(struct) == request_hash(SEARCH)
    normalised = normalise_request(SEARCH)
    assert isinstance(normalised, HttpRequest)
    assert request_hash(normalised) == request_hash(SEARCH)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("method", "PUT"),
        ("scheme", "http"),
        ("host", "api.other.example"),
        ("port", 8443),
        ("path", "/v2/search"),
        ("query", [["lang", "fr"]]),
        ("headers", {"content-type": "application/json", "accept": "text/html"}),
        ("json", {"query": "weather in Rome", "limit": 3}),
    ],
)
def test_every_part_of_the_exchange_is_hashed(field: str, value: Any) -> None:
    assert request_hash({**SEARCH, field: value}) != request_hash(SEARCH)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"headers": {"authorization": "Bearer planted-secret"}}, "authorization"),
        ({"headers": {"x-api-key": "planted-secret"}}, "x-api-key"),
        ({"headers": {"x-subscription-token": "planted-secret"}}, "x-subscription-token"),
        ({"headers": {"cookie": "session=planted-secret"}}, "cookie"),
        ({"query": [["api_key", "planted-secret"]]}, "api_key"),
        ({"query": [["Access-Token", "planted-secret"]]}, "Access-Token"),
        ({"json": {"query": "q", "client_secret": "planted-secret"}}, "client_secret"),
    ],
)
def test_a_credential_is_never_part_of_a_request(change: dict[str, Any], named: str) -> None:
    with pytest.raises(RequestError) as caught:
        request_hash({**SEARCH, **change})
    message = str(caught.value)
    assert named in message and "credential" in message
    assert "planted-secret" not in message and "planted-secret" not in repr(caught.value)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"text": "also text"}, "at most one of json, text and base64"),
        ({"json": msgspec.UNSET, "base64": "not base64!"}, "base64 is not valid base64"),
        ({"host": "API.search.example"}, "host must be in lower case"),
        ({"headers": {"Content-Type": "application/json"}}, "lower case"),
        ({"path": "v1/search"}, "$.path"),
        ({"port": 0}, "$.port"),
        ({"method": "get"}, "$.method"),
        ({"scheme": "ftp"}, "$.scheme"),
        ({"fragment": "x"}, "fragment"),
    ],
)
def test_an_invalid_http_request_is_refused_naming_the_problem(
    change: dict[str, Any], problem: str
) -> None:
    request = {k: v for k, v in {**SEARCH, **change}.items() if v is not msgspec.UNSET}
    with pytest.raises(RequestError, match=problem.replace("$", r"\$")):
        request_hash(request)


def test_the_credential_names() -> None:
    for name in ("Authorization", "proxy-authorization", "Cookie", "set-cookie", "X-Api-Key"):
        assert is_credential_header(name)
    for name in ("x-goog-api-key", "x-subscription-token", "apikey"):
        assert is_credential_header(name)
    for name in ("content-type", "accept", "mcp-session-id", "x-request-id", "tokens"):
        assert not is_credential_header(name)
    for name in ("key", "api_key", "API-KEY", "access_token", "client_secret", "password"):
        assert is_credential_parameter(name)
    for name in ("q", "query", "page_token_count", "max_tokens", "keyword", "next_page_token"):
        assert not is_credential_parameter(name)


def test_a_live_answer_is_kept_byte_for_byte() -> None:
    # JSON answers are kept as their text: a replay gives the same bytes, keys unsorted.
    body = b'{"z": 1, "a": [2, 1]}'
    stored = http_response(200, [("content-type", "application/json")], body)
    assert stored == {
        "status": 200,
        "headers": [["content-type", "application/json"]],
        "text": body.decode(),
    }
    answer = read_http_response(msgspec.json.decode(msgspec.json.encode(stored)))
    assert answer.body == body and answer.status == 200 and not answer.open
    binary = bytes(range(256))
    stored = http_response(200, [], binary, open=True)
    assert stored["base64"] == base64.b64encode(binary).decode() and stored["open"] is True
    assert read_http_response(stored).body == binary and read_http_response(stored).open


def test_a_hand_written_response_reads_too() -> None:
    # A JSON body written as JSON, and a text answer from `add --content`.
    answer = read_http_response({"status": 201, "json": {"ok": True}})
    assert answer.status == 201 and answer.body == b'{"ok":true}'
    assert ("content-type", "application/json") in answer.headers
    answer = read_http_response({"content": "Rome: rainy"})
    assert answer.status == 200 and answer.body == b"Rome: rainy"
    assert ("content-type", "text/plain; charset=utf-8") in answer.headers
    answer = read_http_response({"status": 204, "headers": {"X-Edition": "2"}})
    assert answer.headers == [("x-edition", "2")] and answer.body == b""


@pytest.mark.parametrize(
    "stored",
    [
        {"status": "200"},
        {"status": 700},
        {"status": 101},
        {"text": "a", "base64": "YQ=="},
        {"base64": "not base64!"},
        {"headers": [["only-a-name"]]},
    ],
)
def test_a_stored_response_that_cannot_be_said_is_refused(stored: dict[str, Any]) -> None:
    with pytest.raises(Unexpressible) as caught:
        read_http_response({**stored, "secret": "planted-secret"})
    assert "planted-secret" not in str(caught.value)
