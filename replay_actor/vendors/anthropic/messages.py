"""Anthropic messages <-> the neutral request and response (docs/sdk.md, "The mapping").

This module is the one place Anthropic's Messages API shapes are read or written:

- an SDK's request body -> the neutral request (``read_body``), and the neutral response
  -> a ``message`` (``response_body``) or its server-sent events ``message_start`` ...
  ``message_stop`` (``stream_body``), for the transports;
- the neutral request -> a body for the live endpoint (``to_body``) and its answer -> the
  neutral response (``from_response``), for the ``anthropic`` live adapter.

The neutral request is the OpenAI-like one of docs/request.md, so the same
conversation sent through either vendor's SDK hashes alike: the top-level ``system``
becomes the first message, ``tool_use`` blocks become an assistant's ``tool_calls`` (their
``input`` as RFC 8785 text), each ``tool_result`` block of a user message becomes a
``tool`` message placed before the rest of that message, ``stop_sequences`` becomes
``params.stop``, and ``tool_choice`` ``any`` is ``required``. The transport hints of
``_common.NOT_HASHED`` (``model``, ``stream``, ``metadata``, ...) and every
``cache_control`` are delivery details, and ``thinking`` / ``redacted_thinking`` blocks
sent back are the model's own earlier output: none of them is hashed (the thinking
blocks ride on the assistant message as its unhashed ``reasoning``, for ``to_body``).
"""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec

from ..._canonical import canonical_json
from ..._errors import RequestError
from ..._response import Response, Unexpressible
from .._common import (
    NOT_HASHED,
    MalformedResponse,
    VendorCall,
    arguments_object,
    canonical_arguments,
    collapse_content,
    echoed_model,
    read_tools,
    refuse_unfaithful,
    response_id,
    vendor_call,
)
from .._endpoint import EndpointOption, LiveEndpoint
from .._turns import split_system, turns

__all__ = [
    "LIVE",
    "NAME",
    "PATHS",
    "ROUTES",
    "Unexpressible",
    "error_body",
    "from_response",
    "read_body",
    "response_body",
    "stream_body",
    "to_body",
]

NAME: Final = "anthropic"
ROUTES: Final = (re.compile(r"/v1/messages/?$"),)
PATHS: Final = ("POST /v1/messages",)

# Keys of the body the mapping owns or drops: never copied into params.
_OWNED: Final = NOT_HASHED | {
    "messages",
    "system",
    "tools",
    "tool_choice",
    "cache_control",
    "stop_sequences",
}
_STOP_TO_VENDOR: Final = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}
_STOP_FROM_VENDOR: Final = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
}
_THINKING: Final = frozenset({"thinking", "redacted_thinking"})
_CHOICE_WORDS: Final = {"auto": "auto", "any": "required", "none": "none"}
#: Content blocks that are the model's reasoning, kept verbatim as the neutral reasoning.
_REASONING_BLOCKS: Final = frozenset({"thinking", "redacted_thinking"})
_RESERVED_PARAMS: Final = frozenset(
    {"model", "messages", "system", "tools", "tool_choice", "stream", "stop_sequences"}
)
#: Anthropic requires max_tokens; a live call whose request does not set it gets this.
DEFAULT_MAX_TOKENS: Final = 4096
_encode: Final = msgspec.json.encode


# -- vendor body -> neutral request -------------------------------------------------------


def _clean_block(block: Any) -> Any:
    """A block without ``cache_control`` (delivery, not meaning) and without keys set to
    null: the API reads a null optional field as absent, and a response block sent back
    through ``model_dump()`` carries several (``citations``, ``caller``, ...)."""
    if type(block) is dict and ("cache_control" in block or None in block.values()):
        block = {k: v for k, v in block.items() if k != "cache_control" and v is not None}
    return block


def _blocks(content: Any) -> Any:
    if type(content) is list:
        return [_clean_block(block) for block in content]
    return content


def _tool_result(block: dict[str, Any], where: str) -> dict[str, Any]:
    extra = sorted(set(block) - {"type", "tool_use_id", "content", "is_error"})
    if extra:
        raise RequestError(f"{where}.{extra[0]} cannot be replayed")
    if block.get("is_error"):
        raise RequestError(f"{where}.is_error cannot be replayed (no neutral equivalent)")
    message: dict[str, Any] = {"role": "tool", "tool_call_id": block.get("tool_use_id")}
    if "content" in block:
        message["content"] = collapse_content(_blocks(block["content"]))
    return message


def _tool_use(block: dict[str, Any], where: str) -> dict[str, Any]:
    extra = sorted(set(block) - {"type", "id", "name", "input"})
    if extra:
        raise RequestError(f"{where}.{extra[0]} cannot be replayed")
    try:
        arguments = canonical_json(block.get("input", {})).decode()
    except RequestError:
        raise RequestError(f"{where}.input is not a JSON value RFC 8785 can encode") from None
    return {"id": block.get("id"), "name": block.get("name"), "arguments": arguments}


def _messages(message: Any, i: int) -> list[dict[str, Any]]:
    """One Anthropic message as one or more neutral messages."""
    where = f"messages[{i}]"
    if type(message) is not dict:
        raise RequestError(f"{where} must be an object")
    extra = sorted(set(message) - {"role", "content"})
    if extra:
        raise RequestError(f"{where}.{extra[0]} cannot be replayed")
    role = message.get("role")
    content = message.get("content")
    if type(content) is not list:
        return [{"role": role, "content": content}]
    blocks = _blocks(content)
    if role == "user":
        return _user_messages(blocks, where)
    if role == "assistant":
        return [_assistant_message(blocks, where)]
    return [{"role": role, "content": collapse_content(blocks)}]


def _user_messages(blocks: list[Any], where: str) -> list[dict[str, Any]]:
    """A user message's ``tool_result`` blocks as tool messages, in order, then the rest
    of it as one user message (if anything is left, or nothing was a result)."""
    out: list[dict[str, Any]] = []
    rest: list[Any] = []
    for j, block in enumerate(blocks):
        if type(block) is dict and block.get("type") == "tool_result":
            out.append(_tool_result(block, f"{where}.content[{j}]"))
        else:
            rest.append(block)
    if rest or not out:
        out.append({"role": "user", "content": collapse_content(rest)})
    return out


def _assistant_message(blocks: list[Any], where: str) -> dict[str, Any]:
    calls: list[dict[str, Any]] = []
    thinking: list[dict[str, Any]] = []
    rest = []
    for j, block in enumerate(blocks):
        kind = block.get("type") if type(block) is dict else None
        if kind is not None and type(kind) is not str:
            # Checked before the set lookup below: a list or an object is unhashable.
            raise RequestError(f"{where}.content[{j}].type must be a string")
        if kind == "tool_use":
            calls.append(_tool_use(block, f"{where}.content[{j}]"))
        elif kind in _THINKING:
            # The model's own thinking sent back was decided by the earlier turns: not
            # hashed, only carried to a live endpoint (docs/request.md, "Reasoning sent
            # back").
            thinking.append(block)
        else:
            rest.append(block)
    neutral: dict[str, Any] = {"role": "assistant"}
    if rest:
        neutral["content"] = collapse_content(rest)
    if calls:
        neutral["tool_calls"] = calls
    if thinking:
        neutral["reasoning"] = {"vendor": NAME, "items": thinking}
    return neutral


def _tool(tool: Any, i: int) -> dict[str, Any]:
    if type(tool) is not dict:
        raise RequestError(f"tools[{i}] must be an object")
    out: dict[str, Any] = {}
    for key, value in tool.items():
        if key == "input_schema":
            out["parameters"] = value
        elif key == "cache_control" or (key == "type" and value == "custom"):
            continue
        elif key in ("name", "description", "strict"):
            out[key] = value
        else:
            raise RequestError(f"tools[{i}].{key} cannot be replayed")
    return out


def _read_tool_choice(choice: Any, params: dict[str, Any]) -> Any:
    if type(choice) is not dict:
        raise RequestError("tool_choice must be an object")
    kind = choice.get("type")
    extra = set(choice) - {"type", "name", "disable_parallel_tool_use"}
    if extra:
        raise RequestError(f"tool_choice.{sorted(extra)[0]} cannot be replayed")
    if choice.get("disable_parallel_tool_use") is True:
        # OpenAI says the same thing with parallel_tool_calls: one spelling in the hash.
        params["parallel_tool_calls"] = False
    if kind == "tool":
        return {"name": choice.get("name")}
    if type(kind) is str and kind in _CHOICE_WORDS:  # a list or object is unhashable
        return _CHOICE_WORDS[kind]
    raise RequestError("tool_choice.type must be auto, any, tool or none")


def read_body(body: Any, path: str = "") -> VendorCall:
    """The neutral request (a plain dict) and call options for a messages body (``path``
    says nothing more).

    Raises ``RequestError`` naming the field for a body the neutral request cannot hold.
    """
    if type(body) is not dict:
        raise RequestError("the request body must be a JSON object")
    raw_messages = body.get("messages")
    if type(raw_messages) is not list:
        raise RequestError("messages must be an array")
    refuse_unfaithful(body)
    messages: list[dict[str, Any]] = []
    system = body.get("system")
    if system is not None:
        messages.append({"role": "system", "content": collapse_content(_blocks(system))})
    for i, message in enumerate(raw_messages):
        messages.extend(_messages(message, i))
    request: dict[str, Any] = {"messages": messages}
    params = {k: v for k, v in body.items() if k not in _OWNED}
    read_tools(
        body,
        request,
        lambda tools: [_tool(t, i) for i, t in enumerate(tools)],
        lambda choice: _read_tool_choice(choice, params),
    )
    stop = body.get("stop_sequences")
    if stop is not None:
        params["stop"] = stop
    return vendor_call(body, request, params, stream=body.get("stream") is True)


# -- neutral response -> vendor response --------------------------------------------------


def _usage(response: Response) -> dict[str, Any]:
    usage = response.usage
    if usage is None:
        return {"input_tokens": 0, "output_tokens": 0}
    return {
        "input_tokens": usage.get("input_tokens", usage.get("prompt_tokens", 0)),
        "output_tokens": usage.get("output_tokens", usage.get("completion_tokens", 0)),
    }


def _content(response: Response) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if response.reasoning is not None and response.reasoning.vendor == NAME:
        # The model's own thinking blocks, signatures included, as it sent them.
        blocks.extend(dict(item) for item in response.reasoning.items)
    # A refusal's text is the message's text (the vendor says "refusal" in stop_reason).
    text = response.refusal if response.refusal is not None else response.content
    if text:
        blocks.append({"type": "text", "text": text})
    for call in response.tool_calls:
        blocks.append(
            {
                "type": "tool_use",
                "id": call.id,
                "name": call.name,
                "input": arguments_object(call.arguments),
            }
        )
    return blocks


def _stop_reason(response: Response, has_calls: bool) -> str:
    finish = response.finish_reason
    if response.refusal is not None:
        return "refusal"
    if finish is None:
        return "tool_use" if has_calls else "end_turn"
    return _STOP_TO_VENDOR.get(finish, finish)


def response_body(response: Response, call: VendorCall | str) -> dict[str, Any]:
    """The ``message`` object answering ``call`` (or only its model) with the stored
    neutral response."""
    content = _content(response)
    return {
        "id": response_id(response, "msg_"),
        "type": "message",
        "role": "assistant",
        "model": echoed_model(call),
        "content": content,
        "stop_reason": _stop_reason(response, any(b.get("type") == "tool_use" for b in content)),
        "stop_sequence": None,
        "usage": _usage(response),
    }


def _event(name: bytes, payload: dict[str, Any]) -> bytes:
    return b"event: " + name + b"\ndata: " + _encode(payload) + b"\n\n"


def _block_events(block: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A content block's opening and the deltas that complete it, as the SDK's
    ``messages.stream`` accumulates them."""
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": ""}, [{"type": "text_delta", "text": block["text"]}]
    if kind == "tool_use":
        partial = _encode(block["input"]).decode()
        return {**block, "input": {}}, [{"type": "input_json_delta", "partial_json": partial}]
    if kind == "thinking":
        deltas = [{"type": "thinking_delta", "thinking": block.get("thinking", "")}]
        if "signature" in block:
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        return {**block, "thinking": "", "signature": ""}, deltas
    # redacted_thinking and any other opaque block arrive whole.
    return block, []


def stream_body(response: Response, call: VendorCall | str) -> bytes:
    """The same answer as Anthropic's server-sent events, ``message_start`` to
    ``message_stop``, so ``messages.stream`` rebuilds exactly ``response_body``."""
    message = response_body(response, call)
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 0}}
    parts = [_event(b"message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(message["content"]):
        opening, deltas = _block_events(block)
        parts.append(
            _event(
                b"content_block_start",
                {"type": "content_block_start", "index": index, "content_block": opening},
            )
        )
        for delta in deltas:
            parts.append(
                _event(
                    b"content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
        parts.append(_event(b"content_block_stop", {"type": "content_block_stop", "index": index}))
    parts.append(
        _event(
            b"message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": usage,
            },
        )
    )
    parts.append(_event(b"message_stop", {"type": "message_stop"}))
    return b"".join(parts)


# -- neutral request -> live body, live answer -> neutral response ------------------------


def _vendor_blocks(content: Any) -> list[Any]:
    if content is None:
        return []
    if type(content) is str:
        return [{"type": "text", "text": content}]
    return list(content)


def _vendor_choice(choice: Any, parallel: bool) -> dict[str, Any]:
    if type(choice) is dict and set(choice) == {"name"}:
        out: dict[str, Any] = {"type": "tool", "name": choice["name"]}
    elif choice == "required":
        out = {"type": "any"}
    elif choice in ("auto", "none"):
        out = {"type": choice}
    elif type(choice) is str:
        out = {"type": "tool", "name": choice}
    else:
        out = dict(choice)
    if not parallel and out["type"] != "none":
        out["disable_parallel_tool_use"] = True
    return out


def _assistant_blocks(message: dict[str, Any]) -> list[Any]:
    """An assistant message's blocks, its thinking first, as the API requires.

    The model's earlier thinking goes back verbatim: as blocks of the message's content
    (how an SDK sends it), or as a neutral ``reasoning`` from Anthropic carried by the
    message (how ``read_body`` passes on the blocks an SDK sent back); another vendor's
    reasoning is omitted (docs/request.md, "Reasoning sent back").
    """
    blocks = _vendor_blocks(message.get("content"))
    reasoning = message.get("reasoning")
    carried: list[Any] = []
    if type(reasoning) is dict and reasoning.get("vendor") == "anthropic":
        carried = list(reasoning.get("items") or [])
    thinking = [b for b in blocks if type(b) is dict and b.get("type") in _REASONING_BLOCKS]
    if not thinking and not carried:
        return blocks
    rest = [b for b in blocks if not (type(b) is dict and b.get("type") in _REASONING_BLOCKS)]
    return carried + thinking + rest


def _tool_result_block(message: dict[str, Any]) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.get("tool_call_id")}
    if message.get("content") is not None:
        block["content"] = message["content"]
    return block


def _assistant_turn(message: dict[str, Any]) -> dict[str, Any]:
    blocks = _assistant_blocks(message)
    for call in message.get("tool_calls", []):
        try:
            value = msgspec.json.decode(call["arguments"])
        except msgspec.DecodeError:
            value = None
        if type(value) is not dict:
            raise RequestError("tool call arguments must be a JSON object for Anthropic")
        blocks.append({"type": "tool_use", "id": call["id"], "name": call["name"], "input": value})
    return {"role": "assistant", "content": blocks}


def _vendor_tool(tool: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": tool["name"],
        **({"description": tool["description"]} if "description" in tool else {}),
        "input_schema": tool.get("parameters") or {"type": "object", "properties": {}},
        **({"strict": True} if tool.get("strict") else {}),
    }


def to_body(request: dict[str, Any], model: str) -> dict[str, Any]:
    """The messages body for a plain normalised neutral request (the live adapter's).

    Leading system messages become ``system``; consecutive ``tool`` messages become one
    user message of ``tool_result`` blocks, merged with a user message that follows;
    ``params.stop`` becomes ``stop_sequences``; ``max_tokens`` defaults to
    ``DEFAULT_MAX_TOKENS`` because the vendor requires it.
    """
    params: dict[str, Any] = dict(request.get("params", {}))
    clash = sorted(_RESERVED_PARAMS.intersection(params))
    if clash:
        raise RequestError(f"params may not set {clash[0]!r} (the adapter owns it)")
    if "response_format" in request:
        raise RequestError("response_format has no Anthropic equivalent")
    parallel = params.pop("parallel_tool_calls", True) is not False
    stop = params.pop("stop", None)
    body: dict[str, Any] = {"model": model, "max_tokens": DEFAULT_MAX_TOKENS, **params}
    if stop is not None:
        body["stop_sequences"] = stop
    system, conversation = split_system(request["messages"], _vendor_blocks)
    if system:
        body["system"] = collapse_content(system)
    body["messages"] = turns(
        conversation,
        vendor="Anthropic",
        tool_part=_tool_result_block,
        user_parts=lambda message: _vendor_blocks(message.get("content")),
        user_turn=lambda blocks: {"role": "user", "content": blocks},
        model_turn=_assistant_turn,
    )
    if request.get("tools"):
        body["tools"] = [_vendor_tool(t) for t in request["tools"]]
    if "tool_choice" in request:
        body["tool_choice"] = _vendor_choice(request["tool_choice"], parallel)
    elif not parallel and request.get("tools"):
        body["tool_choice"] = {"type": "auto", "disable_parallel_tool_use": True}
    return body


def _live_call(block: dict[str, Any]) -> dict[str, str]:
    """A live ``tool_use`` block as a neutral call (its input as RFC 8785 text)."""
    if not isinstance(block.get("name"), str):
        raise MalformedResponse("a tool_use block has no name")
    call_id = block.get("id")
    return {
        "id": call_id if isinstance(call_id, str) else "",
        "name": block["name"],
        "arguments": canonical_arguments(msgspec.json.encode(block.get("input", {})).decode()),
    }


def _live_usage(usage: Any) -> dict[str, Any] | None:
    """The neutral usage of a live answer's, when its counts are integers."""
    if not isinstance(usage, dict):
        return None
    prompt = usage.get("input_tokens", 0)
    completion = usage.get("output_tokens", 0)
    if not (isinstance(prompt, int) and isinstance(completion, int)):
        return None
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def from_response(data: Any) -> dict[str, Any]:
    """The neutral response for a decoded ``message``; ``MalformedResponse`` otherwise.

    ``thinking`` and ``redacted_thinking`` blocks become the neutral ``reasoning``
    (``{"vendor": "anthropic", "items": [...]}``, verbatim, in order); a ``refusal`` stop
    becomes the neutral ``refusal`` (the answer's text, or ``""``) with ``content`` null
    and ``finish_reason`` ``"refusal"``.
    """
    if not isinstance(data, dict) or not isinstance(data.get("content"), list):
        raise MalformedResponse("the body is not a message")
    texts: list[str] = []
    calls: list[dict[str, str]] = []
    reasoning: list[dict[str, Any]] = []
    for block in data["content"]:
        if not isinstance(block, dict):
            raise MalformedResponse("a content block is not an object")
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind in _REASONING_BLOCKS:
            # Verbatim, signature included: the API checks it when the block is sent
            # back in a later turn.
            reasoning.append(block)
        elif kind == "tool_use":
            calls.append(_live_call(block))
    stop = data.get("stop_reason")
    neutral: dict[str, Any] = {
        "content": "".join(texts) if texts else None,
        "tool_calls": calls,
        "finish_reason": _STOP_FROM_VENDOR.get(stop, stop) if isinstance(stop, str) else None,
        "usage": _live_usage(data.get("usage")),
    }
    if stop == "refusal":
        # A refusal is kept as one: its text, if any, is the refusal.
        neutral["content"] = None
        neutral["refusal"] = "".join(texts)
    if reasoning:
        neutral["reasoning"] = {"vendor": "anthropic", "items": reasoning}
    return neutral


#: Where the ``anthropic`` live adapter sends a request: the vendor's base URL in the
#: SDK's own form (the path adds ``/v1``), the key in ``x-api-key``, and the API version
#: the table's ``anthropic_version`` may change.
LIVE: Final = LiveEndpoint(
    adapter="AnthropicAdapter",
    shape="a message",
    base_url="https://api.anthropic.com",
    path="/v1/messages",
    key_header="x-api-key",
    options=(EndpointOption("anthropic_version", "2023-06-01", header="anthropic-version"),),
    kinds=(("count_tokens", "anthropic-count-tokens"),),
)


def error_body(kind: str, message: str, nearest: dict[str, Any] | None) -> dict[str, Any]:
    """Anthropic's error envelope; ``nearest`` (docs/authoring.md) rides beside the
    message."""
    error: dict[str, Any] = {"type": kind, "message": message}
    if nearest is not None:
        error["nearest"] = nearest
    return {"type": "error", "error": error}
