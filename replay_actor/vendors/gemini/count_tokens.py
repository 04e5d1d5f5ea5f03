"""Gemini ``POST …/models/{model}:countTokens`` <-> the neutral chat request of kind
``count_tokens`` and its ``input_tokens`` (docs/front-door.md, "Token counting").

The body is ``{"contents": [...]}`` (google-genai's form) or ``{"generateContentRequest":
{...}}``; either is read by the ``generateContent`` mapping (``gemini/``), so a
conversation counted hashes as that conversation with the ``count_tokens`` kind. The
answer is ``{"totalTokens": N}``.
"""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec

from ..._errors import RequestError
from .._common import VendorCall
from .._counting import chat_body, count_answer, counted, live_count
from .._endpoint import sibling
from .._unstreamed import unstreamed
from . import generate as gemini

__all__ = [
    "LIVE",
    "PATHS",
    "ROUTE",
    "ROUTES",
    "error_body",
    "from_response",
    "read_body",
    "response_body",
    "stream_body",
    "to_body",
]


ROUTE: Final = re.compile(r"/(?:models|tunedModels)/(?P<model>[^/:]+)(?::|%3[Aa])countTokens/?$")


def read_body(body: Any, path: str = "") -> VendorCall:
    """The neutral request (kind ``count_tokens``) for a countTokens body."""
    if type(body) is not dict:
        raise RequestError("the request body must be a JSON object")
    inner = body.get("generateContentRequest", body.get("generate_content_request"))
    if inner is not None:
        if type(inner) is not dict:
            raise RequestError("generateContentRequest must be an object")
        if set(body) - {"generateContentRequest", "generate_content_request"}:
            raise RequestError("send contents or generateContentRequest, not both")
        body = {k: v for k, v in inner.items() if k != "model"}
    call = gemini.read_body(body)
    match = ROUTE.search(path)
    return counted(msgspec.structs.replace(call, model=match["model"] if match else ""))


def to_body(request: dict[str, Any], model: str) -> dict[str, Any]:
    """The live countTokens body: the whole generateContent request, so the system
    instruction and tools are counted too."""
    inner = chat_body(request, model, gemini.to_body)
    name = model if model.startswith("models/") else f"models/{model}"
    return {"generateContentRequest": {"model": name, **inner}}


def from_response(data: Any) -> dict[str, Any]:
    """``{"input_tokens": N}`` for a live countTokens answer."""
    return live_count(data, "totalTokens")


LIVE: Final = sibling(
    gemini.LIVE,
    "GeminiCountTokensAdapter",
    "a token count",
    "/{api_version}/models/{model}:countTokens",
)


ROUTES: Final = (ROUTE,)
PATHS: Final = ("POST /v1beta/models/{model}:countTokens",)
#: The stored count, as Gemini answers it (never streamed).
response_body = count_answer("totalTokens")
stream_body = unstreamed(response_body)
#: Google's error envelope.
error_body = gemini.error_body
