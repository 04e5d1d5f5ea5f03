"""What Ollama's three shapes share (docs/ollama.md): generation ``options`` and
``format`` in the neutral request's terms, the answer's frame (whole and as NDJSON) and
its counts, the error envelope and where the live API is.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from ..._errors import RequestError
from ..._response import Response
from .._common import VendorCall
from .._endpoint import LiveEndpoint

__all__ = [
    "CREATED_AT",
    "NDJSON",
    "NOT_HASHED",
    "answer_body",
    "answer_stream",
    "counts",
    "error_body",
    "live_endpoint",
    "live_format",
    "live_options",
    "live_usage",
    "ndjson",
    "read_format",
    "read_options",
]

#: Body keys that never change the answer (how long the model stays loaded, streaming).
NOT_HASHED: Final = frozenset({"model", "stream", "keep_alive"})
#: Ollama's name -> the neutral parameter's, so an answer hashes alike everywhere.
_OPTION_NAMES: Final[dict[str, str]] = {"num_predict": "max_tokens"}
_OPTION_NAMES_BACK: Final = {v: k for k, v in _OPTION_NAMES.items()}
#: Every answer's ``created_at``: deterministic, so a replay is the same bytes each time.
CREATED_AT: Final = "1970-01-01T00:00:00Z"
#: The streamed answer's content type.
NDJSON: Final = "application/x-ndjson"
_encode: Final = msgspec.json.encode


def read_options(body: dict[str, Any], params: dict[str, Any]) -> None:
    """``options`` (temperature, top_p, seed, stop, num_predict, ...) into ``params``."""
    options = body.get("options")
    if options is None:
        return
    if type(options) is not dict:
        raise RequestError("options must be an object")
    for key, value in options.items():
        if value is None:
            continue
        name = _OPTION_NAMES.get(str(key), str(key))
        params[name] = [value] if name == "stop" and type(value) is str else value


def live_options(params: dict[str, Any]) -> dict[str, Any]:
    """The neutral ``params`` back as Ollama ``options``."""
    return {_OPTION_NAMES_BACK.get(k, k): v for k, v in params.items()}


def read_format(value: Any) -> dict[str, Any] | None:
    """``format``: ``"json"`` or a JSON schema, as the ``response_format`` a chat call
    asking for the same gives (None: plain text)."""
    if value is None or value == "":
        return None
    if value == "json":
        return {"type": "json_object"}
    if type(value) is dict:
        return {"type": "json_schema", "json_schema": {"schema": value}}
    raise RequestError("format must be 'json' or a JSON schema object")


def live_format(response_format: dict[str, Any]) -> Any:
    """A neutral ``response_format`` as Ollama's ``format``."""
    if response_format.get("type") == "json_schema":
        schema = response_format.get("json_schema")
        if isinstance(schema, dict) and isinstance(schema.get("schema"), dict):
            return schema["schema"]
    return "json"


def counts(response: Response) -> dict[str, Any]:
    """The answer's ``prompt_eval_count`` and ``eval_count`` from the stored usage."""
    usage = response.usage or {}
    prompt = usage.get("prompt_tokens", usage.get("input_tokens", 0))
    completion = usage.get("completion_tokens", usage.get("output_tokens", 0))
    return {"prompt_eval_count": prompt, "eval_count": completion}


def live_usage(data: dict[str, Any]) -> dict[str, Any] | None:
    """A live answer's counts as the neutral usage."""
    prompt = data.get("prompt_eval_count")
    completion = data.get("eval_count")
    if type(prompt) is not int and type(completion) is not int:
        return None
    prompt = prompt if type(prompt) is int else 0
    completion = completion if type(completion) is int else 0
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def answer_body(response: Response, call: VendorCall, key: str, value: Any) -> dict[str, Any]:
    """A whole answer of ``/api/chat`` (``key`` ``message``) or ``/api/generate``
    (``response``): ``value`` framed as Ollama frames it, with the counts."""
    return {
        "model": call.model,
        "created_at": CREATED_AT,
        key: value,
        "done": True,
        "done_reason": "length" if response.finish_reason == "length" else "stop",
        **counts(response),
    }


def answer_stream(response: Response, call: VendorCall, key: str, value: Any, empty: Any) -> bytes:
    """The same answer as NDJSON: ``value`` in a first line, then the ``done`` line with
    ``empty`` in its place and the counts."""
    first = {"model": call.model, "created_at": CREATED_AT, key: value, "done": False}
    return ndjson([first, answer_body(response, call, key, empty)])


def ndjson(lines: list[dict[str, Any]]) -> bytes:
    """Newline-delimited JSON, as Ollama streams."""
    return b"".join(_encode(line) + b"\n" for line in lines)


def error_body(kind: str, message: str, nearest: dict[str, Any] | None) -> dict[str, Any]:
    """Ollama's error envelope (``{"error": message}``; the ollama client raises
    ``ResponseError`` with it); the kind and ``nearest`` ride beside it."""
    body: dict[str, Any] = {"error": message, "type": kind}
    if nearest is not None:
        body["nearest"] = nearest
    return body


def live_endpoint(adapter: str, shape: str, path: str, **more: Any) -> LiveEndpoint:
    """Where an Ollama shape's live adapter goes: a local server by default; a key, when
    the table names one (Ollama's cloud), as a bearer token."""
    return LiveEndpoint(
        adapter=adapter,
        shape=shape,
        base_url="http://127.0.0.1:11434",
        path=path,
        key_header="Authorization",
        key_prefix="Bearer ",
        **more,
    )
