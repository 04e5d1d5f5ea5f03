"""Cohere's v2 chat API, ``POST /v2/chat`` <-> the neutral request and response
(docs/cohere.md).

This module is the one place Cohere's chat shapes are read or written:

- the ``cohere`` SDK's request body -> the neutral request (``read_body``); the neutral
  response -> a chat response (``response_body``) or its server-sent events
  ``message-start`` ... ``message-end`` (``stream_body``), Cohere's error body
  (``error_body``);
- the neutral request -> a live body (``to_body``) and the live answer -> the neutral
  response (``from_response``), for the ``cohere`` live adapter.

The neutral request is the OpenAI-like one of docs/request.md, so a conversation sent
through the cohere SDK hashes as it does through OpenAI's wherever both can say it:
messages map role for role, content that is one text block is that text, an assistant's
``tool_calls`` are OpenAI's (their ``arguments`` RFC 8785 text), ``tools`` are function
tools, ``tool_choice`` ``REQUIRED`` / ``NONE`` are ``required`` / ``none``,
``stop_sequences`` is ``params.stop``, ``p`` is ``params.top_p`` and ``k``
``params.top_k``. Every other field (``documents``, ``citation_options``,
``safety_mode``, ``strict_tools``, ``thinking``, ...) is hashed as it is, in ``params``;
``model``, ``stream`` and ``priority`` (scheduling) are not. An assistant's
``tool_plan`` and ``thinking`` blocks are the model's own earlier output: not hashed,
carried as its ``reasoning`` (vendor ``cohere``) to a live endpoint and replayed to
Cohere only; ``citations`` sent back are the model's output too, and dropped.
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
    read_tools,
    refuse_unfaithful,
    response_id,
    vendor_call,
)
from .._endpoint import LiveEndpoint

__all__ = [
    "LIVE",
    "NAME",
    "PATHS",
    "ROUTES",
    "error_body",
    "from_response",
    "read_body",
    "response_body",
    "stream_body",
    "to_body",
]

NAME: Final = "cohere"
ROUTES: Final = (re.compile(r"/v2/chat/?$"),)
PATHS: Final = ("POST /v2/chat",)

#: Cohere's parameter names -> the neutral ones, so they hash alike everywhere.
_PARAMS: Final = {"stop_sequences": "stop", "p": "top_p", "k": "top_k"}
_PARAMS_BACK: Final = {v: k for k, v in _PARAMS.items()}
_OWNED: Final = NOT_HASHED | {"messages", "tools", "tool_choice", "response_format", "priority"}
_RESERVED: Final = frozenset({"model", "messages", "tools", "tool_choice", "stream"})
_ROLES: Final = frozenset({"system", "user", "assistant", "tool"})
_CHOICES: Final = {"REQUIRED": "required", "NONE": "none"}
_FINISH_TO: Final = {"stop": "COMPLETE", "length": "MAX_TOKENS", "tool_calls": "TOOL_CALL"}
_FINISH_FROM: Final = {
    "COMPLETE": "stop",
    "STOP_SEQUENCE": "stop",
    "MAX_TOKENS": "length",
    "TOOL_CALL": "tool_calls",
}
_encode: Final = msgspec.json.encode


# -- vendor body -> neutral request -------------------------------------------------------


def _without_nulls(value: Any) -> Any:
    """A block or message without keys set to null: the SDK writes a message sent back
    through ``model_dump()`` with several (``citations``, ``tool_plan``)."""
    if type(value) is dict and None in value.values():
        return {k: v for k, v in value.items() if v is not None}
    return value


def _tool_call(raw: Any, where: str) -> dict[str, Any]:
    call = _without_nulls(raw)
    function = call.get("function") if type(call) is dict else None
    if type(function) is not dict or type(function.get("name")) is not str:
        raise RequestError(f"{where}.function must be an object with a name")
    arguments = function.get("arguments", "")
    if type(arguments) is not str:
        raise RequestError(f"{where}.function.arguments must be a string")
    return {
        "id": call.get("id"),
        "name": function["name"],
        "arguments": canonical_arguments(arguments),
    }


def _is_thinking(block: Any) -> bool:
    return type(block) is dict and block.get("type") == "thinking"


def _tool_calls(calls: Any, where: str) -> list[dict[str, Any]]:
    if type(calls) is not list:
        raise RequestError(f"{where}.tool_calls must be an array")
    return [_tool_call(call, f"{where}.tool_calls[{j}]") for j, call in enumerate(calls)]


def _without_thinking(content: Any) -> tuple[Any, list[Any]]:
    """A message's content without its thinking blocks, and those blocks."""
    if type(content) is not list:
        return content, []
    blocks = [_without_nulls(block) for block in content]
    return [b for b in blocks if not _is_thinking(b)], [b for b in blocks if _is_thinking(b)]


def _assistant(message: dict[str, Any], where: str) -> dict[str, Any]:
    """An assistant message: its text, its tool calls, and its plan and thinking carried
    as (unhashed) reasoning."""
    out: dict[str, Any] = {"role": "assistant"}
    content, items = _without_thinking(message.get("content"))
    if content:
        out["content"] = collapse_content(content)
    if message.get("tool_calls"):
        out["tool_calls"] = _tool_calls(message["tool_calls"], where)
    if message.get("tool_plan"):
        items.append({"type": "tool_plan", "tool_plan": message["tool_plan"]})
    if items:
        out["reasoning"] = {"vendor": NAME, "items": items}
    return out


def _message(raw: Any, i: int) -> dict[str, Any]:
    where = f"messages[{i}]"
    message = _without_nulls(raw)
    if type(message) is not dict:
        raise RequestError(f"{where} must be an object")
    role = message.get("role")
    if type(role) is not str or role not in _ROLES:
        raise RequestError(f"{where}.role must be system, user, assistant or tool")
    extra = sorted(
        set(message) - {"role", "content", "tool_calls", "tool_plan", "citations", "tool_call_id"}
    )
    if extra:
        raise RequestError(f"{where}.{extra[0]} cannot be replayed")
    if role == "assistant":
        return _assistant(message, where)
    out: dict[str, Any] = {"role": role, "content": collapse_content(message.get("content"))}
    if role == "tool":
        out["tool_call_id"] = message.get("tool_call_id")
    return out


def _tools(raw: list[Any]) -> list[dict[str, Any]]:
    out = []
    for i, tool in enumerate(raw):
        function = tool.get("function") if type(tool) is dict else None
        if type(function) is not dict or tool.get("type", "function") != "function":
            raise RequestError(f"tools[{i}] must be a function tool")
        out.append(_without_nulls(function))
    return out


def _tool_choice(choice: Any) -> str:
    if type(choice) is not str or choice not in _CHOICES:
        raise RequestError("tool_choice must be 'REQUIRED' or 'NONE'")
    return _CHOICES[choice]


def _neutral(name: str) -> str:
    return _PARAMS.get(name, name)


def read_body(body: Any, path: str = "") -> VendorCall:
    """The neutral request (a plain dict) and call options for a v2 chat body (``path``
    says nothing more). Raises ``RequestError`` naming the field it cannot replay."""
    if type(body) is not dict:
        raise RequestError("the request body must be a JSON object")
    messages = body.get("messages")
    if type(messages) is not list:
        raise RequestError("messages must be an array")
    refuse_unfaithful(body)
    request: dict[str, Any] = {"messages": [_message(m, i) for i, m in enumerate(messages)]}
    read_tools(body, request, _tools, _tool_choice)
    if body.get("response_format") is not None:
        request["response_format"] = body["response_format"]
    params = {_neutral(k): v for k, v in body.items() if k not in _OWNED and v is not None}
    return vendor_call(body, request, params, stream=body.get("stream") is True)


# -- neutral response -> vendor response --------------------------------------------------


def _usage(response: Response) -> dict[str, Any]:
    usage = response.usage or {}
    counts = {
        "input_tokens": usage.get("prompt_tokens", usage.get("input_tokens", 0)),
        "output_tokens": usage.get("completion_tokens", usage.get("output_tokens", 0)),
    }
    return {"billed_units": counts, "tokens": counts}


def _reasoning(response: Response) -> list[dict[str, Any]]:
    """The model's own thinking and plan, replayed to Cohere only."""
    if response.reasoning is None or response.reasoning.vendor != NAME:
        return []
    return [dict(item) for item in response.reasoning.items]


def _message_out(response: Response) -> dict[str, Any]:
    reasoning = _reasoning(response)
    content = [item for item in reasoning if item.get("type") == "thinking"]
    text = response.refusal if response.refusal is not None else response.content
    if text:
        content.append({"type": "text", "text": text})
    message: dict[str, Any] = {"role": "assistant", "content": content}
    plans = [item["tool_plan"] for item in reasoning if item.get("type") == "tool_plan"]
    if plans:
        message["tool_plan"] = "".join(plans)
    if response.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in response.tool_calls
        ]
    return message


def _finish(response: Response) -> str:
    finish = response.finish_reason
    if finish is None:
        return "TOOL_CALL" if response.tool_calls else "COMPLETE"
    return _FINISH_TO.get(finish, finish.upper())


def response_body(response: Response, call: VendorCall) -> dict[str, Any]:
    """The v2 chat response answering with the stored neutral response."""
    return {
        "id": response_id(response, ""),
        "finish_reason": _finish(response),
        "message": _message_out(response),
        "usage": _usage(response),
    }


def _event(payload: dict[str, Any]) -> bytes:
    name: str = payload["type"]
    return b"event: " + name.encode() + b"\ndata: " + _encode(payload) + b"\n\n"


def _content_events(index: int, block: dict[str, Any]) -> list[bytes]:
    kind = block["type"]
    opening = {"type": kind, kind: ""}
    return [
        _event(
            {"type": "content-start", "index": index, "delta": {"message": {"content": opening}}}
        ),
        _event(
            {
                "type": "content-delta",
                "index": index,
                "delta": {"message": {"content": {kind: block.get(kind, "")}}},
            }
        ),
        _event({"type": "content-end", "index": index}),
    ]


def _call_events(index: int, call: dict[str, Any]) -> list[bytes]:
    function = call["function"]
    opening = {**call, "function": {"name": function["name"], "arguments": ""}}
    delta = {"tool_calls": {"function": {"arguments": function["arguments"]}}}
    return [
        _event(
            {
                "type": "tool-call-start",
                "index": index,
                "delta": {"message": {"tool_calls": opening}},
            }
        ),
        _event({"type": "tool-call-delta", "index": index, "delta": {"message": delta}}),
        _event({"type": "tool-call-end", "index": index}),
    ]


def stream_body(response: Response, call: VendorCall) -> bytes:
    """The same answer as Cohere's server-sent events, ``message-start`` to
    ``message-end``: the content blocks, the tool plan, the tool calls, then the finish
    and the usage."""
    answer = response_body(response, call)
    message = answer["message"]
    start = {"role": "assistant", "content": [], "tool_plan": "", "tool_calls": [], "citations": []}
    parts = [_event({"id": answer["id"], "type": "message-start", "delta": {"message": start}})]
    for index, block in enumerate(message["content"]):
        parts.extend(_content_events(index, block))
    if "tool_plan" in message:
        plan = {"message": {"tool_plan": message["tool_plan"]}}
        parts.append(_event({"type": "tool-plan-delta", "delta": plan}))
    for index, tool_call in enumerate(message.get("tool_calls", [])):
        parts.extend(_call_events(index, tool_call))
    end = {"finish_reason": answer["finish_reason"], "usage": answer["usage"]}
    parts.append(_event({"id": answer["id"], "type": "message-end", "delta": end}))
    return b"".join(parts)


def error_body(kind: str, message: str, nearest: dict[str, Any] | None) -> dict[str, Any]:
    """Cohere's error body (``{"message"}``, which the cohere SDK raises as its own
    ``ApiError`` subclass for the status); the kind and ``nearest`` ride beside it."""
    body: dict[str, Any] = {"message": message, "type": kind}
    if nearest is not None:
        body["nearest"] = nearest
    return body


# -- neutral request -> live body, live answer -> neutral response ------------------------


def _carried(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The reasoning items an assistant message carries back, if they are Cohere's
    (another vendor's reasoning is omitted)."""
    reasoning = message.get("reasoning")
    if isinstance(reasoning, dict) and reasoning.get("vendor") == NAME:
        return list(reasoning.get("items") or [])
    return []


def _text_blocks(content: Any) -> list[Any]:
    if type(content) is list:
        return list(content)
    return [{"type": "text", "text": content}] if type(content) is str and content else []


def _live_assistant(message: dict[str, Any]) -> dict[str, Any]:
    """An assistant turn as Cohere takes it back: its thinking blocks and text, its plan
    (the model's own, carried as reasoning), its tool calls."""
    items = _carried(message)
    out: dict[str, Any] = {"role": "assistant"}
    content = [item for item in items if _is_thinking(item)] + _text_blocks(message.get("content"))
    if content:
        out["content"] = content
    plans = [item["tool_plan"] for item in items if item.get("type") == "tool_plan"]
    if plans:
        out["tool_plan"] = "".join(plans)
    if message.get("tool_calls"):
        out["tool_calls"] = [_live_call(call) for call in message["tool_calls"]]
    return out


def _live_call(call: dict[str, Any]) -> dict[str, Any]:
    function = {"name": call["name"], "arguments": call["arguments"]}
    return {"id": call["id"], "type": "function", "function": function}


def _live_message(message: dict[str, Any]) -> dict[str, Any]:
    role = message["role"]
    if role == "assistant":
        return _live_assistant(message)
    out: dict[str, Any] = {"role": role, "content": message.get("content") or ""}
    if role == "tool":
        out["tool_call_id"] = message.get("tool_call_id")
    return out


def _live_tool_choice(choice: Any) -> str | None:
    if choice == "required":
        return "REQUIRED"
    if choice == "none":
        return "NONE"
    if choice == "auto":
        return None  # Cohere's default: the model chooses
    raise RequestError("a tool_choice naming a tool has no Cohere equivalent")


def to_body(request: dict[str, Any], model: str) -> dict[str, Any]:
    """The v2 chat body for a plain normalised neutral request (the live adapter's;
    never streamed). ``params`` may not set a key the mapping owns."""
    params: dict[str, Any] = request.get("params", {})
    clash = sorted(_RESERVED.intersection(params))
    if clash:
        raise RequestError(f"params may not set {clash[0]!r} (the adapter owns it)")
    body: dict[str, Any] = {_PARAMS_BACK.get(k, k): v for k, v in params.items()}
    body["model"] = model
    body["messages"] = [_live_message(m) for m in request["messages"]]
    if request.get("tools"):
        body["tools"] = [{"type": "function", "function": tool} for tool in request["tools"]]
    choice = _live_tool_choice(request["tool_choice"]) if "tool_choice" in request else None
    if choice is not None:
        body["tool_choice"] = choice
    if "response_format" in request:
        body["response_format"] = request["response_format"]
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
        arguments = function.get("arguments") or "{}"
        call_id = call.get("id")
        calls.append(
            {
                "id": call_id if isinstance(call_id, str) else "",
                "name": function["name"],
                "arguments": canonical_arguments(arguments) if isinstance(arguments, str) else "",
            }
        )
    return calls


def _live_usage(data: dict[str, Any]) -> dict[str, int] | None:
    usage = data.get("usage")
    tokens = usage.get("tokens") or usage.get("billed_units") if isinstance(usage, dict) else None
    if not isinstance(tokens, dict):
        return None
    prompt, completion = tokens.get("input_tokens", 0), tokens.get("output_tokens", 0)
    if not isinstance(prompt, int | float) or not isinstance(completion, int | float):
        return None
    return {
        "prompt_tokens": int(prompt),
        "completion_tokens": int(completion),
        "total_tokens": int(prompt) + int(completion),
    }


def from_response(data: Any) -> dict[str, Any]:
    """The neutral response for a decoded v2 chat response; ``MalformedResponse``
    otherwise. ``thinking`` blocks and the ``tool_plan`` become the neutral
    ``reasoning`` (``{"vendor": "cohere", "items": [...]}``, in order)."""
    message = data.get("message") if isinstance(data, dict) else None
    if not isinstance(message, dict):
        raise MalformedResponse("the body has no message")
    texts, items = _live_content(message)
    plan = message.get("tool_plan")
    if isinstance(plan, str) and plan:
        items.append({"type": "tool_plan", "tool_plan": plan})
    neutral: dict[str, Any] = {
        "content": "".join(texts) if texts else None,
        "tool_calls": _live_calls(message.get("tool_calls")),
        "finish_reason": _live_finish(data.get("finish_reason")),
        "usage": _live_usage(data),
    }
    if items:
        neutral["reasoning"] = {"vendor": NAME, "items": items}
    return neutral


def _live_content(message: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """A live message's texts, and its thinking blocks (the model's reasoning)."""
    content = message.get("content") or []
    if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
        raise MalformedResponse("the message content is not an array of blocks")
    texts = [b["text"] for b in content if b.get("type") == "text" and type(b.get("text")) is str]
    return texts, [block for block in content if _is_thinking(block)]


def _live_finish(finish: Any) -> str | None:
    return _FINISH_FROM.get(finish, finish.lower()) if isinstance(finish, str) else None


#: Where the ``cohere`` live adapter sends a request: the vendor's base URL, the key as a
#: bearer token.
LIVE: Final = LiveEndpoint(
    adapter="CohereAdapter",
    shape="a Cohere chat response",
    base_url="https://api.cohere.com",
    path="/v2/chat",
    key_header="Authorization",
    key_prefix="Bearer ",
)
