"""The neutral request -> a live ``generateContent`` body (``to_body``) and the live
answer -> the neutral response (``from_response``): the ``gemini`` adapter's mapping, and
where that adapter sends the body (``LIVE``).

Leading system messages become ``systemInstruction``; tool messages become
``functionResponse`` parts of one user turn (with the user message that follows), named
after the call they answer; a call id this mapping derived is left out. A live answer's
calls without an id get the derived one, and its thoughts and signatures become the
neutral ``reasoning``.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from ..._canonical import canonical_json
from ..._errors import RequestError
from ..._response import Unexpressible
from .._common import MalformedResponse, arguments_object, canonical_arguments
from .._endpoint import EndpointOption, LiveEndpoint
from .._turns import TurnForms, split_system, turns
from ._fields import JSON_MIME, NAME, PARAM_NAMES_BACK, derived_call_id

__all__ = ["LIVE", "from_response", "to_body"]

#: Where the ``gemini`` live adapter sends a request: the vendor's base URL, the REST
#: version the table's ``api_version`` may change (``v1beta`` accepts every field the
#: mapping writes: ``parametersJsonSchema``, ``responseJsonSchema``, function call ids),
#: the model in the path, the key in ``x-goog-api-key``. Answers are whole (never
#: streamed): a streamed SDK call is served from the whole answer.
LIVE: Final = LiveEndpoint(
    adapter="GeminiAdapter",
    shape="a GenerateContentResponse",
    base_url="https://generativelanguage.googleapis.com",
    path="/{api_version}/models/{model}:generateContent",
    key_header="x-goog-api-key",
    options=(
        EndpointOption(
            "api_version",
            "v1beta",
            pattern=r"^v[0-9][A-Za-z0-9]*$",
            problem="api_version must look like v1 or v1beta",
        ),
    ),
    kinds=(("embedding", "gemini-embed"), ("count_tokens", "gemini-count-tokens")),
)

_encode: Final = msgspec.json.encode
_decode: Final = msgspec.json.decode
_FINISH_FROM_VENDOR: Final = {"STOP": "stop", "MAX_TOKENS": "length"}


#: Gemini's finish reasons that mean "the answer was withheld": a refusal.
_BLOCKED: Final = frozenset(
    {"SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "RECITATION", "IMAGE_SAFETY"}
)


# -- neutral request -> live body -------------------------------------------------------------


def _vendor_parts(content: Any) -> list[dict[str, Any]]:
    if content is None:
        return []
    if type(content) is str:
        return [{"text": content}]
    parts: list[dict[str, Any]] = []
    for part in content:
        if type(part) is dict and part.get("type") == "text" and part.keys() == {"type", "text"}:
            parts.append({"text": part["text"]})
        elif type(part) is dict and "type" not in part:
            parts.append(part)  # a Gemini part kept as it was read
        else:
            raise RequestError("a content part has no Gemini form")
    return parts


def _vendor_response(content: Any) -> dict[str, Any]:
    if type(content) is str:
        try:
            value = _decode(content)
        except msgspec.DecodeError:
            value = None
        if (
            type(value) is dict
            and not (value.keys() == {"result"} and type(value["result"]) is str)
            and canonical_json(value).decode() == content
        ):
            return value
        return {"result": content}
    return {"result": content}


def _vendor_tool_config(choice: Any) -> dict[str, Any]:
    if choice in ("auto", "none", "required"):
        mode = {"auto": "AUTO", "none": "NONE", "required": "ANY"}[choice]
        return {"functionCallingConfig": {"mode": mode}}
    if type(choice) is dict and choice.keys() == {"name"}:
        return {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [choice["name"]]}}
    if type(choice) is str:
        return {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [choice]}}
    if type(choice) is dict and choice.get("type") == "allowed_tools":
        allowed = choice.get("allowed_tools") or {}
        names = [t["function"]["name"] for t in allowed.get("tools", [])]
        mode = "ANY" if allowed.get("mode") == "required" else "AUTO"
        return {"functionCallingConfig": {"mode": mode, "allowedFunctionNames": names}}
    raise RequestError("tool_choice has no Gemini form")


def _vendor_schema_config(response_format: Any) -> dict[str, Any]:
    kind = response_format.get("type") if type(response_format) is dict else None
    if kind == "text":
        return {}
    if kind == "json_object":
        return {"responseMimeType": JSON_MIME}
    if kind == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema")
        if schema is None:
            return {"responseMimeType": JSON_MIME}
        return {"responseMimeType": JSON_MIME, "responseJsonSchema": schema}
    raise RequestError("response_format has no Gemini form")


def _with_reasoning(parts: list[dict[str, Any]], message: dict[str, Any]) -> list[dict[str, Any]]:
    """A model turn's parts with the reasoning it carries from Gemini put back as it came
    (thought parts first, each signature on its part); another vendor's is left out."""
    reasoning = message.get("reasoning")
    if type(reasoning) is not dict or reasoning.get("vendor") != NAME:
        return parts
    thoughts: list[dict[str, Any]] = []
    for item in reasoning.get("items") or ():
        if type(item) is not dict:
            continue
        if item.get("thought") is True:
            thoughts.append(item)
        elif type(item.get("part")) is int and 0 <= item["part"] < len(parts):
            parts[item["part"]] = {
                **parts[item["part"]],
                "thoughtSignature": item.get("thoughtSignature"),
            }
    return thoughts + parts


def _args_for_live(arguments: str) -> dict[str, Any]:
    try:
        return arguments_object(arguments)
    except Unexpressible:
        raise RequestError("tool call arguments must be a JSON object for Gemini") from None


class _Calls:
    """The calls of the model turns written so far, for the function responses that
    answer them: each call's name (Gemini pairs a response with its call by name), and
    the ids this mapping derived (left out, as the model never sent them)."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.derived: set[str] = set()

    def model_turn(self, message: dict[str, Any]) -> dict[str, Any]:
        parts = _vendor_parts(message.get("content"))
        for index, call in enumerate(message.get("tool_calls", [])):
            function: dict[str, Any] = {
                "name": call["name"],
                "args": _args_for_live(call["arguments"]),
            }
            self.names[call["id"]] = call["name"]
            if call["id"] == derived_call_id(
                index, call["name"], canonical_arguments(call["arguments"])
            ):
                self.derived.add(call["id"])
            else:
                function = {"id": call["id"], **function}
            parts.append({"functionCall": function})
        return {"role": "model", "parts": _with_reasoning(parts, message)}

    def response_part(self, message: dict[str, Any]) -> dict[str, Any]:
        call_id = message.get("tool_call_id") or ""
        answer: dict[str, Any] = {"name": self.names.get(call_id, "")}
        if call_id and call_id not in self.derived:
            answer = {"id": call_id, **answer}
        answer["response"] = _vendor_response(message.get("content"))
        return {"functionResponse": answer}


def _declarations(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    declarations = []
    for tool in tools:
        if tool.get("strict"):
            raise RequestError("a strict tool has no Gemini form")
        decl: dict[str, Any] = {"name": tool["name"]}
        if "description" in tool:
            decl["description"] = tool["description"]
        if tool.get("parameters"):
            decl["parametersJsonSchema"] = tool["parameters"]
        declarations.append(decl)
    return declarations


def _generation(request: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """``generationConfig`` from the params and ``response_format`` (``safetySettings``,
    a top-level field, goes to ``body``)."""
    generation: dict[str, Any] = {}
    for key, value in request.get("params", {}).items():
        if key == "safetySettings":
            body["safetySettings"] = value
        elif key in PARAM_NAMES_BACK:
            generation[PARAM_NAMES_BACK[key]] = value
        else:
            generation[key] = value
    if "response_format" in request:
        generation.update(_vendor_schema_config(request["response_format"]))
    return generation


def to_body(request: dict[str, Any], model: str) -> dict[str, Any]:
    """The ``generateContent`` body for a plain normalised neutral request (the model is
    in the URL, not the body).

    Leading system messages become ``systemInstruction``; tool messages become
    ``functionResponse`` parts of one user turn (with the user message that follows), named
    after the call they answer; an id this module derived is left out.
    """
    del model  # in the URL path
    body: dict[str, Any] = {}
    system, conversation = split_system(request["messages"], _vendor_parts)
    if system:
        body["systemInstruction"] = {"parts": system}
    calls = _Calls()
    forms = TurnForms(
        vendor="Gemini",
        tool_part=calls.response_part,
        user_parts=lambda message: _vendor_parts(message.get("content")),
        user_turn=lambda parts: {"role": "user", "parts": parts},
        model_turn=calls.model_turn,
    )
    body["contents"] = turns(conversation, forms)
    if request.get("tools"):
        body["tools"] = [{"functionDeclarations": _declarations(request["tools"])}]
        if "tool_choice" in request:
            body["toolConfig"] = _vendor_tool_config(request["tool_choice"])
    generation = _generation(request, body)
    if generation:
        body["generationConfig"] = generation
    return body


# -- live answer -> neutral response --------------------------------------------------------


def _read_usage(raw: Any) -> dict[str, Any] | None:
    if not isinstance(raw, dict):
        return None
    prompt = raw.get("promptTokenCount", 0)
    answer = raw.get("candidatesTokenCount", 0)
    thoughts = raw.get("thoughtsTokenCount", 0)
    if not all(isinstance(n, int) for n in (prompt, answer, thoughts)):
        return None
    total = raw.get("totalTokenCount")
    return {
        "prompt_tokens": prompt,
        "completion_tokens": answer + thoughts,
        "total_tokens": total if isinstance(total, int) else prompt + answer + thoughts,
    }


def _blocked_prompt(data: dict[str, Any], usage: dict[str, Any] | None) -> dict[str, Any]:
    """The neutral response for an answer without candidates: a refusal without text when
    the prompt itself was blocked, ``MalformedResponse`` otherwise."""
    feedback = data.get("promptFeedback")
    if isinstance(feedback, dict) and isinstance(feedback.get("blockReason"), str):
        return {
            "content": None,
            "tool_calls": [],
            "finish_reason": "content_filter",
            "usage": usage,
            "refusal": "",
        }
    raise MalformedResponse("the body has no candidates")


def _read_call(
    part: dict[str, Any], calls: list[dict[str, str]], items: list[dict[str, Any]]
) -> None:
    """A ``functionCall`` part onto ``calls`` (its signature onto ``items``, its part
    counted from the end until the text is known)."""
    call = part["functionCall"]
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        raise MalformedResponse("a functionCall has no name")
    arguments = canonical_arguments(_encode(call.get("args") or {}).decode())
    call_id = call.get("id")
    if not isinstance(call_id, str) or not call_id:
        call_id = derived_call_id(len(calls), call["name"], arguments)
    signature = part.get("thoughtSignature")
    if isinstance(signature, str):
        items.append({"thoughtSignature": signature, "part": -1 - len(calls)})
    calls.append({"id": call_id, "name": call["name"], "arguments": arguments})


def _read_parts(
    parts: list[Any],
) -> tuple[str | None, list[dict[str, str]], list[dict[str, Any]]]:
    """The text, the calls and the reasoning items (thoughts, and each signature with the
    index of its part in ``response_body``'s order) of a candidate's parts."""
    texts: list[str] = []
    calls: list[dict[str, str]] = []
    items: list[dict[str, Any]] = []
    for part in parts:
        if not isinstance(part, dict):
            raise MalformedResponse("a part is not an object")
        if part.get("thought") is True:
            items.append(part)
        elif "functionCall" in part:
            _read_call(part, calls, items)
        elif isinstance(part.get("text"), str):
            if isinstance(part.get("thoughtSignature"), str):
                items.append({"thoughtSignature": part["thoughtSignature"], "part": 0})
            texts.append(part["text"])
    text = "".join(texts) if texts else None
    for item in items:
        # A call's signature names its part in response_body's order: the text first.
        if item.get("part", 0) < 0:
            item["part"] = (-1 - item["part"]) + (1 if text else 0)
    return text, calls, items


def _read_finish(out: dict[str, Any], finish: Any) -> None:
    if not isinstance(finish, str):
        return
    if finish in _BLOCKED:
        out["finish_reason"] = "content_filter"
        out["refusal"] = out["content"] or ""
        out["content"] = None
    elif finish == "STOP" and out["tool_calls"]:
        out["finish_reason"] = "tool_calls"
    else:
        out["finish_reason"] = _FINISH_FROM_VENDOR.get(finish, finish)


def from_response(data: Any) -> dict[str, Any]:
    """The neutral response for a decoded ``GenerateContentResponse``;
    ``MalformedResponse`` if the body does not have that shape."""
    if not isinstance(data, dict):
        raise MalformedResponse("the body is not an object")
    usage = _read_usage(data.get("usageMetadata"))
    candidates = data.get("candidates")
    if not candidates:
        return _blocked_prompt(data, usage)
    candidate = candidates[0]
    if not isinstance(candidate, dict):
        raise MalformedResponse("the first candidate is not an object")
    content = candidate.get("content") or {}
    parts = content.get("parts") or [] if isinstance(content, dict) else None
    if not isinstance(parts, list):
        raise MalformedResponse("the candidate's parts are not an array")
    text, calls, items = _read_parts(parts)
    out: dict[str, Any] = {
        "content": text,
        "tool_calls": calls,
        "finish_reason": None,
        "usage": usage,
    }
    _read_finish(out, candidate.get("finishReason"))
    if items:
        out["reasoning"] = {"vendor": NAME, "items": items}
    return out
