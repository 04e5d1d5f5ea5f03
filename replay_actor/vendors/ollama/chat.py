"""Ollama ``POST /api/chat`` <-> the neutral chat request and response (docs/ollama.md).

Messages map role for role; ``tool_calls`` carry their arguments as an object (JSON text
in the neutral request, RFC 8785 so spellings hash alike) and have no ids (the neutral
id is empty); a tool message's ``tool_name`` is its ``name``. ``images`` are refused (a
fixture holds text). ``thinking`` sent back is the model's own output: not hashed.
Tools are OpenAI's function tools. The answer streams as NDJSON unless
``stream: false``.
"""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec

from ..._errors import RequestError
from ..._response import Response
from .._common import (
    MalformedResponse,
    VendorCall,
    arguments_object,
    canonical_arguments,
    read_tools,
    vendor_call,
)
from ._wire import (
    NDJSON,
    NOT_HASHED,
    answer_body,
    answer_stream,
    error_body,
    live_endpoint,
    live_format,
    live_options,
    live_usage,
    read_format,
    read_options,
)

__all__ = [
    "LIVE",
    "PATHS",
    "ROUTES",
    "STREAM_TYPE",
    "error_body",
    "from_response",
    "read_body",
    "response_body",
    "stream_body",
    "to_body",
]

ROUTES: Final = (re.compile(r"/api/chat/?$"),)
PATHS: Final = ("POST /api/chat",)
#: Ollama streams newline-delimited JSON.
STREAM_TYPE: Final = NDJSON

_encode: Final = msgspec.json.encode
_OWNED: Final = NOT_HASHED | {"messages", "tools", "format", "options"}
_ROLES: Final = frozenset({"system", "user", "assistant", "tool"})
_MESSAGE_KEYS: Final = frozenset({"role", "content", "tool_calls", "tool_name", "thinking"})


def _call(raw: Any, where: str) -> dict[str, Any]:
    function = raw.get("function") if type(raw) is dict else None
    if type(function) is not dict or type(function.get("name")) is not str:
        raise RequestError(f"{where}.function must be an object with a name")
    arguments = function.get("arguments", {})
    text = arguments if type(arguments) is str else _encode(arguments).decode()
    return {"id": "", "name": function["name"], "arguments": canonical_arguments(text)}


def _message(raw: Any, i: int) -> dict[str, Any]:
    where = f"messages[{i}]"
    if type(raw) is not dict:
        raise RequestError(f"{where} must be an object")
    extra = sorted(k for k in set(raw) - _MESSAGE_KEYS if raw[k] is not None)
    if extra:
        raise RequestError(f"{where}.{extra[0]} cannot be replayed")
    role = raw.get("role")
    if type(role) is not str or role not in _ROLES:
        raise RequestError(f"{where}.role must be system, user, assistant or tool")
    content = raw.get("content")
    if content is not None and type(content) is not str:
        raise RequestError(f"{where}.content must be a string")
    out: dict[str, Any] = {"role": role, "content": content or None}
    calls = raw.get("tool_calls")
    if calls:
        if type(calls) is not list:
            raise RequestError(f"{where}.tool_calls must be an array")
        out["tool_calls"] = [_call(c, f"{where}.tool_calls[{j}]") for j, c in enumerate(calls)]
    if raw.get("tool_name") is not None:
        out["name"] = raw["tool_name"]
    return out


def _tools(raw: list[Any]) -> list[dict[str, Any]]:
    out = []
    for i, tool in enumerate(raw):
        function = tool.get("function") if type(tool) is dict else None
        if type(function) is not dict:
            raise RequestError(f"tools[{i}] must be a function tool")
        out.append(dict(function))
    return out


def read_body(body: Any, path: str = "") -> VendorCall:
    """The neutral chat request for an ``/api/chat`` body."""
    if type(body) is not dict:
        raise RequestError("the request body must be a JSON object")
    messages = body.get("messages")
    if type(messages) is not list:
        raise RequestError("messages must be an array")
    request: dict[str, Any] = {"messages": [_message(m, i) for i, m in enumerate(messages)]}
    read_tools(body, request, _tools, lambda choice: choice)
    response_format = read_format(body.get("format"))
    if response_format is not None:
        request["response_format"] = response_format
    params = {k: v for k, v in body.items() if k not in _OWNED and v is not None}
    read_options(body, params)
    return vendor_call(body, request, params, stream=body.get("stream") is not False)


def _message_out(response: Response) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": response.content if response.refusal is None else response.refusal,
    }
    if response.tool_calls:
        message["tool_calls"] = [
            {"function": {"name": call.name, "arguments": arguments_object(call.arguments)}}
            for call in response.tool_calls
        ]
    if message["content"] is None:
        message["content"] = ""
    return message


def response_body(response: Response, call: VendorCall) -> dict[str, Any]:
    """The whole ``/api/chat`` answer (``stream: false``)."""
    return answer_body(response, call, "message", _message_out(response))


def stream_body(response: Response, call: VendorCall) -> bytes:
    """The answer as NDJSON: the message, then an empty ``done`` line with the counts."""
    empty = {"role": "assistant", "content": ""}
    return answer_stream(response, call, "message", _message_out(response), empty)


def _live_message(message: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message["role"], "content": message.get("content") or ""}
    if message.get("tool_calls"):
        out["tool_calls"] = [
            {"function": {"name": c["name"], "arguments": arguments_object(c["arguments"])}}
            for c in message["tool_calls"]
        ]
    if message["role"] == "tool" and "name" in message:
        out["tool_name"] = message["name"]
    if not isinstance(out["content"], str):
        raise RequestError("content parts cannot be sent to Ollama")
    return out


def to_body(request: dict[str, Any], model: str) -> dict[str, Any]:
    """The live ``/api/chat`` body (never streamed)."""
    params = dict(request.get("params", {}))
    think = params.pop("think", None)
    body: dict[str, Any] = {
        "model": model,
        "messages": [_live_message(m) for m in request["messages"]],
        "stream": False,
    }
    if request.get("tools"):
        body["tools"] = [{"type": "function", "function": tool} for tool in request["tools"]]
    if "response_format" in request:
        body["format"] = live_format(request["response_format"])
    if params:
        body["options"] = live_options(params)
    if think is not None:
        body["think"] = think
    return body


def _live_calls(raw: Any) -> list[dict[str, str]]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise MalformedResponse("tool_calls is not an array")
    calls = []
    for call in raw:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise MalformedResponse("a tool call has no function name")
        arguments = function.get("arguments", {})
        text = arguments if isinstance(arguments, str) else _encode(arguments).decode()
        calls.append({"id": "", "name": function["name"], "arguments": text})
    return calls


def from_response(data: Any) -> dict[str, Any]:
    """The neutral response for a whole ``/api/chat`` answer."""
    message = data.get("message") if isinstance(data, dict) else None
    if not isinstance(message, dict):
        raise MalformedResponse("the body has no message")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise MalformedResponse("the message content is not a string")
    calls = _live_calls(message.get("tool_calls"))
    done = data.get("done_reason")
    finish = "tool_calls" if calls else ("length" if done == "length" else "stop")
    return {
        "content": content or None,
        "tool_calls": calls,
        "finish_reason": finish,
        "usage": live_usage(data),
    }


LIVE: Final = live_endpoint(
    "OllamaAdapter",
    "an Ollama chat answer",
    "/api/chat",
    kinds=(("completion", "ollama-generate"), ("embedding", "ollama-embed")),
)
