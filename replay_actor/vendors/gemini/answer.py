"""The neutral response -> Gemini's answers (docs/gemini.md): a
``GenerateContentResponse`` (``response_body``), the same as ``:streamGenerateContent``
server-sent chunks (``stream_body``), and Google's error envelope (``error_body``).

The model's thoughts and ``thoughtSignature``s recorded from Gemini go back where they
came (thought parts first, each signature on its part); another vendor's reasoning is
left out. A call id this mapping derived (:func:`derived_call_id`) is left out again,
as the model never sent one.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from ..._response import Response
from .._common import VendorCall, arguments_object, canonical_arguments, echoed_model
from .._common import response_id as _response_id
from ._fields import NAME, derived_call_id

__all__ = ["error_body", "response_body", "stream_body"]

_encode: Final = msgspec.json.encode

#: Neutral finish reasons in Gemini's words; an upper-case value is Gemini's own, kept.
_FINISH_TO_VENDOR: Final = {
    "stop": "STOP",
    "tool_calls": "STOP",
    "length": "MAX_TOKENS",
    "content_filter": "SAFETY",
}


_USAGE_KEYS: Final = ("promptTokenCount", "candidatesTokenCount", "totalTokenCount")


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
        function: dict[str, Any] = {"name": call.name, "args": arguments_object(call.arguments)}
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


def response_body(response: Response, call: VendorCall | str) -> dict[str, Any]:
    """The ``GenerateContentResponse`` answering ``call`` (or only its model) with the
    stored neutral response."""
    thoughts, parts = _answer_parts(response)
    return _envelope(response, echoed_model(call), thoughts + parts, last=True)


def stream_body(response: Response, call: VendorCall | str) -> bytes:
    """The same answer as ``:streamGenerateContent?alt=sse`` chunks (each ``data:`` line
    a whole ``GenerateContentResponse``; no end marker): the thoughts, then the text,
    then the function calls with the finish reason and usage, so the concatenated chunks
    hold exactly :func:`response_body`'s parts."""
    thoughts, parts = _answer_parts(response)
    text = [p for p in parts if "text" in p]
    calls = [p for p in parts if "text" not in p]
    groups = [group for group in (thoughts, text, calls) if group] or [[]]
    model = echoed_model(call)
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
