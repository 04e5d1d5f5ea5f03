"""OpenAI legacy completions ``POST /v1/completions`` <-> the neutral ``completion``
request (docs/ollama.md, "Legacy completions").

``prompt`` is a string (or an array of exactly one string); generation parameters go to
``params`` as chat's do (``max_tokens``, ``stop`` as an array), and what a neutral answer
cannot hold (``n``/``best_of`` other than 1, ``logprobs``) is refused. The answer is a
``text_completion`` whose text is the stored ``content``, or its server-sent events.
"""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec

from ..._errors import RequestError
from ..._kinds import COMPLETION
from ..._response import Response
from .._common import (
    NOT_HASHED,
    MalformedResponse,
    VendorCall,
    echoed_model,
    error_envelope,
    refuse_unfaithful,
    response_id,
    vendor_call,
)
from .._endpoint import sibling
from . import chat as openai

__all__ = [
    "LIVE",
    "PATHS",
    "ROUTES",
    "error_body",
    "from_response",
    "read_body",
    "read_prompt",
    "response_body",
    "stream_body",
    "to_body",
]

# Not /chat/completions: the path segment before must not be "chat".
ROUTES: Final = (re.compile(r"(?:^|/)(?<!chat/)completions/?$"),)
PATHS: Final = ("POST /v1/completions",)

_OWNED: Final = NOT_HASHED | {"prompt", "stop"}
_RESERVED: Final = frozenset({"model", "prompt", "stream"})
_encode: Final = msgspec.json.encode


def read_prompt(value: Any) -> str:
    """The prompt text of a string or a one-string array; ``RequestError`` else."""
    if type(value) is list and len(value) == 1:
        value = value[0]
    if type(value) is not str:
        raise RequestError(
            "prompt must be a string or an array of one string "
            "(token arrays and batched prompts cannot be replayed)"
        )
    return value


def read_body(body: Any, path: str = "") -> VendorCall:
    """The neutral completion request for a completions body (``path`` says nothing more)."""
    if type(body) is not dict:
        raise RequestError("the request body must be a JSON object")
    refuse_unfaithful(body)
    best_of = body.get("best_of")
    if best_of is not None and (type(best_of) is bool or best_of != 1):
        raise RequestError("best_of other than 1 cannot be replayed or recorded")
    request: dict[str, Any] = {"kind": COMPLETION, "prompt": read_prompt(body.get("prompt"))}
    params = {k: v for k, v in body.items() if k not in _OWNED}
    stop = body.get("stop")
    if stop is not None:
        params["stop"] = [stop] if type(stop) is str else stop
    options = body.get("stream_options")
    include_usage = type(options) is dict and options.get("include_usage") is True
    return vendor_call(
        body, request, params, stream=body.get("stream") is True, include_usage=include_usage
    )


def _usage(response: Response) -> dict[str, Any]:
    usage = response.usage or {}
    prompt = usage.get("prompt_tokens", usage.get("input_tokens", 0))
    completion = usage.get("completion_tokens", usage.get("output_tokens", 0))
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": usage.get("total_tokens", prompt + completion),
    }


def _head(response: Response, model: str) -> dict[str, Any]:
    return {
        "id": response_id(response, "cmpl-"),
        "object": "text_completion",
        "created": response.created,
        "model": model,
    }


def response_body(response: Response, call: VendorCall | str) -> dict[str, Any]:
    """The ``text_completion`` answering with the stored text."""
    choice = {
        "text": response.content or "",
        "index": 0,
        "logprobs": None,
        "finish_reason": response.finish_reason or "stop",
    }
    head = _head(response, echoed_model(call))
    return {**head, "choices": [choice], "usage": _usage(response)}


def stream_body(response: Response, call: VendorCall) -> bytes:
    """The same answer as server-sent events: the text, then the finish, then [DONE]."""
    head = _head(response, call.model)

    def event(text: str, finish: str | None) -> bytes:
        choice = {"text": text, "index": 0, "logprobs": None, "finish_reason": finish}
        return b"data: " + _encode({**head, "choices": [choice]}) + b"\n\n"

    parts = [event(response.content or "", None), event("", response.finish_reason or "stop")]
    if call.include_usage:
        usage = {**head, "choices": [], "usage": _usage(response)}
        parts.append(b"data: " + _encode(usage) + b"\n\n")
    parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


def to_body(request: dict[str, Any], model: str) -> dict[str, Any]:
    """The live completions body for a neutral completion request."""
    params: dict[str, Any] = request.get("params", {})
    clash = sorted(_RESERVED.intersection(params))
    if clash:
        raise RequestError(f"params may not set {clash[0]!r} (the adapter owns it)")
    return {**params, "model": model, "prompt": request["prompt"]}


def from_response(data: Any) -> dict[str, Any]:
    """The neutral response (``content``, ``finish_reason``, ``usage``) for a live answer."""
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise MalformedResponse("the body has no choices")
    text = choices[0].get("text")
    if not isinstance(text, str):
        raise MalformedResponse("the first choice has no text")
    finish = choices[0].get("finish_reason")
    usage = data.get("usage")
    return {
        "content": text,
        "finish_reason": finish if isinstance(finish, str) else None,
        "usage": usage if isinstance(usage, dict) else None,
    }


LIVE: Final = sibling(openai.LIVE, "OpenAICompletionsAdapter", "a text completion", "/completions")


#: OpenAI's error envelope.
error_body = error_envelope
