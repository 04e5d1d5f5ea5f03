"""Ollama ``POST /api/embed`` <-> the neutral embedding request and its vectors
(docs/embeddings.md).

``input`` is a string or an array of strings; ``model`` and ``dimensions`` are hashed,
as are ``truncate`` and ``options`` (``params``); ``keep_alive`` is not. The answer is
``{"model", "embeddings": [[...]], "prompt_eval_count"}``.
"""

from __future__ import annotations

import re
from typing import Any, Final

from ..._errors import RequestError
from ..._kinds import EMBEDDING
from ..._response import Response
from .._common import MalformedResponse, VendorCall
from .._unstreamed import unstreamed
from .._vectors import live_vector, read_texts, stored_vectors
from ._wire import NOT_HASHED, error_body, live_endpoint, live_options, live_usage, read_options

__all__ = [
    "LIVE",
    "PATHS",
    "ROUTES",
    "error_body",
    "from_response",
    "read_body",
    "response_body",
    "stream_body",
    "to_body",
]

ROUTES: Final = (re.compile(r"/api/embed/?$"),)
PATHS: Final = ("POST /api/embed",)

_OWNED: Final = NOT_HASHED | {"input", "dimensions", "options"}


def read_body(body: Any, path: str = "") -> VendorCall:
    """The neutral embedding request for an ``/api/embed`` body."""
    if type(body) is not dict:
        raise RequestError("the request body must be a JSON object")
    model = body.get("model")
    if type(model) is not str or not model:
        raise RequestError("model must be a non-empty string (an embedding is hashed with it)")
    request: dict[str, Any] = {
        "kind": EMBEDDING,
        "model": model,
        "texts": read_texts(body.get("input")),
    }
    if body.get("dimensions") is not None:
        request["dimensions"] = body["dimensions"]
    params = {k: v for k, v in body.items() if k not in _OWNED and v is not None}
    read_options(body, params)
    if params:
        request["params"] = params
    return VendorCall(request=request, model=model)


def response_body(response: Response, call: VendorCall) -> dict[str, Any]:
    """The ``/api/embed`` answer."""
    vectors = stored_vectors(response, len(call.request["texts"]))
    usage = response.usage or {}
    return {
        "model": call.model,
        "embeddings": vectors,
        "prompt_eval_count": usage.get("prompt_tokens", 0),
    }


def to_body(request: dict[str, Any], model: str) -> dict[str, Any]:
    """The live ``/api/embed`` body (the request's own model)."""
    params = dict(request.get("params", {}))
    body: dict[str, Any] = {"model": request["model"], "input": request["texts"]}
    if "truncate" in params:
        body["truncate"] = params.pop("truncate")
    if "dimensions" in request:
        body["dimensions"] = request["dimensions"]
    if params:
        body["options"] = live_options(params)
    return body


def from_response(data: Any) -> dict[str, Any]:
    """The neutral response for an ``/api/embed`` answer."""
    vectors = data.get("embeddings") if isinstance(data, dict) else None
    if not isinstance(vectors, list):
        raise MalformedResponse("the body has no embeddings")
    usage = live_usage(data)
    return {"embeddings": [live_vector(v) for v in vectors], "usage": usage}


LIVE: Final = live_endpoint("OllamaEmbedAdapter", "Ollama embeddings", "/api/embed")


#: Never streamed by the vendor: the JSON answer's bytes.
stream_body = unstreamed(response_body)
