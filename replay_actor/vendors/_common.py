"""Mapping rules shared by every vendor shape (see docs/sdk.md, "The mapping").

Two rules decide whether one conversation hashes alike through different vendors' SDKs
and frameworks, so they live in one place:

- tool-call arguments are JSON text; when the text parses as JSON it is re-encoded as
  RFC 8785, so ``{"a": 1}`` and ``{"a":1.0}`` name the same call (text that is not JSON
  is kept as it is: the request still hashes, just not across spellings);
- message content that is an array of exactly one text part without other keys is that
  text, so ``[{"type": "text", "text": "hi"}]`` and ``"hi"`` hash alike; any other array
  is kept verbatim (an image part, a second part or a ``cache_control`` key means
  something a plain string cannot say).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

import msgspec

from .._canonical import canonical_json
from .._errors import RequestError
from .._response import Response, Unexpressible

__all__ = [
    "NOT_HASHED",
    "MalformedResponse",
    "VendorCall",
    "arguments_object",
    "canonical_arguments",
    "collapse_content",
    "echoed_model",
    "error_envelope",
    "identifier",
    "read_tools",
    "refuse_unfaithful",
    "response_id",
    "vendor_call",
]

_decode: Final = msgspec.json.decode

#: Body keys that do not change the answer (transport, billing, caching and retention
#: hints): never hashed, in every vendor mapping (docs/sdk.md, "The mapping"). openai-agents
#: sends a random ``prompt_cache_key`` and ``store: true`` on every run, for instance.
NOT_HASHED: Final = frozenset(
    {
        "model",
        "stream",
        "stream_options",
        "store",
        "prompt_cache_key",
        "prompt_cache_retention",
        "metadata",
        "service_tier",
        "safety_identifier",
        "user",
        "include",
    }
)
_TEXT_PART_KEYS: Final = frozenset({"type", "text"})
_IDENTIFIER: Final = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")


def canonical_arguments(text: str) -> str:
    """``text`` as RFC 8785 when it parses as one JSON value, else ``text`` unchanged.

    A value RFC 8785 cannot encode exactly (``1e400``, an integer beyond 2^53 - 1) keeps
    its original spelling too: rewriting it would change what the model was given.
    """
    try:
        value = _decode(text)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        # Nested too deeply to decode: kept as text, as a string that is not JSON is.
        return text
    try:
        return canonical_json(value).decode()
    except RequestError:
        return text


def arguments_object(arguments: str) -> dict[str, Any]:
    """A stored call's ``arguments`` text as the object the vendors that take one send
    (Anthropic's ``input``, Gemini's ``args``); ``Unexpressible`` when it is not a JSON
    object."""
    try:
        value = _decode(arguments)
    except msgspec.DecodeError:
        value = None
    if type(value) is not dict:
        raise Unexpressible("a stored tool call's arguments are not a JSON object")
    return value


def collapse_content(content: Any) -> Any:
    """A one-text-part array becomes its string; any other value is returned as is."""
    if type(content) is list and len(content) == 1:
        part = content[0]
        if (
            type(part) is dict
            and part.keys() == _TEXT_PART_KEYS
            and part["type"] == "text"
            and type(part["text"]) is str
        ):
            return part["text"]
    return content


def response_id(response: Response, prefix: str) -> str:
    """``prefix`` + 24 hex characters of the sha256 of the response's canonical JSON.

    Deterministic (a rerun sees the same ids) and derived from the response only: the
    request hash never leaves the caller through an id.
    """
    return prefix + hashlib.sha256(canonical_json(msgspec.to_builtins(response))).hexdigest()[:24]


def identifier(value: Any) -> str:
    """``value`` quoted when it is a short identifier (a type name, an id), for an error
    message; anything else could be a payload and is not repeated."""
    if type(value) is str and _IDENTIFIER.match(value):
        return repr(value)
    return "(not an identifier)"


def error_envelope(kind: str, message: str, nearest: dict[str, Any] | None) -> dict[str, Any]:
    """OpenAI's error object (``{"error": {message, type, param, code}}``), which the
    OpenAI-shaped APIs share; ``nearest`` (docs/authoring.md) rides beside the message."""
    error: dict[str, Any] = {"message": message, "type": kind, "param": None, "code": kind}
    if nearest is not None:
        error["nearest"] = nearest
    return {"error": error}


class MalformedResponse(Exception):
    """A live endpoint's body does not have the vendor's shape (the adapters turn it into
    a ``LiveProviderError`` holding this short, payload-free description)."""


class VendorCall(msgspec.Struct, frozen=True):
    """A vendor request body read: the neutral request and how to answer it."""

    #: The plain neutral request (validated later, by the provider).
    request: dict[str, Any]
    #: Echoed in the response, as the vendor does; never hashed.
    model: str
    #: Answer as server-sent events.
    stream: bool = False
    #: OpenAI's ``stream_options.include_usage``: a final usage chunk.
    include_usage: bool = False
    #: A shape's own word on how to answer, never hashed: OpenAI's embedding
    #: ``encoding_format`` (``float``/``base64``), Gemini's single or batch embedding.
    answer_as: str = ""


def echoed_model(call: VendorCall | str) -> str:
    """The model an answer echoes: the call's, or ``call`` itself when an answer is asked
    for with only the model (a caller that has no call)."""
    return call if isinstance(call, str) else call.model


def vendor_call(
    body: dict[str, Any],
    request: dict[str, Any],
    params: dict[str, Any],
    *,
    stream: bool,
    include_usage: bool = False,
) -> VendorCall:
    """The :class:`VendorCall` ending every shape's ``read_body``: ``params`` joins the
    request only when it holds something, so a body without parameters reads as a request
    without ``params``; the echoed model is the body's when it is a string, else ``""``."""
    if params:
        request["params"] = params
    model = body.get("model")
    return VendorCall(
        request=request,
        model=model if type(model) is str else "",
        stream=stream,
        include_usage=include_usage,
    )


def _not_one(n: Any) -> bool:
    # ``True == 1`` in Python: a bool is not the count 1, whatever the equality says.
    return n is not None and (type(n) is bool or n != 1)


#: What a neutral response cannot hold: (field, whether a value asks for it, what the
#: refusal names), in the order they are checked. A shape that says logprobs (OpenAI
#: chat's, the Responses API's) skips the two logprobs rows.
_LOGPROBS: Final = frozenset({"logprobs", "top_logprobs"})
_UNFAITHFUL: Final[tuple[tuple[str, Callable[[Any], bool], str], ...]] = (
    ("n", _not_one, "n other than 1"),
    ("logprobs", lambda value: value not in (None, False), "logprobs"),
    ("top_logprobs", lambda value: value is not None, "top_logprobs"),
    ("audio", lambda value: value is not None, "audio output"),
    (
        "modalities",
        lambda value: value is not None and value != ["text"],
        "modalities other than ['text']",
    ),
)


def refuse_unfaithful(
    fields: Mapping[str, Any], where: str = "", *, stream: bool = False, logprobs: bool = False
) -> None:
    """Raise ``RequestError`` naming the first field asking for something a neutral
    response cannot hold: ``n`` other than 1, ``logprobs``/``top_logprobs`` (unless
    ``logprobs``: the shape says them, OpenAI chat's and Responses), ``audio``, output
    ``modalities`` other than text (and ``stream`` itself when ``stream`` is set: the
    live adapters answer whole messages).

    Replaying or recording such a request would silently drop what the caller asked for.
    """
    for field, asks, what in _UNFAITHFUL:
        if logprobs and field in _LOGPROBS:
            continue
        if asks(fields.get(field)):
            shape = " in this API's shape" if field in _LOGPROBS else ""
            raise RequestError(f"{where}{what} cannot be replayed or recorded{shape}")
    if stream and "stream" in fields:
        raise RequestError(f"{where}stream cannot be set in params (the adapter owns it)")


def read_tools(
    body: Mapping[str, Any],
    request: dict[str, Any],
    tools: Callable[[list[Any]], list[dict[str, Any]]],
    choice: Callable[[Any], Any],
    *,
    choice_key: str = "tool_choice",
) -> None:
    """A body's tools (``tools``, read by ``tools``) and tool choice (``choice_key``, read
    by ``choice``) into the neutral ``request``.

    No tools (absent, or an empty array) says nothing, and neither does a tool choice
    without tools: it changes nothing the model can do, so it is not hashed.
    """
    raw = body.get("tools")
    if raw is not None:
        if type(raw) is not list:
            raise RequestError("tools must be an array")
        made = tools(raw) if raw else []
        if made:
            request["tools"] = made
    raw_choice = body.get(choice_key)
    if raw_choice is not None and "tools" in request:
        chosen = choice(raw_choice)
        if chosen is not None:
            request["tool_choice"] = chosen
