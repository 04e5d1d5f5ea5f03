"""OpenAI embeddings ``POST /v1/embeddings`` <-> the neutral embedding request and its
vectors (docs/embeddings.md).

``input`` is a string or an array of strings (token arrays are refused: a fixture holds
text); ``model`` and ``dimensions`` are hashed, ``user`` is not, any other key goes to
``params`` (hashed). The answer's ``encoding_format`` is not hashed: the SDK's default
``base64`` and ``float`` are both served from one recorded entry, float32-exact. The live
side always asks for ``base64``, so what is recorded is exactly the float32 the model
gave.
"""

from __future__ import annotations

import re
from typing import Any, Final

from ..._errors import RequestError
from ..._kinds import EMBEDDING
from ..._response import Response
from .._common import NOT_HASHED, MalformedResponse, VendorCall, error_envelope
from .._endpoint import sibling
from .._unstreamed import unstreamed
from .._vectors import float32_base64, live_vector, read_texts, stored_vectors
from . import chat as openai

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

# Not /api/embeddings: that is Ollama's older endpoint, which is not served.
ROUTES: Final = (re.compile(r"(?<!/api)/embeddings/?$"),)
PATHS: Final = ("POST /v1/embeddings",)

_OWNED: Final = NOT_HASHED | {"input", "encoding_format", "dimensions"}
_FORMATS: Final = frozenset({"float", "base64"})


def read_body(body: Any, path: str = "") -> VendorCall:
    """The neutral embedding request for an embeddings body (``path`` says nothing more)."""
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
    dimensions = body.get("dimensions")
    if dimensions is not None:
        request["dimensions"] = dimensions
    params = {k: v for k, v in body.items() if k not in _OWNED}
    if params:
        request["params"] = params
    return VendorCall(request=request, model=model, answer_as=_encoding(body))


def _encoding(body: dict[str, Any]) -> str:
    """How the vectors are asked for (not hashed: one entry answers both)."""
    form = body.get("encoding_format")
    if form is None:
        return "float"  # the API's default when the field is absent
    if type(form) is not str or form not in _FORMATS:
        raise RequestError("encoding_format must be 'float' or 'base64'")
    return form


def response_body(response: Response, call: VendorCall) -> dict[str, Any]:
    """The ``list`` of ``embedding`` objects, in the asked encoding."""
    as_base64 = call.answer_as == "base64"
    vectors = stored_vectors(response, len(call.request["texts"]), raw=as_base64)
    usage = response.usage or {}
    prompt = usage.get("prompt_tokens", 0)
    return {
        "object": "list",
        "data": [
            {
                "object": "embedding",
                "index": i,
                "embedding": float32_base64(vector) if as_base64 else vector,
            }
            for i, vector in enumerate(vectors)
        ],
        "model": call.model,
        "usage": {"prompt_tokens": prompt, "total_tokens": usage.get("total_tokens", prompt)},
    }


def to_body(request: dict[str, Any], model: str) -> dict[str, Any]:
    """The live embeddings body: the request's own model, base64 (exact float32)."""
    body: dict[str, Any] = dict(request.get("params", {}))
    body.update(model=request["model"], input=request["texts"], encoding_format="base64")
    if "dimensions" in request:
        body["dimensions"] = request["dimensions"]
    return body


def from_response(data: Any) -> dict[str, Any]:
    """The neutral response (``embeddings`` in input order, ``usage``) for a live answer."""
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise MalformedResponse("the body has no data array")
    items = data["data"]
    if not all(isinstance(item, dict) for item in items):
        raise MalformedResponse("a data item is not an object")
    indexes = [item.get("index", i) for i, item in enumerate(items)]
    if sorted(indexes) != list(range(len(items))):
        raise MalformedResponse("the data indexes are not 0..n-1")
    ordered = sorted(zip(indexes, items, strict=True), key=lambda pair: pair[0])
    usage = data.get("usage")
    return {
        "embeddings": [live_vector(item.get("embedding")) for _, item in ordered],
        "usage": usage if isinstance(usage, dict) else None,
    }


LIVE: Final = sibling(openai.LIVE, "OpenAIEmbeddingsAdapter", "an embeddings list", "/embeddings")


#: Never streamed by the vendor: the JSON answer's bytes.
stream_body = unstreamed(response_body)
#: OpenAI's error envelope.
error_body = error_envelope
