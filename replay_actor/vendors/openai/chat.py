"""OpenAI chat completions <-> the neutral request and response (docs/sdk.md, "The mapping").

This module is the one place OpenAI's chat-completions shapes are read or written, in
both directions:

- an SDK's request body -> the neutral request (``read_body``), and the neutral response
  -> the vendor's ``chat.completion`` (``response_body``) or its server-sent events
  (``stream_body``), for the transports that let an unchanged ``openai`` client replay;
- the neutral request -> a body for a live endpoint (``to_body``) and the live answer ->
  the neutral response (``from_response``), for the ``openai`` live adapter.

Fields the neutral response cannot answer faithfully (``n`` other than 1, ``audio``,
output ``modalities`` other than text) are refused with ``RequestError`` naming the
field: replaying or recording them would silently drop what the caller asked for.
``logprobs`` and ``top_logprobs`` are hashed parameters like any other, and the answer's
``choices[0].logprobs`` is the neutral response's ``logprobs``, verbatim both ways (in a
stream, on the chunk that carries the content).
"""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec

from ..._errors import RequestError
from ..._response import Response
from .._common import (
    NOT_HASHED,
    MalformedResponse,
    VendorCall,
    canonical_arguments,
    collapse_content,
    echoed_model,
    error_envelope,
    read_tools,
    refuse_unfaithful,
    response_id,
    vendor_call,
)
from .._endpoint import LiveEndpoint

__all__ = [
    "LIVE",
    "PATHS",
    "ROUTES",
    "error_body",
    "from_response",
    "read_body",
    "response_body",
    "stream_body",
    "to_body",
]

ROUTES: Final = (re.compile(r"/chat/completions/?$"),)
PATHS: Final = ("POST /v1/chat/completions",)

_TOOL_CHOICE_WORDS: Final = frozenset({"auto", "none", "required"})
# Keys of the body that the mapping owns or does not hash: never copied into params.
_OWNED: Final = NOT_HASHED | {
    "messages",
    "tools",
    "tool_choice",
    "response_format",
    "max_tokens",
    "max_completion_tokens",
    "stop",
}
_RESERVED_BODY_KEYS: Final = frozenset(
    {"model", "messages", "tools", "tool_choice", "response_format", "stream"}
)
_encode: Final = msgspec.json.encode
_ECHOED: Final = ("refusal", "annotations", "audio", "function_call")


# -- vendor body -> neutral request -------------------------------------------------------


def _message(message: Any, i: int) -> dict[str, Any]:
    if type(message) is not dict:
        raise RequestError(f"messages[{i}] must be an object")
    out = dict(message)
    role = out.get("role")
    if role == "developer":
        out["role"] = "system"
    if "content" in out:
        out["content"] = collapse_content(out["content"])
    # What the SDK echoes back when a response message is sent again (as the object, or
    # its model_dump()): empty, so it says nothing a request could mean otherwise.
    for key in _ECHOED:
        if key in out and out[key] in (None, []):
            del out[key]
    refusal = out.get("refusal")
    if role == "assistant" and type(refusal) is str and out.get("content") is None:
        # A refusal sent back is what the model said: it hashes as that text, the same
        # conversation whichever vendor shape carries it (docs/sdk.md, "Refusals").
        del out["refusal"]
        out["content"] = refusal
    calls = out.get("tool_calls")
    if calls is not None:
        if type(calls) is not list:
            raise RequestError(f"messages[{i}].tool_calls must be an array")
        out["tool_calls"] = [_tool_call(call, i, j) for j, call in enumerate(calls)]
    return out


def _tool_call(call: Any, i: int, j: int) -> dict[str, Any]:
    where = f"messages[{i}].tool_calls[{j}]"
    if type(call) is not dict:
        raise RequestError(f"{where} must be an object")
    function = call.get("function")
    if type(function) is not dict:
        raise RequestError(f"{where}.function must be an object")
    extra = sorted(set(call) - {"id", "type", "function"})
    if extra:
        raise RequestError(f"{where}.{extra[0]} cannot be replayed")
    arguments = function.get("arguments")
    if type(arguments) is not str:
        raise RequestError(f"{where}.function.arguments must be a string")
    return {
        "id": call.get("id"),
        "name": function.get("name"),
        "arguments": canonical_arguments(arguments),
    }


def _tool(tool: Any, i: int) -> dict[str, Any]:
    if type(tool) is not dict or type(tool.get("function")) is not dict:
        raise RequestError(f"tools[{i}] must be a function tool")
    if tool.get("type", "function") != "function":
        raise RequestError(f"tools[{i}].type must be 'function'")
    out = dict(tool["function"])
    extra = sorted(set(tool) - {"type", "function"})
    if extra:
        raise RequestError(f"tools[{i}].{extra[0]} cannot be replayed")
    return out


def _tools(tools: list[Any]) -> list[dict[str, Any]]:
    return [_tool(tool, i) for i, tool in enumerate(tools)]


def _read_tool_choice(choice: Any) -> Any:
    if type(choice) is dict and choice.get("type") == "function":
        function = choice.get("function")
        if (
            type(function) is dict
            and set(function) == {"name"}
            and set(choice)
            == {
                "type",
                "function",
            }
        ):
            return {"name": function["name"]}
    return choice


def read_body(body: Any, path: str = "") -> VendorCall:
    """The neutral request (a plain dict) and call options for a chat-completions body
    (``path`` says nothing more: the body holds the model and the streaming choice).

    Raises ``RequestError`` naming the field for a body that is not a chat-completions
    request or that asks for something the neutral response cannot hold.
    """
    if type(body) is not dict:
        raise RequestError("the request body must be a JSON object")
    messages = body.get("messages")
    if type(messages) is not list:
        raise RequestError("messages must be an array")
    refuse_unfaithful(body, logprobs=True)
    request: dict[str, Any] = {"messages": [_message(m, i) for i, m in enumerate(messages)]}
    read_tools(body, request, _tools, _read_tool_choice)
    if body.get("response_format") is not None:
        request["response_format"] = body["response_format"]
    options = body.get("stream_options")
    include_usage = type(options) is dict and options.get("include_usage") is True
    return vendor_call(
        body, request, _params(body), stream=body.get("stream") is True, include_usage=include_usage
    )


def _params(body: dict[str, Any]) -> dict[str, Any]:
    """Every field the mapping does not own, with ``max_tokens`` (either spelling) and
    ``stop`` (always a list) in the neutral form."""
    params = {k: v for k, v in body.items() if k not in _OWNED}
    max_tokens = body.get("max_tokens")
    completion_tokens = body.get("max_completion_tokens")
    if max_tokens is not None and completion_tokens is not None:
        raise RequestError("max_tokens and max_completion_tokens are both set; keep one")
    if max_tokens is not None or completion_tokens is not None:
        params["max_tokens"] = max_tokens if max_tokens is not None else completion_tokens
    stop = body.get("stop")
    if stop is not None:
        params["stop"] = [stop] if type(stop) is str else stop
    return params


# -- neutral response -> vendor response --------------------------------------------------


def _usage(response: Response) -> dict[str, Any]:
    usage = response.usage
    if usage is None:
        return {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    if "prompt_tokens" in usage or "completion_tokens" in usage:
        out = dict(usage)
        out.setdefault("prompt_tokens", 0)
        out.setdefault("completion_tokens", 0)
        out.setdefault("total_tokens", out["prompt_tokens"] + out["completion_tokens"])
        return out
    # A response recorded through the Anthropic adapter or written by hand that way.
    prompt = usage.get("input_tokens", 0)
    completion = usage.get("output_tokens", 0)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _calls(response: Response) -> list[dict[str, Any]]:
    return [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments},
        }
        for call in response.tool_calls
    ]


def _finish(response: Response, has_calls: bool) -> str:
    if response.finish_reason is not None:
        return response.finish_reason
    return "tool_calls" if has_calls else "stop"


def _message_body(response: Response) -> dict[str, Any]:
    # A refusal is the message's ``refusal`` with no content, as the vendor sends it.
    content = None if response.refusal is not None else response.content
    return {"role": "assistant", "content": content, "refusal": response.refusal}


def response_body(response: Response, call: VendorCall | str) -> dict[str, Any]:
    """The ``chat.completion`` object answering ``call`` (or only its model) with the
    stored neutral response."""
    calls = _calls(response)
    message = _message_body(response)
    if calls:
        message["tool_calls"] = calls
    return {
        "id": response_id(response, "chatcmpl-"),
        "object": "chat.completion",
        "created": response.created,
        "model": echoed_model(call),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": _finish(response, bool(calls)),
                "logprobs": response.logprobs,
            }
        ],
        "usage": _usage(response),
    }


def stream_body(response: Response, call: VendorCall) -> bytes:
    """The same answer as ``chat.completion.chunk`` server-sent events, ending in
    ``data: [DONE]``; a final usage chunk when the caller asked for one."""
    include_usage = call.include_usage
    head = {
        "id": response_id(response, "chatcmpl-"),
        "object": "chat.completion.chunk",
        "created": response.created,
        "model": call.model,
    }
    if include_usage:
        head["usage"] = None

    def chunk(delta: dict[str, Any], finish: str | None = None, logprobs: Any = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": logprobs}
        return b"data: " + _encode({**head, "choices": [choice]}) + b"\n\n"

    first: dict[str, Any] = {"role": "assistant"}
    for key, value in _message_body(response).items():
        if value is not None and key != "role":
            first[key] = value
    parts = [chunk(first, logprobs=response.logprobs)]
    calls = _calls(response)
    for index, tool_call in enumerate(calls):
        parts.append(chunk({"tool_calls": [{"index": index, **tool_call}]}))
    parts.append(chunk({}, _finish(response, bool(calls))))
    if include_usage:
        usage = {**head, "choices": [], "usage": _usage(response)}
        parts.append(b"data: " + _encode(usage) + b"\n\n")
    parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


#: OpenAI's error envelope, which its SDKs raise as their own exceptions.
error_body = error_envelope


# -- neutral request -> live body, live answer -> neutral response ------------------------


def _live_message(message: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message["role"], "content": message.get("content")}
    if "name" in message:
        out["name"] = message["name"]
    if message.get("tool_calls"):
        out["tool_calls"] = [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": call["arguments"]},
            }
            for call in message["tool_calls"]
        ]
    if "tool_call_id" in message:
        out["tool_call_id"] = message["tool_call_id"]
    return out


def _live_tool(tool: dict[str, Any]) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool["name"]}
    if "description" in tool:
        function["description"] = tool["description"]
    function["parameters"] = tool.get("parameters") or {"type": "object", "properties": {}}
    if tool.get("strict"):
        function["strict"] = True
    return {"type": "function", "function": function}


def _live_tool_choice(choice: str | dict[str, Any]) -> str | dict[str, Any]:
    if isinstance(choice, str):
        if choice in _TOOL_CHOICE_WORDS:
            return choice
        return {"type": "function", "function": {"name": choice}}
    if "type" not in choice and set(choice) == {"name"}:
        return {"type": "function", "function": {"name": choice["name"]}}
    return choice


def to_body(request: dict[str, Any], model: str) -> dict[str, Any]:
    """The chat-completions body for a plain normalised neutral request.

    ``params`` are merged into the body first; they may not set a key the mapping owns
    (``model``, ``messages``, ``tools``, ``tool_choice``, ``response_format``, ``stream``).
    """
    params: dict[str, Any] = request.get("params", {})
    clash = sorted(_RESERVED_BODY_KEYS.intersection(params))
    if clash:
        raise RequestError(f"params may not set {clash[0]!r} (the adapter owns it)")
    body: dict[str, Any] = dict(params)
    body["model"] = model
    body["messages"] = [_live_message(m) for m in request["messages"]]
    if request.get("tools"):
        body["tools"] = [_live_tool(t) for t in request["tools"]]
    if "tool_choice" in request:
        body["tool_choice"] = _live_tool_choice(request["tool_choice"])
    if "response_format" in request:
        body["response_format"] = request["response_format"]
    return body


def _read_calls(raw: Any) -> list[dict[str, str]]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise MalformedResponse("tool_calls is not an array")
    calls: list[dict[str, str]] = []
    for call in raw:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise MalformedResponse("a tool call has no function name")
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            # Some compatible servers send the arguments as an object.
            arguments = msgspec.json.encode(arguments).decode()
        call_id = call.get("id")
        calls.append(
            {
                "id": call_id if isinstance(call_id, str) else "",
                "name": function["name"],
                "arguments": arguments,
            }
        )
    return calls


def _first_choice(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise MalformedResponse("the body is not an object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise MalformedResponse("the body has no choices")
    first: dict[str, Any] = choices[0]
    return first


def _live_content(content: Any) -> str | None:
    if isinstance(content, list):
        # Content parts: keep the text, which is what a neutral response carries.
        content = "".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    if content is not None and not isinstance(content, str):
        raise MalformedResponse("the message content is not a string")
    return content


def from_response(data: Any) -> dict[str, Any]:
    """The neutral response for a decoded chat-completions body; ``MalformedResponse``
    if the body does not have that shape. A non-null ``message.refusal`` becomes the
    neutral ``refusal`` (docs/manifest.md, "Refusals and reasoning")."""
    choice = _first_choice(data)
    message = choice.get("message")
    if not isinstance(message, dict):
        raise MalformedResponse("the first choice has no message")
    content = _live_content(message.get("content"))
    finish = choice.get("finish_reason")
    usage = data.get("usage")
    neutral: dict[str, Any] = {
        "content": content,
        "tool_calls": _read_calls(message.get("tool_calls")),
        "finish_reason": finish if isinstance(finish, str) else None,
        "usage": usage if isinstance(usage, dict) else None,
    }
    refusal = message.get("refusal")
    if refusal is not None:
        # The model refused: kept as the neutral refusal (docs/manifest.md, "Refusals
        # and reasoning"), never as an empty answer; the content is then null.
        if not isinstance(refusal, str):
            raise MalformedResponse("the message refusal is not a string")
        neutral["refusal"] = refusal
    logprobs = choice.get("logprobs")
    if logprobs is not None:
        if not isinstance(logprobs, dict):
            raise MalformedResponse("the choice's logprobs is not an object")
        neutral["logprobs"] = logprobs  # asked for (params.logprobs): kept verbatim
    return neutral


#: Where the ``openai`` live adapter sends a request: any OpenAI-compatible base URL.
LIVE: Final = LiveEndpoint(
    adapter="OpenAIAdapter",
    shape="a chat completion",
    base_url="https://api.openai.com/v1",
    path="/chat/completions",
    key_header="Authorization",
    key_prefix="Bearer ",
    kinds=(
        ("embedding", "openai-embeddings"),
        ("completion", "openai-completions"),
        ("count_tokens", "openai-input-tokens"),
    ),
)


#: Its answers say token log probabilities (the live adapter may ask for them).
KEEPS_LOGPROBS: Final = True
