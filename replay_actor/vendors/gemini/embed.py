"""Gemini ``POST …/models/{model}:embedContent`` and ``:batchEmbedContents`` <-> the
neutral embedding request and its vectors (docs/embeddings.md).

One text per request for ``embedContent`` (``content.parts[].text``, joined), one per
item of ``requests`` for ``batchEmbedContents`` (google-genai's ``embed_content`` posts
this form, each item naming the model). The model comes from the path (or the items,
which must agree); ``outputDimensionality`` is the neutral ``dimensions``; ``taskType``
and ``title`` change the vectors and are hashed (``params``). The live side always posts
``batchEmbedContents``.
"""

from __future__ import annotations

import re
from typing import Any, Final

from ..._errors import RequestError
from ..._kinds import EMBEDDING
from ..._response import Response
from .._common import MalformedResponse, VendorCall
from .._endpoint import sibling
from .._unstreamed import unstreamed
from .._vectors import live_vector, stored_vectors
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


ROUTE: Final = re.compile(
    r"/(?:models|tunedModels)/(?P<model>[^/:]+)(?::|%3[Aa])"
    r"(?P<method>embedContent|batchEmbedContents)/?$"
)
_SNAKE: Final = {
    "task_type": "taskType",
    "output_dimensionality": "outputDimensionality",
}
_OPTIONS: Final = ("taskType", "title", "outputDimensionality")
_ITEM_KEYS: Final = frozenset({"model", "content", *_OPTIONS, *_SNAKE})


def _text(content: Any, where: str) -> str:
    parts = content.get("parts") if type(content) is dict else None
    if type(parts) is not list or not parts:
        raise RequestError(f"{where}.parts must be a non-empty array")
    texts = []
    for i, part in enumerate(parts):
        if type(part) is not dict or type(part.get("text")) is not str or len(part) != 1:
            raise RequestError(f"{where}.parts[{i}] must be a text part (only text is embedded)")
        texts.append(part["text"])
    return "".join(texts)


def _options(item: dict[str, Any], where: str) -> dict[str, Any]:
    """The hashed options of one item, camelCase; extra keys refused."""
    extra = sorted(set(item) - _ITEM_KEYS)
    if extra:
        raise RequestError(f"{where}{extra[0]} cannot be replayed")
    return {
        _SNAKE.get(k, k): v
        for k, v in item.items()
        if k not in ("model", "content") and v is not None
    }


def _model_name(value: Any) -> str:
    return value.removeprefix("models/") if type(value) is str else ""


def _items(body: dict[str, Any], match: re.Match[str] | None) -> tuple[list[Any], str]:
    """The items to embed and how to answer: a batch's ``requests``, or the body alone."""
    # Without a path (``--from gemini-embed`` of a file), ``requests`` says batch.
    batch = match["method"] == "batchEmbedContents" if match else "requests" in body
    if not batch:
        return [body], "single"
    items = body.get("requests")
    if type(items) is not list or not items or set(body) - {"requests"}:
        raise RequestError("requests must be a non-empty array (and the only field)")
    return items, "batch"


def _item(item: Any, where: str, model: str) -> tuple[str, str, dict[str, Any]]:
    """One item's model (the path's, else its own), text and options."""
    if type(item) is not dict:
        raise RequestError(f"{where or 'the body '}must be an object")
    named = _model_name(item.get("model"))
    if named and model and named != model:
        raise RequestError(f"{where}model differs from the model in the path")
    return model or named, _text(item.get("content"), f"{where}content"), _options(item, where)


def _read_items(items: list[Any], batch: bool, model: str) -> tuple[str, list[str], dict[str, Any]]:
    """The model, the texts, and the options every item shares (one set of options per
    request: the vectors are made alike)."""
    texts: list[str] = []
    options: dict[str, Any] | None = None
    for i, raw in enumerate(items):
        where = f"requests[{i}]." if batch else ""
        model, text, mine = _item(raw, where, model)
        if options is not None and mine != options:
            raise RequestError(f"{where}options differ from the first request's")
        texts.append(text)
        options = mine
    return model, texts, options or {}


def read_body(body: Any, path: str = "") -> VendorCall:
    """The neutral embedding request for an embedContent or batchEmbedContents body."""
    if type(body) is not dict:
        raise RequestError("the request body must be a JSON object")
    match = ROUTE.search(path)
    model = match["model"] if match else _model_name(body.get("model"))
    items, answer_as = _items(body, match)
    model, texts, options = _read_items(items, answer_as == "batch", model)
    if not model:
        raise RequestError("the model must be named (in the path or the body)")
    request: dict[str, Any] = {"kind": EMBEDDING, "model": model, "texts": texts}
    params = dict(options)
    dimensions = params.pop("outputDimensionality", None)
    if dimensions is not None:
        request["dimensions"] = dimensions
    if params:
        request["params"] = params
    return VendorCall(request=request, model=model, answer_as=answer_as)


def response_body(response: Response, call: VendorCall) -> dict[str, Any]:
    """``{"embedding": {values}}`` or ``{"embeddings": [{values}, ...]}``."""
    vectors = stored_vectors(response, len(call.request["texts"]))
    if call.answer_as == "single":
        return {"embedding": {"values": vectors[0]}}
    return {"embeddings": [{"values": vector} for vector in vectors]}


def to_body(request: dict[str, Any], model: str) -> dict[str, Any]:
    """The live batchEmbedContents body (the request's own model)."""
    name = "models/" + str(request["model"]).removeprefix("models/")
    options = dict(request.get("params", {}))
    if "dimensions" in request:
        options["outputDimensionality"] = request["dimensions"]
    return {
        "requests": [
            {"model": name, "content": {"parts": [{"text": text}]}, **options}
            for text in request["texts"]
        ]
    }


def from_response(data: Any) -> dict[str, Any]:
    """The neutral response for a live (batch or single) embedding answer."""
    if isinstance(data, dict) and isinstance(data.get("embedding"), dict):
        items = [data["embedding"]]
    elif isinstance(data, dict) and isinstance(data.get("embeddings"), list):
        items = data["embeddings"]
    else:
        raise MalformedResponse("the body has no embeddings")
    if not all(isinstance(item, dict) for item in items):
        raise MalformedResponse("an embedding is not an object")
    return {"embeddings": [live_vector(item.get("values")) for item in items]}


LIVE: Final = sibling(
    gemini.LIVE,
    "GeminiEmbedAdapter",
    "embeddings",
    "/{api_version}/models/{model}:batchEmbedContents",
)


ROUTES: Final = (ROUTE,)
PATHS: Final = (
    "POST /v1beta/models/{model}:embedContent",
    "POST /v1beta/models/{model}:batchEmbedContents",
)
#: Never streamed by the vendor: the JSON answer's bytes.
stream_body = unstreamed(response_body)
#: Google's error envelope.
error_body = gemini.error_body
