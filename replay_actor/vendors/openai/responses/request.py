"""A Responses request body -> the neutral request (docs/responses.md).

The ``input`` items become the chat-like neutral messages (``instructions`` a leading
system message, ``function_call`` items an assistant's ``tool_calls``,
``function_call_output`` items ``tool`` messages), so one conversation hashes alike
through chat completions and through Responses; ``text.format``, ``max_output_tokens``
and ``reasoning.effort`` take chat's spellings. A ``previous_response_id`` is expanded
by the caller's ``recall`` (the vendor object's memory of what it served). Built-in
tools and server-side state are refused by name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgspec

from ...._errors import RequestError
from ..._common import (
    NOT_HASHED,
    VendorCall,
    canonical_arguments,
    collapse_content,
    identifier,
    read_tools,
    refuse_unfaithful,
)
from ._fields import NAME, without_nulls

__all__ = ["ResponsesCall", "read_body", "read_items"]

# Keys this mapping reads itself: never copied into params.
_OWNED: Final = NOT_HASHED | {
    "input",
    "instructions",
    "tools",
    "tool_choice",
    "text",
    "max_output_tokens",
    "previous_response_id",
    "reasoning",
    "background",
}
#: Body keys naming server-side state or features replay cannot stand in for.
_REFUSED: Final = {
    "conversation": "conversation (server-side conversation state) cannot be replayed; "
    "send the input items, or previous_response_id",
    "prompt": "prompt (a stored prompt template) cannot be replayed; send its text",
}
#: Echoed into the response object as the API does (never hashed for that).
_ECHOED: Final = (
    "instructions",
    "max_output_tokens",
    "max_tool_calls",
    "metadata",
    "parallel_tool_calls",
    "previous_response_id",
    "prompt_cache_key",
    "prompt_cache_retention",
    "reasoning",
    "safety_identifier",
    "service_tier",
    "store",
    "temperature",
    "text",
    "tool_choice",
    "tools",
    "top_p",
    "truncation",
    "user",
)
_ROLES: Final = {
    "user": "user",
    "assistant": "assistant",
    "system": "system",
    "developer": "system",
}
_MESSAGE_KEYS: Final = frozenset({"type", "role", "content", "id", "status", "phase"})
_CALL_KEYS: Final = frozenset({"type", "call_id", "name", "arguments", "id", "status"})
_OUTPUT_KEYS: Final = frozenset({"type", "call_id", "output", "id", "status"})
_TOOL_KEYS: Final = frozenset({"type", "name", "description", "parameters", "strict"})


def _part(part: Any, where: str) -> Any:
    """One content part in the chat-completions spelling, so both shapes hash alike."""
    if type(part) is not dict:
        return part
    kind = part.get("type")
    if kind in ("input_text", "output_text") and type(part.get("text")) is str:
        # annotations and logprobs decorate the model's own output: not the message.
        rest = set(part) - {"type", "text", "annotations", "logprobs"}
        if not rest:
            return {"type": "text", "text": part["text"]}
    elif (
        kind == "refusal"
        and type(part.get("refusal")) is str
        and set(part)
        == {
            "type",
            "refusal",
        }
    ):
        # A refusal sent back is what the model said (as in chat completions).
        return {"type": "text", "text": part["refusal"]}
    elif kind == "input_image" and type(part.get("image_url")) is str:
        image: dict[str, Any] = {"url": part["image_url"]}
        if part.get("detail") is not None:
            image["detail"] = part["detail"]
        if not set(part) - {"type", "image_url", "detail"}:
            return {"type": "image_url", "image_url": image}
    return without_nulls(part)


def _content(content: Any, where: str) -> Any:
    if type(content) is list:
        return collapse_content([_part(p, f"{where}[{j}]") for j, p in enumerate(content)])
    return content


def _extra(item: dict[str, Any], allowed: frozenset[str], where: str) -> None:
    extra = sorted(set(item) - allowed)
    if extra:
        raise RequestError(f"{where}.{extra[0]} cannot be replayed")


class _Conversation:
    """Responses items being read into neutral messages (function calls that follow an
    assistant message, or each other, join that message's ``tool_calls``).

    ``reasoning`` items are the model's own output: not hashed, they ride as the
    unhashed ``reasoning`` of the assistant message their run of output items makes
    (the one that follows them, or failing that the one they follow), for ``to_body``
    to send back before that message's items (docs/request.md, "Reasoning sent back").
    """

    def __init__(self) -> None:
        self.out: list[dict[str, Any]] = []
        #: The assistant message consecutive function_call items merge into, if any.
        self.open: dict[str, Any] | None = None
        #: Reasoning items waiting for the assistant message of their run.
        self.reasoning: list[dict[str, Any]] = []

    def carry(self, message: dict[str, Any] | None) -> None:
        """Put the waiting reasoning items on assistant ``message``, unhashed; with no
        assistant message to carry them they go, as before."""
        if self.reasoning and message is not None:
            carried = message.setdefault("reasoning", {"vendor": NAME, "items": []})
            carried["items"].extend(self.reasoning)
        self.reasoning.clear()

    def message(self, item: dict[str, Any], at: str) -> None:
        _extra(item, _MESSAGE_KEYS, at)
        raw_role = item.get("role")
        role = _ROLES.get(raw_role) if type(raw_role) is str else None
        if role is None:
            raise RequestError(f"{at}.role must be user, assistant, system or developer")
        message: dict[str, Any] = {"role": role}
        if "content" in item:
            message["content"] = _content(item["content"], f"{at}.content")
        self.carry(self.open if role != "assistant" else message)
        self.out.append(message)
        self.open = message if role == "assistant" else None

    def function_call(self, item: dict[str, Any], at: str) -> None:
        _extra(item, _CALL_KEYS, at)
        arguments = item.get("arguments")
        if type(arguments) is not str:
            raise RequestError(f"{at}.arguments must be a string")
        call = {
            "id": item.get("call_id"),
            "name": item.get("name"),
            "arguments": canonical_arguments(arguments),
        }
        if self.open is None:
            self.open = {"role": "assistant"}
            self.out.append(self.open)
        self.carry(self.open)
        self.open.setdefault("tool_calls", []).append(call)

    def function_call_output(self, item: dict[str, Any], at: str) -> None:
        _extra(item, _OUTPUT_KEYS, at)
        self.carry(self.open)
        tool: dict[str, Any] = {"role": "tool", "tool_call_id": item.get("call_id")}
        if "output" in item:
            tool["content"] = _content(item["output"], f"{at}.output")
        self.out.append(tool)
        self.open = None

    def reasoning_item(self, item: dict[str, Any], at: str) -> None:
        # The model's own reasoning sent back: decided by the earlier turns, so not
        # hashed (docs/request.md, "Reasoning sent back"); it does not break a run of
        # the assistant's items either.
        self.reasoning.append(item)


_READERS: Final = {
    "message": _Conversation.message,
    "function_call": _Conversation.function_call,
    "function_call_output": _Conversation.function_call_output,
    "reasoning": _Conversation.reasoning_item,
}


def read_items(items: list[Any], where: str) -> list[dict[str, Any]]:
    """Responses input (or output) items as neutral messages (see :class:`_Conversation`);
    ``where`` names the array in errors."""
    conversation = _Conversation()
    for i, raw in enumerate(items):
        at = f"{where}[{i}]"
        if type(raw) is not dict:
            raise RequestError(f"{at} must be an object")
        item = without_nulls(raw)
        kind = item.get("type", "message")
        read = _READERS.get(kind) if type(kind) is str else None
        if read is not None:
            read(conversation, item, at)
        elif kind == "item_reference":
            raise RequestError(f"{at} is an item_reference; send the item itself to replay")
        else:
            raise RequestError(
                f"{at}.type {identifier(kind)} cannot be replayed (built-in tool item)"
            )
    conversation.carry(conversation.open)
    return conversation.out


def _tools(tools: list[Any]) -> list[dict[str, Any]]:
    builtin = [
        identifier(t.get("type") if type(t) is dict else None).strip("'")
        for t in tools
        if type(t) is not dict or t.get("type") != "function"
    ]
    if builtin:
        raise RequestError(
            "built-in tools cannot be replayed: "
            + ", ".join(dict.fromkeys(builtin))
            + " (only function tools)"
        )
    out: list[dict[str, Any]] = []
    for i, raw in enumerate(tools):
        tool = without_nulls(raw)
        _extra(tool, _TOOL_KEYS, f"tools[{i}]")
        neutral = {k: v for k, v in tool.items() if k != "type"}
        if neutral.get("strict") is False:
            del neutral["strict"]
        out.append(neutral)
    return out


def _tool_choice(choice: Any) -> Any:
    if type(choice) is str:
        return choice
    if type(choice) is dict:
        kind = choice.get("type")
        if kind == "function" and set(choice) == {"type", "name"}:
            return {"name": choice["name"]}
        if kind not in ("allowed_tools",):
            raise RequestError(f"tool_choice of type {identifier(kind)} cannot be replayed")
    return choice


def _text(text: Any, request: dict[str, Any], params: dict[str, Any]) -> None:
    """``text.format`` -> the ``response_format`` a chat call with that schema sends;
    ``text.verbosity`` -> chat's ``verbosity`` parameter."""
    if type(text) is not dict:
        raise RequestError("text must be an object")
    text = without_nulls(text)
    _extra(text, frozenset({"format", "verbosity"}), "text")
    if "verbosity" in text:
        params["verbosity"] = text["verbosity"]
    fmt = text.get("format")
    if fmt is None:
        return
    if type(fmt) is not dict:
        raise RequestError("text.format must be an object")
    kind = fmt.get("type")
    if kind == "text" and set(fmt) == {"type"}:
        return  # the default: plain text
    if kind == "json_object" and set(fmt) == {"type"}:
        request["response_format"] = {"type": "json_object"}
        return
    if kind == "json_schema":
        schema = {k: v for k, v in without_nulls(fmt).items() if k != "type"}
        _extra(schema, frozenset({"name", "schema", "strict", "description"}), "text.format")
        request["response_format"] = {"type": "json_schema", "json_schema": schema}
        return
    raise RequestError(f"text.format of type {identifier(kind)} cannot be replayed")


def _reasoning_params(reasoning: Any, params: dict[str, Any]) -> None:
    if type(reasoning) is not dict:
        raise RequestError("reasoning must be an object")
    reasoning = without_nulls(reasoning)
    if "effort" in reasoning:
        # Chat completions says the same with reasoning_effort: one spelling in the hash.
        params["reasoning_effort"] = reasoning["effort"]
    rest = {k: v for k, v in reasoning.items() if k != "effort"}
    if rest:
        params["reasoning"] = rest


class ResponsesCall(VendorCall, frozen=True):
    """A Responses body read: the neutral request, plus what the answer echoes and where
    the conversation (without ``instructions``) starts in the neutral messages."""

    #: Request fields the ``response`` object echoes (as the API does).
    echo: dict[str, Any] = msgspec.field(default_factory=dict)
    #: How many leading neutral messages came from ``instructions`` (which an expanded
    #: ``previous_response_id`` does not carry over, as in the API).
    lead: int = 0


def _expand(previous: dict[str, Any] | None, body: dict[str, Any]) -> list[dict[str, Any]]:
    raw = body.get("input")
    if raw is None:
        current: list[dict[str, Any]] = []
    elif type(raw) is str:
        current = [{"role": "user", "content": raw}]
    elif type(raw) is list:
        current = read_items(raw, "input")
    else:
        raise RequestError("input must be a string or an array of items")
    if previous is None:
        return current
    history: list[dict[str, Any]] = previous["conversation"]
    return [*history, *current]


def _instructions(body: dict[str, Any]) -> list[dict[str, Any]]:
    instructions = body.get("instructions")
    if instructions is None:
        return []
    if type(instructions) is str:
        return [{"role": "system", "content": instructions}]
    if type(instructions) is list:
        return read_items(instructions, "instructions")
    raise RequestError("instructions must be a string or an array of items")


def _refuse(body: dict[str, Any]) -> None:
    """``RequestError`` for a body asking for what replay cannot stand in for."""
    for key, why in _REFUSED.items():
        if body.get(key) is not None:
            raise RequestError(why)
    if body.get("background") is True:
        raise RequestError("background cannot be replayed (answers are immediate)")
    refuse_unfaithful(body, logprobs=True)  # top_logprobs: said by output_text parts


def _read_options(body: dict[str, Any], request: dict[str, Any], params: dict[str, Any]) -> None:
    """``text``, ``max_output_tokens`` and ``reasoning`` in chat's spellings."""
    if body.get("text") is not None:
        _text(body["text"], request, params)
    if body.get("max_output_tokens") is not None:
        params["max_tokens"] = body["max_output_tokens"]
    if body.get("reasoning") is not None:
        _reasoning_params(body["reasoning"], params)


def read_body(body: Any, recall: Callable[[Any], dict[str, Any]]) -> ResponsesCall:
    """The neutral request and call options for a Responses request body;
    ``recall(previous_response_id)`` gives ``{"conversation": [...]}`` that id ended (or
    raises ``RequestError`` naming it).

    Raises ``RequestError`` naming the field for a body replay cannot stand in for
    (built-in tools, server-side conversations, an unknown ``previous_response_id``).
    """
    if type(body) is not dict:
        raise RequestError("the request body must be a JSON object")
    _refuse(body)
    previous_id = body.get("previous_response_id")
    previous = recall(previous_id) if previous_id is not None else None
    lead = _instructions(body)
    messages = [*lead, *_expand(previous, body)]
    request: dict[str, Any] = {"messages": messages}
    params = {k: v for k, v in body.items() if k not in _OWNED}
    read_tools(body, request, _tools, _tool_choice)
    _read_options(body, request, params)
    if params:
        request["params"] = params
    model = body.get("model")
    echo = {k: body[k] for k in _ECHOED if body.get(k) is not None}
    return ResponsesCall(
        request=request,
        model=model if type(model) is str else "",
        stream=body.get("stream") is True,
        echo=echo,
        lead=len(lead),
    )
