"""The neutral mcp request: what of a JSON-RPC request is hashed (docs/mcp.md, "What is
hashed"), and the fixture's answers as JSON-RPC answers."""

from __future__ import annotations

from typing import Any

import pytest
from mcp_types import JSONRPCError, JSONRPCResponse

from replay_actor import McpRequest, RequestError, request_hash
from replay_actor._request import canonical_request, normalise_request
from replay_actor.mcp.request import (
    PROTOCOL_VERSION_META,
    answer_of,
    neutral_request,
    stored_answer,
)

CALL = {"name": "forecast", "arguments": {"city": "Paris"}}


def test_the_neutral_request_holds_method_and_params_never_the_id() -> None:
    made = neutral_request("tools/call", CALL)
    assert made == {"kind": "mcp", "method": "tools/call", "params": CALL}
    assert canonical_request(made) == (
        b'{"kind":"mcp","method":"tools/call",'
        b'"params":{"arguments":{"city":"Paris"},"name":"forecast"}}'
    )
    assert normalise_request(made) == McpRequest(method="tools/call", params=CALL)
    assert request_hash(McpRequest(method="tools/call", params=CALL)) == request_hash(made)
    assert neutral_request("tools/list", None) == {"kind": "mcp", "method": "tools/list"}


def test_meta_is_left_out_but_for_the_protocol_version() -> None:
    plain = request_hash(neutral_request("tools/call", CALL))
    progress = {**CALL, "_meta": {"progressToken": 17, "com.example/trace": "abc"}}
    assert request_hash(neutral_request("tools/call", progress)) == plain
    # The stateless protocol's envelope: every request names the client and its
    # capabilities, and the version that decides the answer's shape.
    envelope = {
        PROTOCOL_VERSION_META: "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "mcp", "version": "0.1.0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    stateless = neutral_request("tools/call", {**CALL, "_meta": envelope})
    assert stateless["params"]["_meta"] == {PROTOCOL_VERSION_META: "2026-07-28"}
    other_client = {
        **envelope,
        "io.modelcontextprotocol/clientInfo": {"name": "agents", "version": "9"},
        "io.modelcontextprotocol/clientCapabilities": {"sampling": {}},
        "io.modelcontextprotocol/logLevel": "debug",
    }
    assert request_hash(neutral_request("tools/call", {**CALL, "_meta": other_client})) == (
        request_hash(stateless)
    )
    later = {**envelope, PROTOCOL_VERSION_META: "2027-01-01"}
    assert request_hash(neutral_request("tools/call", {**CALL, "_meta": later})) != (
        request_hash(stateless)
    )
    assert request_hash(stateless) != plain


def test_initialize_hashes_the_protocol_version_not_the_client() -> None:
    def initialize(version: str, name: str, capabilities: dict[str, Any]) -> str:
        params = {
            "protocolVersion": version,
            "clientInfo": {"name": name, "version": "1"},
            "capabilities": capabilities,
        }
        return request_hash(neutral_request("initialize", params))

    first = initialize("2025-11-25", "mcp", {})
    assert initialize("2025-11-25", "openai-agents", {"sampling": {}, "roots": {}}) == first
    assert initialize("2025-06-18", "mcp", {}) != first


def test_the_server_name_and_the_kind_hash_apart() -> None:
    plain = neutral_request("tools/list", None)
    named = neutral_request("tools/list", None, server="weather")
    other = neutral_request("tools/list", None, server="search")
    assert len({request_hash(plain), request_hash(named), request_hash(other)}) == 3
    # An mcp request can never hash like a chat request or another kind's.
    chat = {"messages": [{"role": "user", "content": "tools/list"}]}
    completion = {"kind": "completion", "prompt": "tools/list"}
    assert request_hash(plain) not in {request_hash(chat), request_hash(completion)}


@pytest.mark.parametrize(
    "bad",
    [
        {"kind": "mcp"},
        {"kind": "mcp", "method": ""},
        {"kind": "mcp", "method": "tools/list", "id": 3},
        {"kind": "mcp", "method": "tools/list", "params": [1]},
    ],
)
def test_an_invalid_mcp_request_is_a_request_error(bad: dict[str, Any]) -> None:
    with pytest.raises(RequestError):
        request_hash(bad)


def test_answers_round_trip_and_a_foreign_answer_is_refused() -> None:
    result = JSONRPCResponse(jsonrpc="2.0", id=4, result={"content": []})
    error = JSONRPCError.model_validate(
        {"jsonrpc": "2.0", "id": 5, "error": {"code": -32601, "message": "no such method"}}
    )
    assert stored_answer(result) == {"result": {"content": []}}
    assert stored_answer(error) == {"error": {"code": -32601, "message": "no such method"}}
    again = answer_of(stored_answer(result), "x")
    assert isinstance(again, JSONRPCResponse) and again.id == "x"
    assert again.result == {"content": []}
    failed = answer_of(stored_answer(error), 9)
    assert isinstance(failed, JSONRPCError) and failed.error.code == -32601
    foreign: list[dict[str, Any]] = [
        {"content": "hi"},
        {"result": "text"},
        {"result": {}, "error": {}},
        {"error": {"message": "no code"}},
    ]
    for answer in foreign:
        assert answer_of(answer, 1) is None
