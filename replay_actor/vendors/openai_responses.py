"""OpenAI Responses API <-> the neutral request and response (docs/responses.md).

This module is the one place the Responses API's shapes (``POST .../responses``) are read
or written, in the five directions of the :class:`~replay_actor.vendors.Vendor` contract:

- a request body -> the neutral request (``read_body``): the ``input`` items become the
  chat-like neutral messages (``instructions`` a leading system message, ``function_call``
  items an assistant's ``tool_calls``, ``function_call_output`` items ``tool`` messages),
  so one conversation hashes alike through chat completions and through Responses;
- the neutral response -> a ``response`` object (``response_body``) or its server-sent
  events ``response.created`` ... ``response.completed`` (``stream_body``);
- the neutral request -> a live body (``to_body``) and the live answer -> the neutral
  response (``from_response``), for the ``openai-responses`` live adapter.

Multi-turn state: the API lets a request name an earlier answer (``previous_response_id``)
instead of resending the conversation. A :class:`OpenAIResponses` object remembers, per
response id it served, the conversation that answer ended (in memory, bounded by
:data:`TRANSCRIPTS`, least recently used first out) and expands the id from there; an id
it never served (or has forgotten) is a ``RequestError`` naming it. One object is made
per serving provider (``vendors.make_vendor``), so the memory is that provider's.

Ids: the response id is ``resp_`` + 24 hex characters of a sha256 over the neutral
response, the number of messages it answered and an occurrence number that tells apart
different conversations that ended in the same answer (docs/responses.md, "Ids");
item ids (``msg_``, ``fc_``) derive from the response id and the item's position. No id
is derived from the request or its hash, so nothing private crosses in an id.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from typing import Any, Final

import msgspec

from .._canonical import canonical_json
from .._errors import RequestError
from .._response import Response
from ._common import (
    NOT_HASHED,
    MalformedResponse,
    VendorCall,
    canonical_arguments,
    collapse_content,
    error_envelope,
    refuse_unfaithful,
)
from ._endpoint import LiveEndpoint
from .openai import LIVE as CHAT_LIVE

__all__ = [
    "LIVE",
    "NAME",
    "TRANSCRIPTS",
    "OpenAIResponses",
    "ResponsesCall",
    "from_response",
    "to_body",
]

NAME: Final = "openai-responses"
#: Where the ``openai-responses`` live adapter sends a request: the ``openai`` adapter's
#: base URL and bearer key, another path.
LIVE: Final[LiveEndpoint] = msgspec.structs.replace(
    CHAT_LIVE, adapter="OpenAIResponsesAdapter", shape="a Responses API response", path="/responses"
)
#: How many served responses one vendor object remembers for ``previous_response_id``
#: (least recently used forgotten first).
TRANSCRIPTS: Final = 2048

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
_CHOICE_WORDS: Final = frozenset({"auto", "none", "required"})
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
_encode: Final = msgspec.json.encode


_NAME: Final = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")


def _name(value: Any) -> str:
    """``value`` quoted when it is a short identifier (a type name, an id), for an error
    message; anything else could be a payload and is not repeated."""
    if type(value) is str and _NAME.match(value):
        return repr(value)
    return "(not an identifier)"


def _hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _clean(item: dict[str, Any]) -> dict[str, Any]:
    """``item`` without keys set to null: the API reads a null optional field as absent,
    and an output item sent back through the SDK's ``model_dump()`` carries several."""
    if None in item.values():
        return {k: v for k, v in item.items() if v is not None}
    return item


# -- vendor body -> neutral request -------------------------------------------------------


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
    return _clean(part)


def _content(content: Any, where: str) -> Any:
    if type(content) is list:
        return collapse_content([_part(p, f"{where}[{j}]") for j, p in enumerate(content)])
    return content


def _extra(item: dict[str, Any], allowed: frozenset[str], where: str) -> None:
    extra = sorted(set(item) - allowed)
    if extra:
        raise RequestError(f"{where}.{extra[0]} cannot be replayed")


def _carry(message: dict[str, Any] | None, reasoning: list[dict[str, Any]]) -> None:
    """Put ``reasoning`` items (emptied here) on assistant ``message``, unhashed (see
    ``_items``); with no assistant message to carry them they go, as before."""
    if reasoning and message is not None:
        carried = message.setdefault("reasoning", {"vendor": NAME, "items": []})
        carried["items"].extend(reasoning)
    reasoning.clear()


def _items(items: list[Any], where: str) -> list[dict[str, Any]]:  # noqa: PLR0912
    """Responses input items as neutral messages (function calls that follow an
    assistant message, or each other, join that message's ``tool_calls``).

    ``reasoning`` items are the model's own output: not hashed, they ride as the
    unhashed ``reasoning`` of the assistant message their run of output items makes
    (the one that follows them, or failing that the one they follow), for ``to_body``
    to send back before that message's items (docs/request.md, "Reasoning sent back").
    """
    out: list[dict[str, Any]] = []
    # The assistant message consecutive function_call items merge into, if any.
    open_assistant: dict[str, Any] | None = None
    # Reasoning items waiting for the assistant message of their run.
    reasoning: list[dict[str, Any]] = []
    for i, raw in enumerate(items):
        at = f"{where}[{i}]"
        if type(raw) is not dict:
            raise RequestError(f"{at} must be an object")
        item = _clean(raw)
        kind = item.get("type", "message")
        if kind == "message":
            _extra(item, _MESSAGE_KEYS, at)
            raw_role = item.get("role")
            role = _ROLES.get(raw_role) if type(raw_role) is str else None
            if role is None:
                raise RequestError(f"{at}.role must be user, assistant, system or developer")
            message: dict[str, Any] = {"role": role}
            if "content" in item:
                message["content"] = _content(item["content"], f"{at}.content")
            _carry(open_assistant if role != "assistant" else message, reasoning)
            out.append(message)
            open_assistant = message if role == "assistant" else None
        elif kind == "function_call":
            _extra(item, _CALL_KEYS, at)
            arguments = item.get("arguments")
            if type(arguments) is not str:
                raise RequestError(f"{at}.arguments must be a string")
            call = {
                "id": item.get("call_id"),
                "name": item.get("name"),
                "arguments": canonical_arguments(arguments),
            }
            if open_assistant is None:
                open_assistant = {"role": "assistant"}
                out.append(open_assistant)
            _carry(open_assistant, reasoning)
            open_assistant.setdefault("tool_calls", []).append(call)
        elif kind == "function_call_output":
            _extra(item, _OUTPUT_KEYS, at)
            _carry(open_assistant, reasoning)
            tool: dict[str, Any] = {"role": "tool", "tool_call_id": item.get("call_id")}
            if "output" in item:
                tool["content"] = _content(item["output"], f"{at}.output")
            out.append(tool)
            open_assistant = None
        elif kind == "reasoning":
            # The model's own reasoning sent back: decided by the earlier turns, so not
            # hashed (docs/request.md, "Reasoning sent back"); it does not break a run of
            # the assistant's items either.
            reasoning.append(item)
        elif kind == "item_reference":
            raise RequestError(f"{at} is an item_reference; send the item itself to replay")
        else:
            raise RequestError(f"{at}.type {_name(kind)} cannot be replayed (built-in tool item)")
    _carry(open_assistant, reasoning)
    return out


def _tools(tools: list[Any]) -> list[dict[str, Any]]:
    builtin = [
        _name(t.get("type") if type(t) is dict else None).strip("'")
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
        tool = _clean(raw)
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
            raise RequestError(f"tool_choice of type {_name(kind)} cannot be replayed")
    return choice


def _text(text: Any, request: dict[str, Any], params: dict[str, Any]) -> None:
    """``text.format`` -> the ``response_format`` a chat call with that schema sends;
    ``text.verbosity`` -> chat's ``verbosity`` parameter."""
    if type(text) is not dict:
        raise RequestError("text must be an object")
    text = _clean(text)
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
        schema = {k: v for k, v in _clean(fmt).items() if k != "type"}
        _extra(schema, frozenset({"name", "schema", "strict", "description"}), "text.format")
        request["response_format"] = {"type": "json_schema", "json_schema": schema}
        return
    raise RequestError(f"text.format of type {_name(kind)} cannot be replayed")


def _reasoning_params(reasoning: Any, params: dict[str, Any]) -> None:
    if type(reasoning) is not dict:
        raise RequestError("reasoning must be an object")
    reasoning = _clean(reasoning)
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
        current = _items(raw, "input")
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
        return _items(instructions, "instructions")
    raise RequestError("instructions must be a string or an array of items")


# -- neutral response -> vendor response --------------------------------------------------


def _usage(response: Response) -> dict[str, Any]:
    usage = response.usage
    if usage is None:
        usage = {}
    if "input_tokens" in usage or "output_tokens" in usage:
        out = dict(usage)
    else:
        # Recorded through chat completions (or written by hand that way).
        out = {
            "input_tokens": usage.get("prompt_tokens", 0),
            "output_tokens": usage.get("completion_tokens", 0),
        }
    out.setdefault("input_tokens", 0)
    out.setdefault("output_tokens", 0)
    out.setdefault("total_tokens", out["input_tokens"] + out["output_tokens"])
    out.setdefault("input_tokens_details", {"cached_tokens": 0, "cache_write_tokens": 0})
    out.setdefault("output_tokens_details", {"reasoning_tokens": 0})
    return out


def _output(response: Response, rid: str) -> list[dict[str, Any]]:
    """The output items, with ids derived from the response id and position."""
    items: list[dict[str, Any]] = []
    if response.reasoning is not None and response.reasoning.vendor == NAME:
        items.extend(response.reasoning.items)
    calls = response.tool_calls
    if response.refusal is not None:
        part: dict[str, Any] = {"type": "refusal", "refusal": response.refusal}
    elif response.content is not None or not calls:
        part = {
            "type": "output_text",
            "text": response.content or "",
            "annotations": [],
            "logprobs": [],
        }
    else:
        part = {}
    if part:
        items.append(
            {
                "id": f"msg_{_hex(f'{rid}:{len(items)}')}",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [part],
            }
        )
    seen: set[str] = set()
    for call in calls:
        position = len(items)
        call_id = call.id
        if not call_id or call_id in seen:
            # The stream helper tells calls apart by call_id: never empty, never twice.
            call_id = f"call_{_hex(f'{rid}:{position}:call')}"
        seen.add(call_id)
        items.append(
            {
                "id": f"fc_{_hex(f'{rid}:{position}')}",
                "type": "function_call",
                "status": "completed",
                "call_id": call_id,
                "name": call.name,
                "arguments": call.arguments,
            }
        )
    return items


def _status(response: Response) -> tuple[str, dict[str, Any] | None]:
    if response.finish_reason == "length":
        return "incomplete", {"reason": "max_output_tokens"}
    if response.finish_reason == "content_filter":
        return "incomplete", {"reason": "content_filter"}
    return "completed", None


def _response_object(
    response: Response, call: VendorCall, rid: str, output: list[dict[str, Any]]
) -> dict[str, Any]:
    echo: dict[str, Any] = call.echo if isinstance(call, ResponsesCall) else {}
    status, incomplete = _status(response)
    body: dict[str, Any] = {
        "id": rid,
        "object": "response",
        "created_at": response.created,
        "status": status,
        "error": None,
        "incomplete_details": incomplete,
        "instructions": None,
        "max_output_tokens": None,
        "metadata": {},
        "model": call.model,
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": True,
        "temperature": None,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": None,
        "truncation": "disabled",
        "usage": _usage(response),
    }
    body.update(echo)
    return body


# -- the vendor object --------------------------------------------------------------------


class _Served(msgspec.Struct):
    """What one served response id stands for."""

    request: dict[str, Any]
    response: Response
    #: The neutral conversation it ended (input without instructions + the answer).
    conversation: list[dict[str, Any]]


class OpenAIResponses:
    """The :class:`~replay_actor.vendors.Vendor` for the OpenAI Responses API, with the
    memory of the responses it served (``previous_response_id``). Thread-safe: a sync
    transport may be shared by threads."""

    name: Final = NAME
    routes: Final = (re.compile(r"/responses/?$"),)
    live: Final = LIVE

    def __init__(self, capacity: int = TRANSCRIPTS) -> None:
        self._served: OrderedDict[str, _Served] = OrderedDict()
        self._capacity = capacity
        self._lock = threading.Lock()

    # -- body -> neutral

    def read_body(self, body: Any, path: str = "") -> VendorCall:  # noqa: PLR0912
        """The neutral request and call options for a Responses request body.

        Raises ``RequestError`` naming the field for a body replay cannot stand in for
        (built-in tools, server-side conversations, an unknown ``previous_response_id``).
        """
        if type(body) is not dict:
            raise RequestError("the request body must be a JSON object")
        for key, why in _REFUSED.items():
            if body.get(key) is not None:
                raise RequestError(why)
        if body.get("background") is True:
            raise RequestError("background cannot be replayed (answers are immediate)")
        refuse_unfaithful(body)
        previous_id = body.get("previous_response_id")
        previous: dict[str, Any] | None = None
        if previous_id is not None:
            previous = self._recall(previous_id)
        lead = _instructions(body)
        messages = [*lead, *_expand(previous, body)]
        request: dict[str, Any] = {"messages": messages}
        params = {k: v for k, v in body.items() if k not in _OWNED}
        tools = body.get("tools")
        if tools is not None:
            if type(tools) is not list:
                raise RequestError("tools must be an array")
            if tools:
                request["tools"] = _tools(tools)
        # A tool_choice without tools changes nothing the model can do: not hashed.
        if body.get("tool_choice") is not None and "tools" in request:
            request["tool_choice"] = _tool_choice(body["tool_choice"])
        if body.get("text") is not None:
            _text(body["text"], request, params)
        if body.get("max_output_tokens") is not None:
            params["max_tokens"] = body["max_output_tokens"]
        if body.get("reasoning") is not None:
            _reasoning_params(body["reasoning"], params)
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

    def _recall(self, previous_id: Any) -> dict[str, Any]:
        if type(previous_id) is not str:
            raise RequestError("previous_response_id must be a string")
        with self._lock:
            served = self._served.get(previous_id)
            if served is not None:
                self._served.move_to_end(previous_id)
        if served is None:
            raise RequestError(
                f"previous_response_id {_name(previous_id)} was not served by this replay "
                "provider (or is no longer remembered); send the whole conversation as input"
            )
        return {"conversation": served.conversation}

    # -- neutral -> response

    def _serve(self, response: Response, call: VendorCall) -> tuple[str, list[dict[str, Any]]]:
        """The response id and output items for ``response`` answering ``call``,
        remembered for a later ``previous_response_id``."""
        lead = call.lead if isinstance(call, ResponsesCall) else 0
        # The answer and its position in the conversation; never the request itself. A
        # conversation continued by previous_response_id expands to the same messages
        # as one resent whole, so both get the same ids.
        position = len(call.request["messages"])
        seed = hashlib.sha256(
            canonical_json({"position": position, "response": msgspec.to_builtins(response)})
        ).hexdigest()
        with self._lock:
            for occurrence in range(len(self._served) + 1):
                rid = f"resp_{_hex(f'{seed}:{occurrence}')}"
                known = self._served.get(rid)
                if known is None or (known.request == call.request and known.response == response):
                    break
            output = _output(response, rid)
            if known is None:
                conversation = [*call.request["messages"][lead:], *_items(output, "output")]
                self._served[rid] = _Served(call.request, response, conversation)
                while len(self._served) > self._capacity:
                    self._served.popitem(last=False)
            else:
                self._served.move_to_end(rid)
        return rid, output

    def response_body(self, response: Response, call: VendorCall) -> dict[str, Any]:
        rid, output = self._serve(response, call)
        return _response_object(response, call, rid, output)

    def stream_body(self, response: Response, call: VendorCall) -> bytes:
        rid, output = self._serve(response, call)
        final = _response_object(response, call, rid, output)
        return _events(final)

    def error_body(self, kind: str, message: str, nearest: dict[str, Any] | None) -> dict[str, Any]:
        return error_envelope(kind, message, nearest)

    # -- live: the module's functions, defined below

    def to_body(self, request: dict[str, Any], model: str) -> dict[str, Any]:
        return to_body(request, model)

    def from_response(self, data: Any) -> dict[str, Any]:
        return from_response(data)


# -- neutral response -> server-sent events -----------------------------------------------


def _events(final: dict[str, Any]) -> bytes:
    """``final`` as the API streams it: ``response.created``, ``response.in_progress``,
    each output item added, filled and done, then ``response.completed`` (or
    ``response.incomplete``) carrying ``final`` itself, so the SDK's ``responses.stream``
    helper ends with exactly the non-streamed object."""
    out: list[bytes] = []

    def emit(kind: str, **fields: Any) -> None:
        event = {"type": kind, "sequence_number": len(out), **fields}
        out.append(b"event: " + kind.encode() + b"\ndata: " + _encode(event) + b"\n\n")

    start = {**final, "status": "in_progress", "output": [], "usage": None}
    start["incomplete_details"] = None
    emit("response.created", response=start)
    emit("response.in_progress", response=start)
    for index, item in enumerate(final["output"]):
        kind = item.get("type")
        if kind == "message":
            item_id = item["id"]
            emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "content": []},
            )
            for c, part in enumerate(item["content"]):
                where = {"item_id": item_id, "output_index": index, "content_index": c}
                if part["type"] == "refusal":
                    emit("response.content_part.added", **where, part={**part, "refusal": ""})
                    emit("response.refusal.delta", **where, delta=part["refusal"])
                    emit("response.refusal.done", **where, refusal=part["refusal"])
                else:
                    emit("response.content_part.added", **where, part={**part, "text": ""})
                    emit("response.output_text.delta", **where, delta=part["text"], logprobs=[])
                    emit("response.output_text.done", **where, text=part["text"], logprobs=[])
                emit("response.content_part.done", **where, part=part)
        elif kind == "function_call":
            where = {"item_id": item["id"], "output_index": index}
            emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "arguments": ""},
            )
            emit("response.function_call_arguments.delta", **where, delta=item["arguments"])
            emit(
                "response.function_call_arguments.done",
                **where,
                name=item["name"],
                arguments=item["arguments"],
            )
        else:
            # Reasoning items (replayed verbatim) arrive whole.
            emit("response.output_item.added", output_index=index, item=item)
        emit("response.output_item.done", output_index=index, item=item)
    last = "response.completed" if final["status"] == "completed" else "response.incomplete"
    emit(last, response=final)
    return b"".join(out)


# -- neutral request -> live body, live answer -> neutral response ------------------------


def _live_content(content: Any, role: str) -> Any:
    if type(content) is not list:
        return content
    text_type = "output_text" if role == "assistant" else "input_text"
    parts: list[Any] = []
    for part in content:
        if type(part) is dict and part.get("type") == "text":
            parts.append({"type": text_type, "text": part.get("text", "")})
        elif type(part) is dict and part.get("type") == "image_url":
            image = part.get("image_url") or {}
            live = {"type": "input_image", "image_url": image.get("url")}
            live["detail"] = image.get("detail", "auto")
            parts.append(live)
        else:
            parts.append(part)
    return parts


def _live_input(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        content = message.get("content")
        reasoning = message.get("reasoning")
        if type(reasoning) is dict and reasoning.get("vendor") == NAME:
            # The model's own reasoning items, verbatim, before the output items they
            # led to (another vendor's reasoning means nothing to this API).
            items.extend(reasoning.get("items") or ())
        if role == "tool":
            output = _live_content(content, "user")
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.get("tool_call_id"),
                    "output": output if output is not None else "",
                }
            )
            continue
        if content is not None or not message.get("tool_calls"):
            items.append(
                {
                    "type": "message",
                    "role": role,
                    "content": _live_content(content if content is not None else "", role),
                }
            )
        for call in message.get("tool_calls") or ():
            items.append(
                {
                    "type": "function_call",
                    "call_id": call["id"],
                    "name": call["name"],
                    "arguments": call["arguments"],
                }
            )
    return items


_RESERVED_PARAMS: Final = frozenset({"model", "input", "instructions", "tools", "tool_choice"})


def to_body(request: dict[str, Any], model: str) -> dict[str, Any]:  # noqa: PLR0912
    """The Responses body for a plain normalised neutral request (``params.max_tokens`` ->
    ``max_output_tokens``, ``reasoning_effort`` -> ``reasoning.effort``, ``verbosity`` ->
    ``text.verbosity``, ``response_format`` -> ``text.format``; other params verbatim)."""
    params: dict[str, Any] = dict(request.get("params", {}))
    clash = sorted(_RESERVED_PARAMS.intersection(params))
    if clash:
        raise RequestError(f"params may not set {clash[0]!r} (the adapter owns it)")
    if "stop" in params:
        raise RequestError("params.stop cannot be sent to the Responses API (it has no stop)")
    body: dict[str, Any] = {}
    if "max_tokens" in params:
        body["max_output_tokens"] = params.pop("max_tokens")
    reasoning = dict(params.pop("reasoning", None) or {})
    if "reasoning_effort" in params:
        reasoning["effort"] = params.pop("reasoning_effort")
    if reasoning:
        body["reasoning"] = reasoning
    text: dict[str, Any] = {}
    if "verbosity" in params:
        text["verbosity"] = params.pop("verbosity")
    fmt = request.get("response_format")
    if fmt is not None:
        if fmt.get("type") == "json_schema" and isinstance(fmt.get("json_schema"), dict):
            text["format"] = {"type": "json_schema", **fmt["json_schema"]}
        else:
            text["format"] = fmt
    body.update(params)
    body["model"] = model
    body["input"] = _live_input(request["messages"])
    if request.get("tools"):
        body["tools"] = [
            {
                "type": "function",
                "name": tool["name"],
                **({"description": tool["description"]} if "description" in tool else {}),
                "parameters": tool.get("parameters") or {"type": "object", "properties": {}},
                "strict": bool(tool.get("strict")),
            }
            for tool in request["tools"]
        ]
    choice = request.get("tool_choice")
    if choice is not None:
        if isinstance(choice, str) and choice not in _CHOICE_WORDS:
            choice = {"type": "function", "name": choice}
        elif isinstance(choice, dict) and set(choice) == {"name"}:
            choice = {"type": "function", "name": choice["name"]}
        body["tool_choice"] = choice
    if text:
        body["text"] = text
    return body


def from_response(data: Any) -> dict[str, Any]:  # noqa: PLR0912
    """The neutral response for a decoded Responses ``response`` object, keeping a
    refusal and the reasoning items verbatim; ``MalformedResponse`` for another shape
    or an output item a neutral response cannot hold (a built-in tool's call)."""
    if not isinstance(data, dict) or not isinstance(data.get("output"), list):
        raise MalformedResponse("the body is not a response object with an output array")
    texts: list[str] = []
    refusals: list[str] = []
    calls: list[dict[str, str]] = []
    reasoning: list[dict[str, Any]] = []
    for item in data["output"]:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "message":
            for part in item.get("content") or ():
                if not isinstance(part, dict):
                    raise MalformedResponse("a message content part is not an object")
                if part.get("type") == "output_text" and isinstance(part.get("text"), str):
                    texts.append(part["text"])
                elif part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
                    refusals.append(part["refusal"])
        elif kind == "function_call":
            arguments = item.get("arguments", "")
            if not isinstance(item.get("name"), str) or not isinstance(arguments, str):
                raise MalformedResponse("a function_call item has no name or arguments")
            call_id = item.get("call_id")
            calls.append(
                {
                    "id": call_id if isinstance(call_id, str) else "",
                    "name": item["name"],
                    "arguments": arguments,
                }
            )
        elif kind == "reasoning":
            reasoning.append(item)
        else:
            raise MalformedResponse(f"an output item of type {_name(kind)} has no neutral form")
    status = data.get("status")
    details = data.get("incomplete_details")
    reason = details.get("reason") if isinstance(details, dict) else None
    if status == "incomplete" and reason == "max_output_tokens":
        finish = "length"
    elif status == "incomplete" and reason == "content_filter":
        finish = "content_filter"
    else:
        finish = "tool_calls" if calls else "stop"
    usage = data.get("usage")
    created = data.get("created_at")
    out: dict[str, Any] = {
        "content": "".join(texts) if texts else None,
        "tool_calls": calls,
        "finish_reason": finish,
        "usage": usage if isinstance(usage, dict) else None,
    }
    if isinstance(created, int | float) and not isinstance(created, bool):
        out["created"] = int(created)
    if refusals:
        out["refusal"] = "".join(refusals)
    if reasoning:
        out["reasoning"] = {"vendor": NAME, "items": reasoning}
    return out
