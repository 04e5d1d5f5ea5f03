"""The provider-neutral request, its validation, normalisation and hash (docs/request.md).

A request is what the workflow builds before any vendor adapter sees it. It arrives as a
``Request`` Struct or a plain mapping of the same shape; both go through one path:

    mapping | Request --msgspec.convert--> Request (typed fields checked in C)
        --prepare free-form fields--> JSON-domain checked, floats patched for JCS
        --sorted encode, defaults omitted--> canonical bytes --sha256--> request_hash

Free-form fields (``params``, tool ``parameters``, content parts, ``tool_choice``,
``response_format``, ``scope``) are the only parts walked in Python; message strings, the bulk of
a prompt, are checked by msgspec and never revisited.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal

import msgspec

from ._canonical import all_clean, encode_prepared, needs_key_reorder, prepare
from ._errors import RequestError

__all__ = [
    "Message",
    "Request",
    "RequestLike",
    "Tool",
    "ToolCall",
    "canonical_request",
    "normalise_request",
    "request_hash",
]


class ToolCall(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A tool call made by the assistant; ``arguments`` is the JSON text of the arguments."""

    id: str
    name: str
    arguments: str


class Message(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """One chat message. ``content`` is a string, a list of content parts, or None."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] = []
    tool_call_id: str | None = None


class Tool(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A tool the model may call; ``parameters`` is a JSON Schema object."""

    name: str
    description: str | None = None
    parameters: dict[str, Any] = {}


class Request(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """The provider-neutral request. The model's name is provider configuration, not here."""

    messages: Annotated[list[Message], msgspec.Meta(min_length=1)]
    tools: list[Tool] = []
    tool_choice: str | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    params: dict[str, Any] = {}
    #: Tells apart otherwise identical requests that must get their own answers (an
    #: epoch, a rollout id); hashed, never sent to a live model. See docs/authoring.md.
    scope: dict[str, Any] | None = None


#: What every provider's ``complete`` accepts.
RequestLike = Request | Mapping[str, Any]

_STRUCTS: Final = (Request, Message, Tool, ToolCall)


def _unstruct(value: Any) -> Any:
    """Turn our Structs (possibly nested, possibly mixed with dicts) into mappings.

    A Struct is built without validation, so it is validated exactly as a mapping is.
    """
    if isinstance(value, _STRUCTS):
        return {name: _unstruct(getattr(value, name)) for name in value.__struct_fields__}
    if type(value) is list:
        return [_unstruct(item) for item in value]
    return value


def normalise_request(request: RequestLike, *, fast: bool = True) -> Request:
    """Validate ``request`` and return a fresh, checked ``Request``.

    Raises ``RequestError`` saying what is wrong and where (a JSON path).
    """
    if isinstance(request, Request):
        source: Any = _unstruct(request)
    elif isinstance(request, Mapping):
        source = request
    else:
        raise RequestError(
            f"a request must be a Request or a mapping, not {type(request).__name__}"
        )
    try:
        req = msgspec.convert(source, Request)
    except msgspec.ValidationError as exc:
        message = str(exc)
    else:
        _prepare_free_fields(req, fast)
        return req
    # Raised outside the except block: no chained parser exception to carry along.
    raise RequestError(f"invalid request: {message}")


def _prepare_free_fields(req: Request, fast: bool) -> None:
    """Check and patch, in place on our fresh copy, every free-form field."""
    for i, message in enumerate(req.messages):
        if type(message.content) is list:
            message.content = prepare(message.content, f"$.messages[{i}].content", fast=fast)
    tools = req.tools
    if fast and len(tools) > 1 and all_clean([tool.parameters for tool in tools]):
        tools = []  # every schema checked at once, in C; nothing to patch
    for i, tool in enumerate(tools):
        if tool.parameters:
            tool.parameters = prepare(tool.parameters, f"$.tools[{i}].parameters", fast=fast)
    if type(req.tool_choice) is dict:
        req.tool_choice = prepare(req.tool_choice, "$.tool_choice", fast=fast)
    if req.response_format is not None:
        req.response_format = prepare(req.response_format, "$.response_format", fast=fast)
    if req.params:
        req.params = prepare(req.params, "$.params", fast=fast)
    if req.scope is not None:
        # An empty scope pairs nothing apart: it hashes as no scope at all.
        req.scope = prepare(req.scope, "$.scope", fast=fast) if req.scope else None


def canonical_request(request: RequestLike) -> bytes:
    """The RFC 8785 bytes of the normalised request (what ``request_hash`` hashes)."""
    req = normalise_request(request)
    encoded = encode_prepared(req, req)
    if needs_key_reorder(encoded):
        # A character outside the BMP: prepare again, ordering such keys as JCS does.
        req = normalise_request(request, fast=False)
        encoded = encode_prepared(req, req)
    return encoded


def request_hash(request: RequestLike) -> str:
    """``sha256:`` + hex sha256 of the canonical JSON of the normalised request."""
    return "sha256:" + hashlib.sha256(canonical_request(request)).hexdigest()
