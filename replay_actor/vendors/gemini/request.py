"""A ``generateContent`` request body -> the neutral request (docs/gemini.md).

The body comes from ``google-genai`` or any client of the API (``POST
.../models/{model}:generateContent`` or ``:streamGenerateContent``, the model and the
streaming choice in the URL path). ``systemInstruction`` is a leading system message,
``model`` turns are assistant messages, ``functionCall`` parts are ``tool_calls``
(``args`` as RFC 8785 text), ``functionResponse`` parts are tool messages, paired with
the call they answer by id, or by name and order; ``generationConfig``'s fields take
their neutral (OpenAI) names. The model's own thoughts and ``thoughtSignature``s sent
back are not hashed.

The API reads proto JSON, which spells every field either ``lowerCamelCase`` or
``snake_case`` (google-genai itself sends ``parameters_json_schema``): both spellings are
read, one object may not use both for one field.
"""

from __future__ import annotations

import re
from collections.abc import Container
from typing import Any, Final

from ..._canonical import canonical_json
from ..._errors import RequestError
from .._common import VendorCall, collapse_content, read_tools
from ._fields import JSON_MIME, NAME, PARAM_NAMES, ROUTE, derived_call_id

__all__ = ["read_body"]

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


# -- the body's fields ----------------------------------------------------------------------

#: Top-level body fields that are delivery or billing details: not hashed (docs/gemini.md).
_NOT_HASHED: Final = frozenset({"model", "labels", "serviceTier", "store"})


#: Top-level fields the neutral request cannot stand for; each is refused by name.
_REFUSED_TOP: Final = {
    "cachedContent": "cachedContent cannot be replayed (the cached prompt is not in the "
    "request, so two different caches would share an answer)",
    "continuationToken": "continuationToken cannot be replayed (it continues a server-side "
    "generation)",
}

#: The top-level fields the neutral request holds.
_READ_TOP: Final = frozenset(
    {"contents", "systemInstruction", "tools", "toolConfig", "generationConfig", "safetySettings"}
)
_MODES: Final = {"AUTO": "auto", "ANY": "required", "NONE": "none"}


_SCHEMA_OWNED: Final = frozenset({"responseMimeType", "responseSchema", "responseJsonSchema"})


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
    if modalities is not None and (
        type(modalities) is not list or [str(m).upper() for m in modalities] not in ([], ["TEXT"])
    ):
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
    if mime != JSON_MIME:
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
            _SCHEMA_OWNED
            if mime == JSON_MIME
            else {"responseMimeType"}
            if mime == "text/plain"
            else ()
        )
        for key, value in config.items():
            if value is None or key in owned:
                continue
            if key in PARAM_NAMES:
                params[PARAM_NAMES[key]] = value
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
            tools.append(_declaration(raw_decl, f"tools[{i}].functionDeclarations[{j}]"))
    return tools


def _declaration(raw: Any, where: str) -> dict[str, Any]:
    """One function declaration as the neutral tool (at ``where``, for errors)."""
    decl = _object(raw, where)
    out: dict[str, Any] = {"name": decl.get("name")}
    if decl.get("description") is not None:
        out["description"] = decl["description"]
    if decl.get("parametersJsonSchema") is not None:
        if decl.get("parameters") is not None:
            raise RequestError(f"{where} sets both parameters and parametersJsonSchema; keep one")
        out["parameters"] = decl["parametersJsonSchema"]
    elif decl.get("parameters") is not None:
        out["parameters"] = _schema(decl["parameters"])
    _refuse_unknown(decl, _DECLARATION_KEYS, where)
    return out


_DECLARATION_KEYS: Final = frozenset(
    {"name", "description", "parameters", "parametersJsonSchema", "response", "responseJsonSchema"}
)


def _refuse_unknown(fields: dict[str, Any], known: Container[str], where: str) -> None:
    """Refuse the first (in sorted order) field at ``where`` that is set and not
    ``known``: what a replay cannot stand in for."""
    extra = sorted(k for k, v in fields.items() if v is not None and k not in known)
    if extra:
        raise RequestError(f"{where}.{extra[0]} cannot be replayed")


def _tool_choice(raw: Any) -> Any:
    config = _object(raw, "toolConfig")
    _refuse_unknown(config, ("functionCallingConfig",), "toolConfig")
    calling = config.get("functionCallingConfig")
    if calling is None:
        return None
    calling = _object(calling, "toolConfig.functionCallingConfig")
    _refuse_unknown(calling, ("mode", "allowedFunctionNames"), "toolConfig.functionCallingConfig")
    mode = calling.get("mode", "AUTO")
    if mode == "MODE_UNSPECIFIED":
        mode = "AUTO"
    if type(mode) is not str:
        # Checked before the lookup: a list or an object is unhashable.
        raise RequestError("toolConfig.functionCallingConfig.mode must be a string")
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


# -- contents -------------------------------------------------------------------------------


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
    _refuse_unknown(call, ("id", "name", "args"), where)
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
        _refuse_unknown(content, ("role", "parts"), where)
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
    _refuse_unknown(part, ("functionResponse", "thoughtSignature"), where[: where.rfind(".")])
    answer = _object(part["functionResponse"], where)
    _refuse_unknown(answer, ("id", "name", "response"), where)
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


def _check_top(body: dict[str, Any]) -> None:
    """``RequestError`` naming the first top-level field the neutral request cannot hold."""
    for key, value in body.items():
        if value is None or key in _NOT_HASHED:
            continue
        if key in _REFUSED_TOP:
            raise RequestError(_REFUSED_TOP[key])
        if key not in _READ_TOP:
            raise RequestError(f"{key} cannot be replayed")


def read_body(body: Any, path: str = "") -> VendorCall:
    """The neutral request (a plain dict) and call options for a ``generateContent``
    body posted to ``path`` (which names the model and whether to stream).

    Raises ``RequestError`` naming the field for a body the neutral request cannot hold.
    """
    if type(body) is not dict:
        raise RequestError("the request body must be a JSON object")
    body = _camel(body, "")
    _check_top(body)
    contents = body.get("contents")
    if type(contents) is not list:
        raise RequestError("contents must be an array")
    messages: list[dict[str, Any]] = []
    if body.get("systemInstruction") is not None:
        messages.append(_system(body["systemInstruction"]))
    messages.extend(_messages(contents, []))
    request: dict[str, Any] = {"messages": messages}
    read_tools(body, request, _tools, _tool_choice, choice_key="toolConfig")
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
