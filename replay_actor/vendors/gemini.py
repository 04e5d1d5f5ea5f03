"""Google Gemini ``generateContent`` <-> the neutral request and response (docs/gemini.md).

This module is the one place the Gemini API's shapes are read or written:

- a ``google-genai`` request body (``POST .../models/{model}:generateContent`` or
  ``:streamGenerateContent``, the model and the streaming choice in the URL path) -> the
  neutral request (``read_body``), and the neutral response -> a
  ``GenerateContentResponse`` (``response_body``) or its server-sent chunks
  (``stream_body``), for the transports and the front door;
- the neutral request -> a live body (``to_body``) and the live answer -> the neutral
  response (``from_response``), for the ``gemini`` live adapter.

The neutral request is the OpenAI-like one of docs/request.md, so one conversation sent
through google-genai and through the OpenAI SDK hashes alike wherever both can say it:
``systemInstruction`` is a leading system message, ``model`` turns are assistant
messages, ``functionCall`` parts are ``tool_calls`` (``args`` as RFC 8785 text),
``functionResponse`` parts are tool messages, ``topP`` is ``params.top_p`` and
``maxOutputTokens`` is ``params.max_tokens``. Gemini's function calls need not carry an
id; the neutral ones always do, so an absent id is derived from the call itself
(:func:`derived_call_id`), the same way wherever the call is read, and left out again
wherever the call is written.

The API reads proto JSON, which spells every field either ``lowerCamelCase`` or
``snake_case`` (google-genai itself sends ``parameters_json_schema``): both spellings are
read, one object may not use both for one field.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Final

import msgspec

from .._canonical import canonical_json
from .._errors import RequestError
from .._response import Response, Unexpressible
from ._common import MalformedResponse, VendorCall, canonical_arguments, collapse_content
from ._common import response_id as _response_id
from ._endpoint import EndpointOption, LiveEndpoint

__all__ = [
    "LIVE",
    "GeminiGenerateContent",
    "derived_call_id",
    "from_response",
    "read_body",
    "response_body",
    "stream_body",
    "to_body",
]

NAME: Final = "gemini"

#: ``POST .../models/{model}:generateContent`` | ``:streamGenerateContent`` (google-genai
#: adds ``?alt=sse`` to the stream's URL; the path carries no query).
ROUTE: Final = re.compile(
    r"/(?:models|tunedModels)/(?P<model>[^/:]+)(?::|%3[Aa])"
    r"(?P<method>generateContent|streamGenerateContent)/?$"
)

_encode: Final = msgspec.json.encode
_decode: Final = msgspec.json.decode

# -- field spellings ------------------------------------------------------------------------

_SNAKE: Final = re.compile(r"_([a-z0-9])")


def _camel(obj: dict[str, Any], where: str) -> dict[str, Any]:
    """``obj``'s own keys in lowerCamelCase (proto JSON accepts both spellings)."""
    if not any("_" in key for key in obj):
        return obj
    out: dict[str, Any] = {}
    for key, value in obj.items():
        name = _SNAKE.sub(lambda m: m.group(1).upper(), key)
        if name in out:
            raise RequestError(f"{where}{name} is set twice (as {name} and as a snake_case name)")
        out[name] = value
    return out


def _object(value: Any, where: str) -> dict[str, Any]:
    if type(value) is not dict:
        raise RequestError(f"{where} must be an object")
    return _camel(value, f"{where}.")


# -- ids ----------------------------------------------------------------------------------


def derived_call_id(index: int, name: str, arguments: str) -> str:
    """The neutral id of a Gemini function call that carries none: ``call_`` + 24 hex
    characters of the sha256 of ``[index, name, arguments]`` (RFC 8785), ``index`` the
    call's position among the function calls of its turn and ``arguments`` the neutral
    (RFC 8785) text.

    The same call therefore gets the same id in the live answer that recorded it and in
    the request that sends it back, and an id equal to this is left out whenever the call
    is written for Gemini again (the model never sent one).
    """
    digest = hashlib.sha256(canonical_json([index, name, arguments])).hexdigest()
    return "call_" + digest[:24]


# -- vendor body -> neutral request -------------------------------------------------------

#: Top-level body fields that are delivery or billing details: not hashed (docs/gemini.md).
_NOT_HASHED: Final = frozenset({"model", "labels", "serviceTier", "store"})
#: Top-level fields the neutral request cannot stand for; each is refused by name.
_REFUSED_TOP: Final = {
    "cachedContent": "cachedContent cannot be replayed (the cached prompt is not in the "
    "request, so two different caches would share an answer)",
    "continuationToken": "continuationToken cannot be replayed (it continues a server-side "
    "generation)",
}
#: generationConfig fields with a neutral (OpenAI) name, so they hash alike everywhere.
_PARAM_NAMES: Final = {
    "temperature": "temperature",
    "topP": "top_p",
    "topK": "top_k",
    "maxOutputTokens": "max_tokens",
    "stopSequences": "stop",
    "seed": "seed",
    "presencePenalty": "presence_penalty",
    "frequencyPenalty": "frequency_penalty",
}
_PARAM_NAMES_BACK: Final = {v: k for k, v in _PARAM_NAMES.items()}
_MODES: Final = {"AUTO": "auto", "ANY": "required", "NONE": "none"}
_SCHEMA_OWNED: Final = frozenset({"responseMimeType", "responseSchema", "responseJsonSchema"})
_JSON: Final = "application/json"


def _refuse_generation(config: dict[str, Any]) -> None:
    """Fields asking for what one neutral response cannot hold (docs/gemini.md, "Refused")."""
    count = config.get("candidateCount")
    if count is not None and count != 1:
        raise RequestError(
            "generationConfig.candidateCount other than 1 cannot be replayed or recorded"
        )
    if config.get("responseLogprobs") not in (None, False):
        raise RequestError("generationConfig.responseLogprobs cannot be replayed or recorded")
    if config.get("logprobs") is not None:
        raise RequestError("generationConfig.logprobs cannot be replayed or recorded")
    modalities = config.get("responseModalities")
    if modalities is not None and [str(m).upper() for m in modalities] not in ([], ["TEXT"]):
        raise RequestError(
            "generationConfig.responseModalities other than ['TEXT'] cannot be replayed or recorded"
        )
    for field in ("speechConfig", "audioTimestamp", "imageConfig", "audioTranscriptionConfig"):
        if config.get(field) is not None:
            raise RequestError(
                f"generationConfig.{field} (audio or image output) cannot be replayed or recorded"
            )


def _schema(schema: Any) -> Any:
    """A Gemini ``Schema`` (OpenAPI subset, ``"type": "OBJECT"``) in JSON Schema's
    spelling (``"type": "object"``), so a declaration written either way hashes as the
    JSON Schema other vendors send."""
    if type(schema) is not dict:
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type" and type(value) is str:
            out[key] = value.lower()
        elif key == "properties" and type(value) is dict:
            out[key] = {name: _schema(sub) for name, sub in value.items()}
        elif key == "items":
            out[key] = _schema(value)
        elif key == "anyOf" and type(value) is list:
            out[key] = [_schema(sub) for sub in value]
        else:
            out[key] = value
    return out


def _response_format(config: dict[str, Any]) -> dict[str, Any] | None:
    mime = config.get("responseMimeType")
    schema = config.get("responseJsonSchema")
    if schema is None and config.get("responseSchema") is not None:
        schema = _schema(config["responseSchema"])
    if "responseJsonSchema" in config and "responseSchema" in config:
        raise RequestError(
            "generationConfig.responseSchema and responseJsonSchema are both set; keep one"
        )
    if mime != _JSON:
        return None
    if schema is None:
        return {"type": "json_object"}
    # What a chat call asking for this schema sends, less the name Gemini has no field for.
    return {"type": "json_schema", "json_schema": {"schema": schema}}


def _params(body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    raw = body.get("generationConfig")
    params: dict[str, Any] = {}
    response_format = None
    if raw is not None:
        config = _object(raw, "generationConfig")
        _refuse_generation(config)
        response_format = _response_format(config)
        mime = config.get("responseMimeType")
        # JSON output is said by response_format; text/plain is the default and says
        # nothing; any other output type (text/x.enum) stays in params as written.
        owned = (
            _SCHEMA_OWNED if mime == _JSON else {"responseMimeType"} if mime == "text/plain" else ()
        )
        for key, value in config.items():
            if value is None or key in owned:
                continue
            if key in _PARAM_NAMES:
                params[_PARAM_NAMES[key]] = value
            elif key in ("candidateCount", "responseLogprobs", "responseModalities"):
                continue  # checked above: the defaults, which say nothing.
            else:
                params[key] = value
    safety = body.get("safetySettings")
    if safety is not None:
        params["safetySettings"] = safety
    return params, response_format


def _tools(raw: Any) -> list[dict[str, Any]]:
    if type(raw) is not list:
        raise RequestError("tools must be an array")
    tools: list[dict[str, Any]] = []
    for i, entry in enumerate(raw):
        tool = _object(entry, f"tools[{i}]")
        for key in tool:
            if key != "functionDeclarations":
                # googleSearch, codeExecution, urlContext, fileSearch, ...: answered by
                # Google's servers, which a replay cannot stand in for.
                raise RequestError(f"tools[{i}].{key} (a built-in tool) cannot be replayed")
        declarations = tool.get("functionDeclarations") or []
        if type(declarations) is not list:
            raise RequestError(f"tools[{i}].functionDeclarations must be an array")
        for j, raw_decl in enumerate(declarations):
            where = f"tools[{i}].functionDeclarations[{j}]"
            decl = _object(raw_decl, where)
            out: dict[str, Any] = {"name": decl.get("name")}
            if decl.get("description") is not None:
                out["description"] = decl["description"]
            if decl.get("parametersJsonSchema") is not None:
                if decl.get("parameters") is not None:
                    raise RequestError(
                        f"{where} sets both parameters and parametersJsonSchema; keep one"
                    )
                out["parameters"] = decl["parametersJsonSchema"]
            elif decl.get("parameters") is not None:
                out["parameters"] = _schema(decl["parameters"])
            extra = sorted(
                key
                for key, value in decl.items()
                if value is not None
                and key
                not in {
                    "name",
                    "description",
                    "parameters",
                    "parametersJsonSchema",
                    "response",
                    "responseJsonSchema",
                }
            )
            if extra:
                raise RequestError(f"{where}.{extra[0]} cannot be replayed")
            tools.append(out)
    return tools


def _tool_choice(raw: Any) -> Any:
    config = _object(raw, "toolConfig")
    extra = sorted(k for k, v in config.items() if v is not None and k != "functionCallingConfig")
    if extra:
        raise RequestError(f"toolConfig.{extra[0]} cannot be replayed")
    calling = config.get("functionCallingConfig")
    if calling is None:
        return None
    calling = _object(calling, "toolConfig.functionCallingConfig")
    extra = sorted(
        k for k, v in calling.items() if v is not None and k not in ("mode", "allowedFunctionNames")
    )
    if extra:
        raise RequestError(f"toolConfig.functionCallingConfig.{extra[0]} cannot be replayed")
    mode = calling.get("mode", "AUTO")
    if mode == "MODE_UNSPECIFIED":
        mode = "AUTO"
    if mode not in _MODES:
        raise RequestError(
            f"toolConfig.functionCallingConfig.mode must be AUTO, ANY or NONE, not {mode!r}"
        )
    names = calling.get("allowedFunctionNames")
    if not names or mode == "NONE":
        return _MODES[mode]
    if type(names) is not list or not all(type(n) is str for n in names):
        raise RequestError("toolConfig.functionCallingConfig.allowedFunctionNames must be names")
    if mode == "ANY" and len(names) == 1:
        return {"name": names[0]}
    # OpenAI chat's spelling of "one of these tools", so both hash alike.
    return {
        "type": "allowed_tools",
        "allowed_tools": {
            "mode": _MODES[mode],
            "tools": [{"type": "function", "function": {"name": n}} for n in names],
        },
    }


def _text_content(parts: list[Any]) -> Any:
    """Content parts (text parts as ``{"type": "text", "text"}``, any other part kept as
    Gemini wrote it), collapsed to a string when there is one text part only."""
    if not parts:
        return None
    return collapse_content(parts)


def _response_text(response: Any) -> str:
    """A ``functionResponse.response`` as the tool message's text: ``{"result": text}``,
    what google-genai makes of a function's return value, is that text; any other object
    is its RFC 8785 JSON."""
    if type(response) is dict and response.keys() == {"result"} and type(response["result"]) is str:
        text: str = response["result"]
        return text
    try:
        return canonical_json(response if response is not None else {}).decode()
    except RequestError:
        raise RequestError("a functionResponse.response is not JSON RFC 8785 can encode") from None


def _call(raw: Any, index: int, where: str) -> dict[str, Any]:
    call = _object(raw, where)
    extra = sorted(k for k, v in call.items() if v is not None and k not in ("id", "name", "args"))
    if extra:
        raise RequestError(f"{where}.{extra[0]} cannot be replayed")
    name = call.get("name")
    if type(name) is not str:
        raise RequestError(f"{where}.name must be a string")
    try:
        arguments = canonical_json(call.get("args") or {}).decode()
    except RequestError:
        raise RequestError(f"{where}.args is not JSON RFC 8785 can encode") from None
    call_id = call.get("id")
    if call_id is None or call_id == "":
        call_id = derived_call_id(index, name, arguments)
    return {"id": call_id, "name": name, "arguments": arguments}


def _is_reasoning(part: dict[str, Any]) -> bool:
    return part.get("thought") is True


def _parts(content: dict[str, Any], where: str) -> list[dict[str, Any]]:
    parts = content.get("parts")
    if parts is None:
        return []
    if type(parts) is not list:
        raise RequestError(f"{where}.parts must be an array")
    return [_object(part, f"{where}.parts[{j}]") for j, part in enumerate(parts)]


def _plain_parts(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Parts as neutral content parts: a bare text part is ``{"type": "text", "text"}``;
    ``thoughtSignature`` is the model's reasoning and ``thought: false`` says nothing,
    so neither is hashed (a part left empty goes); any other part is kept."""
    out: list[dict[str, Any]] = []
    for raw in parts:
        part = raw
        if "thoughtSignature" in part or part.get("thought") is False:
            part = {
                k: v
                for k, v in part.items()
                if k != "thoughtSignature" and not (k == "thought" and v is False)
            }
        if part.keys() == {"text"} and type(part["text"]) is str:
            out.append({"type": "text", "text": part["text"]})
        elif part:
            out.append(part)
    return out


def _reasoning_items(
    thoughts: list[dict[str, Any]],
    rest: list[dict[str, Any]],
    call_signatures: list[tuple[int, Any]],
    kept: int,
) -> list[dict[str, Any]]:
    """A model turn's reasoning sent back, in the neutral response's form (see
    ``from_response``): the thought parts verbatim, then each ``thoughtSignature`` with
    the index of the part ``to_body`` writes it on (the content parts, then the calls).

    Not hashed (docs/request.md, "Reasoning sent back"); a signature on a part that
    carries nothing else (which ``_plain_parts`` drops) has no part to go back on and
    goes with it.
    """
    items: list[dict[str, Any]] = list(thoughts)
    index = 0
    for part in rest:
        signature = part.get("thoughtSignature")
        if _plain_parts([part]):
            if signature is not None:
                items.append({"thoughtSignature": signature, "part": index})
            index += 1
    items.extend({"thoughtSignature": sig, "part": kept + k} for k, sig in call_signatures)
    return items


def _model_message(parts: list[dict[str, Any]], where: str) -> dict[str, Any]:
    """A ``model`` turn's parts as one assistant message."""
    calls: list[dict[str, Any]] = []
    rest: list[dict[str, Any]] = []
    thoughts: list[dict[str, Any]] = []
    call_signatures: list[tuple[int, Any]] = []
    for j, part in enumerate(parts):
        if _is_reasoning(part):
            # The model's own thought, decided by earlier turns: not hashed.
            thoughts.append(part)
            continue
        if "functionCall" in part:
            if part.get("thoughtSignature") is not None:
                call_signatures.append((len(calls), part["thoughtSignature"]))
            calls.append(
                _call(part["functionCall"], len(calls), f"{where}.parts[{j}].functionCall")
            )
        elif "functionResponse" in part:
            raise RequestError(f"{where}.parts[{j}].functionResponse belongs to a user turn")
        else:
            rest.append(part)
    message: dict[str, Any] = {"role": "assistant"}
    kept = _plain_parts(rest)
    text = _text_content(kept)
    if text is not None:
        message["content"] = text
    if calls:
        message["tool_calls"] = calls
    items = _reasoning_items(thoughts, rest, call_signatures, len(kept))
    if items:
        message["reasoning"] = {"vendor": NAME, "items": items}
    return message


def _messages(contents: list[Any], pending: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The neutral messages of ``contents``; ``pending`` collects the last model turn's
    calls, which the next turn's function responses answer by id or by name and order."""
    messages: list[dict[str, Any]] = []
    for i, raw in enumerate(contents):
        where = f"contents[{i}]"
        content = _object(raw, where)
        extra = sorted(
            k for k, v in content.items() if v is not None and k not in ("role", "parts")
        )
        if extra:
            raise RequestError(f"{where}.{extra[0]} cannot be replayed")
        role = content.get("role") or "user"
        parts = _parts(content, where)
        if role == "model":
            message = _model_message(parts, where)
            pending[:] = message.get("tool_calls", [])
            messages.append(message)
        elif role in ("user", "function"):
            answered: list[dict[str, Any]] = []
            rest = []
            used: set[int] = set()
            for j, part in enumerate(parts):
                if "functionResponse" in part:
                    answered.append(
                        _tool_message(part, f"{where}.parts[{j}].functionResponse", pending, used)
                    )
                elif "functionCall" in part:
                    raise RequestError(f"{where}.parts[{j}].functionCall belongs to a model turn")
                elif not _is_reasoning(part):
                    rest.append(part)
            messages.extend(answered)
            rest = _plain_parts(rest)
            if rest or not answered:
                messages.append({"role": "user", "content": _text_content(rest)})
        else:
            raise RequestError(f"{where}.role must be 'user' or 'model', not {role!r}")
    return messages


def _tool_message(
    part: dict[str, Any], where: str, pending: list[dict[str, Any]], used: set[int]
) -> dict[str, Any]:
    extra = sorted(
        k
        for k, v in part.items()
        if v is not None and k not in ("functionResponse", "thoughtSignature")
    )
    if extra:
        raise RequestError(f"{where[: where.rfind('.')]}.{extra[0]} cannot be replayed")
    answer = _object(part["functionResponse"], where)
    extra = sorted(
        k for k, v in answer.items() if v is not None and k not in ("id", "name", "response")
    )
    if extra:
        raise RequestError(f"{where}.{extra[0]} cannot be replayed")
    call_id = answer.get("id")
    if call_id is None or call_id == "":
        # Paired with the first unanswered call of the last model turn of that name.
        name = answer.get("name")
        for k, call in enumerate(pending):
            if k not in used and call["name"] == name:
                used.add(k)
                call_id = call["id"]
                break
        else:
            raise RequestError(
                f"{where} answers no functionCall of the model turn before it (no id, and no "
                "unanswered call of that name)"
            )
    return {
        "role": "tool",
        "tool_call_id": call_id,
        "content": _response_text(answer.get("response")),
    }


def _system(raw: Any) -> dict[str, Any]:
    if type(raw) is str:
        return {"role": "system", "content": raw}
    content = _object(raw, "systemInstruction")
    parts = _plain_parts([p for p in _parts(content, "systemInstruction") if not _is_reasoning(p)])
    return {"role": "system", "content": _text_content(parts)}


def read_body(body: Any, path: str = "") -> VendorCall:  # noqa: PLR0912
    """The neutral request (a plain dict) and call options for a ``generateContent``
    body posted to ``path`` (which names the model and whether to stream).

    Raises ``RequestError`` naming the field for a body the neutral request cannot hold.
    """
    if type(body) is not dict:
        raise RequestError("the request body must be a JSON object")
    body = _camel(body, "")
    for key, value in body.items():
        if value is None or key in _NOT_HASHED:
            continue
        if key in _REFUSED_TOP:
            raise RequestError(_REFUSED_TOP[key])
        if key not in (
            "contents",
            "systemInstruction",
            "tools",
            "toolConfig",
            "generationConfig",
            "safetySettings",
        ):
            raise RequestError(f"{key} cannot be replayed")
    contents = body.get("contents")
    if type(contents) is not list:
        raise RequestError("contents must be an array")
    messages: list[dict[str, Any]] = []
    if body.get("systemInstruction") is not None:
        messages.append(_system(body["systemInstruction"]))
    messages.extend(_messages(contents, []))
    request: dict[str, Any] = {"messages": messages}
    if body.get("tools") is not None:
        tools = _tools(body["tools"])
        if tools:
            request["tools"] = tools
    # A toolConfig without tools changes nothing the model can do: not hashed.
    if body.get("toolConfig") is not None and "tools" in request:
        choice = _tool_choice(body["toolConfig"])
        if choice is not None:
            request["tool_choice"] = choice
    params, response_format = _params(body)
    if response_format is not None:
        request["response_format"] = response_format
    if params:
        request["params"] = params
    match = ROUTE.search(path)
    return VendorCall(
        request=request,
        model=match["model"] if match else "",
        stream=bool(match and match["method"] == "streamGenerateContent"),
    )


# -- neutral response -> vendor response --------------------------------------------------

#: Neutral finish reasons in Gemini's words; an upper-case value is Gemini's own, kept.
_FINISH_TO_VENDOR: Final = {
    "stop": "STOP",
    "tool_calls": "STOP",
    "length": "MAX_TOKENS",
    "content_filter": "SAFETY",
}
_FINISH_FROM_VENDOR: Final = {"STOP": "stop", "MAX_TOKENS": "length"}
#: Gemini's finish reasons that mean "the answer was withheld": a refusal.
_BLOCKED: Final = frozenset(
    {"SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "RECITATION", "IMAGE_SAFETY"}
)
_USAGE_KEYS: Final = ("promptTokenCount", "candidatesTokenCount", "totalTokenCount")


def _args(arguments: str) -> dict[str, Any]:
    try:
        value = _decode(arguments)
    except msgspec.DecodeError:
        value = None
    if type(value) is not dict:
        raise Unexpressible("a stored tool call's arguments are not a JSON object")
    return value


def _usage(response: Response) -> dict[str, Any]:
    usage = response.usage or {}
    if any(key in usage for key in _USAGE_KEYS):
        return dict(usage)  # recorded or written in Gemini's own words
    prompt = usage.get("prompt_tokens", usage.get("input_tokens", 0))
    completion = usage.get("completion_tokens", usage.get("output_tokens", 0))
    total = usage.get("total_tokens", prompt + completion)
    return {
        "promptTokenCount": prompt,
        "candidatesTokenCount": completion,
        "totalTokenCount": total,
    }


def _finish(response: Response) -> str:
    if response.refusal is not None:
        return "SAFETY"
    finish = response.finish_reason
    if finish is None:
        return "STOP"
    if finish in _FINISH_TO_VENDOR:
        return _FINISH_TO_VENDOR[finish]
    return finish if finish.isupper() else "OTHER"


def _answer_parts(response: Response) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(thought parts, answer parts) for the stored response, signatures put back on the
    answer parts that carried them."""
    thoughts: list[dict[str, Any]] = []
    signatures: dict[int, str] = {}
    if response.reasoning is not None and response.reasoning.vendor == NAME:
        for item in response.reasoning.items:
            if item.get("thought") is True:
                thoughts.append(dict(item))
            elif type(item.get("thoughtSignature")) is str and type(item.get("part")) is int:
                signatures[item["part"]] = item["thoughtSignature"]
    parts: list[dict[str, Any]] = []
    text = response.refusal if response.refusal is not None else response.content
    if text:
        parts.append({"text": text})
    for index, call in enumerate(response.tool_calls):
        function: dict[str, Any] = {"name": call.name, "args": _args(call.arguments)}
        if call.id and call.id != derived_call_id(
            index, call.name, canonical_arguments(call.arguments)
        ):
            function = {"id": call.id, **function}
        parts.append({"functionCall": function})
    for index, signature in signatures.items():
        if index < len(parts):
            parts[index]["thoughtSignature"] = signature
    return thoughts, parts


def _envelope(
    response: Response, model: str, parts: list[dict[str, Any]], last: bool
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    out: dict[str, Any] = {"candidates": [candidate]}
    if last:
        candidate["finishReason"] = _finish(response)
        out["usageMetadata"] = _usage(response)
    out["modelVersion"] = model
    out["responseId"] = _response_id(response, "")
    return out


def response_body(response: Response, model: str) -> dict[str, Any]:
    """The ``GenerateContentResponse`` answering with the stored neutral response."""
    thoughts, parts = _answer_parts(response)
    return _envelope(response, model, thoughts + parts, last=True)


def stream_body(response: Response, model: str) -> bytes:
    """The same answer as ``:streamGenerateContent?alt=sse`` chunks (each ``data:`` line
    a whole ``GenerateContentResponse``; no end marker): the thoughts, then the text,
    then the function calls with the finish reason and usage, so the concatenated chunks
    hold exactly :func:`response_body`'s parts."""
    thoughts, parts = _answer_parts(response)
    text = [p for p in parts if "text" in p]
    calls = [p for p in parts if "text" not in p]
    groups = [group for group in (thoughts, text, calls) if group] or [[]]
    chunks = [
        b"data: "
        + _encode(_envelope(response, model, group, last=n == len(groups) - 1))
        + b"\r\n\r\n"
        for n, group in enumerate(groups)
    ]
    return b"".join(chunks)


def error_body(kind: str, message: str, nearest: dict[str, Any] | None) -> dict[str, Any]:
    """Google's error envelope; ``status`` holds the replay failure's kind
    (``replay_miss``, ...), which google-genai's ``APIError`` exposes as ``status``."""
    error: dict[str, Any] = {
        "code": _ERROR_CODES.get(kind, 500),
        "message": message,
        "status": kind,
    }
    if nearest is not None:
        error["nearest"] = nearest
    return {"error": error}


_ERROR_CODES: Final = {
    "not_found": 404,
    "invalid_request": 400,
    "replay_miss": 404,
    "replay_exhausted": 404,
    "replay_unavailable": 503,
    "live_provider_error": 502,
}


# -- neutral request -> live body, live answer -> neutral response ------------------------


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
        return {"responseMimeType": _JSON}
    if kind == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema")
        if schema is None:
            return {"responseMimeType": _JSON}
        return {"responseMimeType": _JSON, "responseJsonSchema": schema}
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


def to_body(request: dict[str, Any], model: str) -> dict[str, Any]:  # noqa: PLR0912, PLR0915
    """The ``generateContent`` body for a plain normalised neutral request (the model is
    in the URL, not the body).

    Leading system messages become ``systemInstruction``; tool messages become
    ``functionResponse`` parts of one user turn (with the user message that follows), named
    after the call they answer; an id this module derived is left out.
    """
    del model  # in the URL path
    messages = request["messages"]
    body: dict[str, Any] = {}
    system: list[dict[str, Any]] = []
    i = 0
    while i < len(messages) and messages[i]["role"] == "system":
        system.extend(_vendor_parts(messages[i].get("content")))
        i += 1
    if system:
        body["systemInstruction"] = {"parts": system}
    contents: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    derived: set[str] = set()
    pending: list[dict[str, Any]] = []
    for message in messages[i:]:
        role = message["role"]
        if role == "tool":
            call_id = message.get("tool_call_id") or ""
            answer: dict[str, Any] = {"name": names.get(call_id, "")}
            if call_id and call_id not in derived:
                answer = {"id": call_id, **answer}
            answer["response"] = _vendor_response(message.get("content"))
            pending.append({"functionResponse": answer})
            continue
        if role == "user":
            contents.append(
                {"role": "user", "parts": pending + _vendor_parts(message.get("content"))}
            )
            pending = []
            continue
        if pending:
            contents.append({"role": "user", "parts": pending})
            pending = []
        if role == "system":
            raise RequestError("a system message after the conversation began has no Gemini form")
        parts = _vendor_parts(message.get("content"))
        for index, call in enumerate(message.get("tool_calls", [])):
            function: dict[str, Any] = {
                "name": call["name"],
                "args": _args_for_live(call["arguments"]),
            }
            names[call["id"]] = call["name"]
            if call["id"] == derived_call_id(
                index, call["name"], canonical_arguments(call["arguments"])
            ):
                derived.add(call["id"])
            else:
                function = {"id": call["id"], **function}
            parts.append({"functionCall": function})
        contents.append({"role": "model", "parts": _with_reasoning(parts, message)})
    if pending:
        contents.append({"role": "user", "parts": pending})
    body["contents"] = contents
    if request.get("tools"):
        declarations = []
        for tool in request["tools"]:
            if tool.get("strict"):
                raise RequestError("a strict tool has no Gemini form")
            decl: dict[str, Any] = {"name": tool["name"]}
            if "description" in tool:
                decl["description"] = tool["description"]
            if tool.get("parameters"):
                decl["parametersJsonSchema"] = tool["parameters"]
            declarations.append(decl)
        body["tools"] = [{"functionDeclarations": declarations}]
        if "tool_choice" in request:
            body["toolConfig"] = _vendor_tool_config(request["tool_choice"])
    generation: dict[str, Any] = {}
    for key, value in request.get("params", {}).items():
        if key == "safetySettings":
            body["safetySettings"] = value
        elif key in _PARAM_NAMES_BACK:
            generation[_PARAM_NAMES_BACK[key]] = value
        else:
            generation[key] = value
    if "response_format" in request:
        generation.update(_vendor_schema_config(request["response_format"]))
    if generation:
        body["generationConfig"] = generation
    return body


def _args_for_live(arguments: str) -> dict[str, Any]:
    try:
        return _args(arguments)
    except Unexpressible:
        raise RequestError("tool call arguments must be a JSON object for Gemini") from None


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


def from_response(data: Any) -> dict[str, Any]:  # noqa: PLR0912, PLR0915
    """The neutral response for a decoded ``GenerateContentResponse``;
    ``MalformedResponse`` if the body does not have that shape."""
    if not isinstance(data, dict):
        raise MalformedResponse("the body is not an object")
    usage = _read_usage(data.get("usageMetadata"))
    candidates = data.get("candidates")
    if not candidates:
        feedback = data.get("promptFeedback")
        if isinstance(feedback, dict) and isinstance(feedback.get("blockReason"), str):
            # The prompt itself was blocked: no candidate, a refusal without text.
            return {
                "content": None,
                "tool_calls": [],
                "finish_reason": "content_filter",
                "usage": usage,
                "refusal": "",
            }
        raise MalformedResponse("the body has no candidates")
    candidate = candidates[0]
    if not isinstance(candidate, dict):
        raise MalformedResponse("the first candidate is not an object")
    content = candidate.get("content") or {}
    parts = content.get("parts") or [] if isinstance(content, dict) else None
    if not isinstance(parts, list):
        raise MalformedResponse("the candidate's parts are not an array")
    texts: list[str] = []
    calls: list[dict[str, str]] = []
    items: list[dict[str, Any]] = []
    for part in parts:
        if not isinstance(part, dict):
            raise MalformedResponse("a part is not an object")
        if part.get("thought") is True:
            items.append(part)
            continue
        signature = part.get("thoughtSignature")
        if "functionCall" in part:
            call = part["functionCall"]
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                raise MalformedResponse("a functionCall has no name")
            arguments = canonical_arguments(_encode(call.get("args") or {}).decode())
            call_id = call.get("id")
            if not isinstance(call_id, str) or not call_id:
                call_id = derived_call_id(len(calls), call["name"], arguments)
            if isinstance(signature, str):
                items.append({"thoughtSignature": signature, "part": -1 - len(calls)})
            calls.append({"id": call_id, "name": call["name"], "arguments": arguments})
        elif isinstance(part.get("text"), str):
            if isinstance(signature, str):
                items.append({"thoughtSignature": signature, "part": 0})
            texts.append(part["text"])
    text = "".join(texts) if texts else None
    for item in items:
        # A call's signature names its part in response_body's order: the text first.
        if item.get("part", 0) < 0:
            item["part"] = (-1 - item["part"]) + (1 if text else 0)
    finish = candidate.get("finishReason")
    out: dict[str, Any] = {
        "content": text,
        "tool_calls": calls,
        "finish_reason": None,
        "usage": usage,
    }
    if isinstance(finish, str):
        if finish in _BLOCKED:
            out["finish_reason"] = "content_filter"
            out["refusal"] = text or ""
            out["content"] = None
        elif finish == "STOP" and calls:
            out["finish_reason"] = "tool_calls"
        else:
            out["finish_reason"] = _FINISH_FROM_VENDOR.get(finish, finish)
    if items:
        out["reasoning"] = {"vendor": NAME, "items": items}
    return out


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
)


class GeminiGenerateContent:
    """The :class:`~replay_actor.vendors.Vendor` for Gemini's ``generateContent``."""

    name: Final = NAME
    routes: Final = (ROUTE,)
    live: Final = LIVE

    def read_body(self, body: Any, path: str = "") -> VendorCall:
        return read_body(body, path)

    def response_body(self, response: Response, call: VendorCall) -> dict[str, Any]:
        return response_body(response, call.model)

    def stream_body(self, response: Response, call: VendorCall) -> bytes:
        return stream_body(response, call.model)

    error_body = staticmethod(error_body)
    to_body = staticmethod(to_body)
    from_response = staticmethod(from_response)
