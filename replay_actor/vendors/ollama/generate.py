"""Ollama ``POST /api/generate`` <-> the neutral ``completion`` request (docs/ollama.md).

``prompt`` is the prompt; ``system``, ``suffix``, ``template``, ``raw``, ``think`` and the
generation ``options`` are hashed in ``params``; ``format`` as chat's. ``context`` (the
token state of an earlier answer) and ``images`` are refused: a fixture holds text. The
answer's text is the stored ``content``; it streams as NDJSON unless ``stream: false``.
"""

from __future__ import annotations

import re
from typing import Any, Final

from ..._errors import RequestError
from ..._kinds import COMPLETION
from ..._response import Response
from .._common import MalformedResponse, VendorCall, vendor_call
from ._wire import (
    NDJSON,
    NOT_HASHED,
    answer_body,
    answer_stream,
    error_body,
    live_endpoint,
    live_format,
    live_options,
    live_usage,
    read_format,
    read_options,
)

__all__ = [
    "LIVE",
    "PATHS",
    "ROUTES",
    "STREAM_TYPE",
    "error_body",
    "from_response",
    "read_body",
    "response_body",
    "stream_body",
    "to_body",
]

ROUTES: Final = (re.compile(r"/api/generate/?$"),)
PATHS: Final = ("POST /api/generate",)
#: Ollama streams newline-delimited JSON.
STREAM_TYPE: Final = NDJSON

_OWNED: Final = NOT_HASHED | {"prompt", "format", "options"}
_REFUSED: Final = ("context", "images")
#: Keys that never reach ``params``: the ones the mapping owns and the refused ones
#: (present only when empty).
_UNHASHED: Final = _OWNED | frozenset(_REFUSED)


def read_body(body: Any, path: str = "") -> VendorCall:
    """The neutral completion request for an ``/api/generate`` body."""
    if type(body) is not dict:
        raise RequestError("the request body must be a JSON object")
    refused = [key for key in _REFUSED if body.get(key)]
    if refused:
        raise RequestError(f"{refused[0]} cannot be replayed or recorded")
    prompt = body.get("prompt", "")
    if type(prompt) is not str:
        raise RequestError("prompt must be a string")
    request: dict[str, Any] = {"kind": COMPLETION, "prompt": prompt}
    params = {k: v for k, v in body.items() if k not in _UNHASHED and v is not None}
    response_format = read_format(body.get("format"))
    if response_format is not None:
        params["format"] = response_format
    read_options(body, params)
    return vendor_call(body, request, params, stream=body.get("stream") is not False)


def response_body(response: Response, call: VendorCall) -> dict[str, Any]:
    """The whole ``/api/generate`` answer (``stream: false``)."""
    return answer_body(response, call, "response", response.content or "")


def stream_body(response: Response, call: VendorCall) -> bytes:
    """The answer as NDJSON: the text, then an empty ``done`` line with the counts."""
    return answer_stream(response, call, "response", response.content or "", "")


_TOP_LEVEL: Final = frozenset({"system", "suffix", "template", "raw", "think"})


def to_body(request: dict[str, Any], model: str) -> dict[str, Any]:
    """The live ``/api/generate`` body (never streamed)."""
    params = dict(request.get("params", {}))
    body: dict[str, Any] = {"model": model, "prompt": request["prompt"], "stream": False}
    for key in sorted(_TOP_LEVEL.intersection(params)):
        body[key] = params.pop(key)
    if "format" in params:
        body["format"] = live_format(params.pop("format"))
    if params:
        body["options"] = live_options(params)
    return body


def from_response(data: Any) -> dict[str, Any]:
    """The neutral response for a whole ``/api/generate`` answer."""
    text = data.get("response") if isinstance(data, dict) else None
    if not isinstance(text, str):
        raise MalformedResponse("the body has no response text")
    done = data.get("done_reason")
    return {
        "content": text,
        "finish_reason": "length" if done == "length" else "stop",
        "usage": live_usage(data),
    }


LIVE: Final = live_endpoint("OllamaGenerateAdapter", "an Ollama answer", "/api/generate")
