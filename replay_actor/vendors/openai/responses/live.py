"""The neutral request -> a live Responses body (``to_body``) and the live ``response``
object -> the neutral response (``from_response``): the ``openai-responses`` adapter's
mapping, and where that adapter sends the body (``LIVE``).

``params.max_tokens`` becomes ``max_output_tokens``, ``reasoning_effort``
``reasoning.effort``, ``verbosity`` ``text.verbosity`` and ``response_format``
``text.format``; other params go verbatim. Reasoning items recorded from this API go
back before the output items they led to. A live answer keeps a refusal and its
reasoning items verbatim; an output item a neutral response cannot hold (a built-in
tool's call) fails the call.
"""

from __future__ import annotations

from typing import Any, Final

from ...._errors import RequestError
from ..._common import MalformedResponse, identifier
from ..._endpoint import sibling
from ..chat import LIVE as CHAT_LIVE
from ._fields import NAME

__all__ = ["LIVE", "from_response", "to_body"]

#: Where the ``openai-responses`` live adapter sends a request: the ``openai`` adapter's
#: base URL and bearer key, another path.
LIVE: Final = sibling(
    CHAT_LIVE,
    "OpenAIResponsesAdapter",
    "a Responses API response",
    "/responses",
    kinds=CHAT_LIVE.kinds,
)

_CHOICE_WORDS: Final = frozenset({"auto", "none", "required"})


_RESERVED_PARAMS: Final = frozenset({"model", "input", "instructions", "tools", "tool_choice"})


# -- neutral request -> live body -------------------------------------------------------------


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


def _moved_params(
    params: dict[str, Any], response_format: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The body's fields and its ``text`` object made of the params the Responses API
    spells otherwise (taken out of ``params``) and of ``response_format``."""
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
    if response_format is not None:
        if response_format.get("type") == "json_schema" and isinstance(
            response_format.get("json_schema"), dict
        ):
            text["format"] = {"type": "json_schema", **response_format["json_schema"]}
        else:
            text["format"] = response_format
    return body, text


def _live_tool(tool: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "name": tool["name"],
        **({"description": tool["description"]} if "description" in tool else {}),
        "parameters": tool.get("parameters") or {"type": "object", "properties": {}},
        "strict": bool(tool.get("strict")),
    }


def _live_choice(choice: Any) -> Any:
    if isinstance(choice, str) and choice not in _CHOICE_WORDS:
        return {"type": "function", "name": choice}
    if isinstance(choice, dict) and set(choice) == {"name"}:
        return {"type": "function", "name": choice["name"]}
    return choice


def to_body(request: dict[str, Any], model: str) -> dict[str, Any]:
    """The Responses body for a plain normalised neutral request (``params.max_tokens`` ->
    ``max_output_tokens``, ``reasoning_effort`` -> ``reasoning.effort``, ``verbosity`` ->
    ``text.verbosity``, ``response_format`` -> ``text.format``; other params verbatim)."""
    params: dict[str, Any] = dict(request.get("params", {}))
    clash = sorted(_RESERVED_PARAMS.intersection(params))
    if clash:
        raise RequestError(f"params may not set {clash[0]!r} (the adapter owns it)")
    if "stop" in params:
        raise RequestError("params.stop cannot be sent to the Responses API (it has no stop)")
    body, text = _moved_params(params, request.get("response_format"))
    body.update(params)
    body["model"] = model
    body["input"] = _live_input(request["messages"])
    if request.get("tools"):
        body["tools"] = [_live_tool(tool) for tool in request["tools"]]
    choice = request.get("tool_choice")
    if choice is not None:
        body["tool_choice"] = _live_choice(choice)
    if text:
        body["text"] = text
    if "top_logprobs" in body:
        # Asked for, they are sent back only when included: a recording keeps them.
        body["include"] = ["message.output_text.logprobs"]
    return body


def _read_logprobs(output: list[Any]) -> list[Any]:
    """The token log probabilities of the output's text parts, in order."""
    tokens: list[Any] = []
    for item in output:
        if isinstance(item, dict) and item.get("type") == "message":
            for part in item.get("content") or ():
                found = part.get("logprobs") if isinstance(part, dict) else None
                if isinstance(found, list) and part.get("type") == "output_text":
                    tokens += found
    return tokens


# -- live answer -> neutral response --------------------------------------------------------


def _read_output(
    output: list[Any],
) -> tuple[list[str], list[str], list[dict[str, str]], list[dict[str, Any]]]:
    """The texts, refusals, calls and reasoning items of a response's output items."""
    texts: list[str] = []
    refusals: list[str] = []
    calls: list[dict[str, str]] = []
    reasoning: list[dict[str, Any]] = []
    for item in output:
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
            calls.append(_read_call(item))
        elif kind == "reasoning":
            reasoning.append(item)
        else:
            raise MalformedResponse(
                f"an output item of type {identifier(kind)} has no neutral form"
            )
    return texts, refusals, calls, reasoning


def _read_call(item: dict[str, Any]) -> dict[str, str]:
    arguments = item.get("arguments", "")
    if not isinstance(item.get("name"), str) or not isinstance(arguments, str):
        raise MalformedResponse("a function_call item has no name or arguments")
    call_id = item.get("call_id")
    return {
        "id": call_id if isinstance(call_id, str) else "",
        "name": item["name"],
        "arguments": arguments,
    }


def _finish(data: dict[str, Any], calls: list[dict[str, str]]) -> str:
    status = data.get("status")
    details = data.get("incomplete_details")
    reason = details.get("reason") if isinstance(details, dict) else None
    if status == "incomplete" and reason == "max_output_tokens":
        return "length"
    if status == "incomplete" and reason == "content_filter":
        return "content_filter"
    return "tool_calls" if calls else "stop"


def from_response(data: Any) -> dict[str, Any]:
    """The neutral response for a decoded Responses ``response`` object, keeping a
    refusal and the reasoning items verbatim; ``MalformedResponse`` for another shape
    or an output item a neutral response cannot hold (a built-in tool's call)."""
    if not isinstance(data, dict) or not isinstance(data.get("output"), list):
        raise MalformedResponse("the body is not a response object with an output array")
    texts, refusals, calls, reasoning = _read_output(data["output"])
    usage = data.get("usage")
    created = data.get("created_at")
    out: dict[str, Any] = {
        "content": "".join(texts) if texts else None,
        "tool_calls": calls,
        "finish_reason": _finish(data, calls),
        "usage": usage if isinstance(usage, dict) else None,
    }
    if isinstance(created, int | float) and not isinstance(created, bool):
        out["created"] = int(created)
    if refusals:
        out["refusal"] = "".join(refusals)
    if reasoning:
        out["reasoning"] = {"vendor": NAME, "items": reasoning}
    logprobs = _read_logprobs(data["output"])
    if logprobs:
        out["logprobs"] = {"content": logprobs}  # chat's form, which every shape reads
    return out
