"""The provider-neutral request, its validation, normalisation and hash (docs/request.md).

A request is what the workflow builds before any vendor adapter sees it. It arrives as a
``Request`` Struct or a plain mapping of the same shape; both go through one path, in
two parts that are joined at the end (Request's fields sort with "messages" first):

    messages --msgspec.convert--> typed check in C --sorted encode--> {"messages":[...]
    each other field (the configuration: tools, params, tool_choice, ...)
        --remembered by its exact marshal image, else typed check + JCS walk-->
        ,"params":{...},...,"tools":[...]}
    the two parts --sha256--> request_hash

Free-form values (``params``, tool ``parameters``, content parts, ``tool_choice``,
``response_format``, ``scope``) are the only parts that need more than msgspec: they are checked
and patched for RFC 8785 by ``_canonical``. The configuration is usually the same for
every call of an evaluation, so its canonical bytes are remembered (``_memo.Memo``);
the messages, the prompt itself, are not. Message strings, the bulk of a prompt, are
checked by msgspec and encoded once; the Struct's own keys are ASCII, so the sorted
encode is already JCS.
"""

from __future__ import annotations

import contextvars
import hashlib
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Final, Literal, TypeVar

import msgspec

from ._canonical import (
    canonical_each,
    clean_as_they_are,
    encode_prepared,
    needs_key_reorder,
)
from ._errors import RequestError
from ._kinds import OTHER_REQUESTS, OtherRequest, other_kind_canonical, other_kind_request
from ._memo import Memo
from ._response import Reasoning

__all__ = [
    "HASHED",
    "AnyRequest",
    "Message",
    "Request",
    "RequestLike",
    "Tool",
    "ToolCall",
    "canonical_request",
    "canonical_request_and_reasoning",
    "normalise_request",
    "request_hash",
    "request_hash_and_canonical",
    "request_hash_in_turn",
]


class ToolCall(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A tool call made by the assistant; ``arguments`` is the JSON text of the arguments."""

    id: str
    name: str
    arguments: str


class Message(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """One chat message. ``content`` is a string, a list of content parts, or None.

    ``reasoning`` is the model's own reasoning sent back with an assistant message
    (``{"vendor", "items"}``, as the neutral response gives it): decided by the earlier
    turns, so it is never hashed, only carried to a live adapter of the same vendor
    (docs/request.md, "Reasoning sent back").
    """

    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] = []
    tool_call_id: str | None = None
    reasoning: Reasoning | None = None


class Tool(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A tool the model may call; ``parameters`` is a JSON Schema object.

    ``strict`` asks the model to follow the schema exactly (OpenAI's
    ``function.strict``, Anthropic's ``strict``); false, the vendors' default, is
    omitted, so only ``strict: true`` is part of the hash.
    """

    name: str
    description: str | None = None
    parameters: dict[str, Any] = {}
    strict: bool = False


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
    #: What is asked of the conversation: absent (None) for a chat answer, so chat hashes
    #: are those of every fixture made before kinds; ``"count_tokens"`` for its token
    #: count (docs/request.md, "Request kinds").
    kind: Literal["count_tokens"] | None = None


#: A request of any kind (docs/request.md, "Request kinds").
AnyRequest = Request | OtherRequest
#: What every provider's ``complete`` accepts.
RequestLike = Request | OtherRequest | Mapping[str, Any]

_STRUCTS: Final = (Request, Message, Tool, ToolCall, Reasoning)


def _unstruct(value: Any) -> Any:
    """Turn our Structs (possibly nested, possibly mixed with dicts) into mappings.

    A Struct is built without validation, so it is validated exactly as a mapping is.
    """
    if isinstance(value, _STRUCTS):
        return {name: _unstruct(getattr(value, name)) for name in value.__struct_fields__}
    if type(value) is list:
        return [_unstruct(item) for item in value]
    return value


def _source(request: RequestLike) -> Mapping[str, Any]:
    """The mapping to validate: ``request`` itself, or a Struct's fields as mappings."""
    if type(request) is dict:
        return request
    if isinstance(request, Request):
        return _unstruct(request)  # type: ignore[no-any-return]
    if isinstance(request, OTHER_REQUESTS):
        return {name: getattr(request, name) for name in request.__struct_fields__}
    if isinstance(request, Mapping):
        return request
    raise RequestError(f"a request must be a Request or a mapping, not {type(request).__name__}")


def _convert(source: Any, into: type[_T]) -> _T:
    try:
        return msgspec.convert(source, into)
    except msgspec.ValidationError as exc:
        message = str(exc)
    # Raised outside the except block: no chained parser exception to carry along.
    raise RequestError(f"invalid request: {message}")


_T = TypeVar("_T")

# The request is hashed in two parts. The messages change with every call; everything
# else (tools, their schemas, generation parameters: the "configuration") is usually the
# same for every call of an evaluation, so its canonical bytes are remembered (keyed by
# its exact marshal image, see _memo.Memo). Request's fields sort as "messages"
# first, so the canonical request is the messages' object with the configuration's
# members appended.
_FIELDS: Final = msgspec.structs.fields(Request)
_CONFIG_NAMES: Final = tuple(field.name for field in _FIELDS if field.name != "messages")
#: ``kind`` sorts before ``messages``: it leads the canonical bytes instead of following.
_LEADING: Final = "kind"
_KIND_PREFIX: Final = b'{"kind":"count_tokens",'
_HASHED_KINDS: Final = {"count_tokens": _KIND_PREFIX}
_Config: Final[Any] = msgspec.defstruct(
    "_Config",
    [
        (field.name, field.type, msgspec.field(default=field.default))
        if field.default_factory is msgspec.NODEFAULT
        else (field.name, field.type, msgspec.field(default_factory=field.default_factory))
        for field in _FIELDS
        if field.name != "messages"
    ],
    forbid_unknown_fields=True,
    omit_defaults=True,
)


def _conversation(message: type[msgspec.Struct]) -> Any:
    """A request whose messages are ``message`` Structs and whose configuration fields
    are taken as they are (checked by ``_Config``), UNSET when absent."""
    return msgspec.defstruct(
        f"_ConversationOf{message.__name__}",
        [("messages", Annotated[list[message], msgspec.Meta(min_length=1)])]  # type: ignore[valid-type]
        + [(name, Any, msgspec.UNSET) for name in _CONFIG_NAMES],
        forbid_unknown_fields=True,
        omit_defaults=True,
    )


#: ``Message`` without content parts and without reasoning: most requests have neither,
#: and a conversion into this type says so without a look at each message (the others
#: take ``_Conversation``).
_PLAIN_TYPES: Final[dict[str, Any]] = {"content": str | None, "reasoning": None}
_PlainMessage: Final[Any] = msgspec.defstruct(
    "_PlainMessage",
    [
        (
            field.name,
            _PLAIN_TYPES.get(field.name, field.type),
            msgspec.field(default=field.default)
            if field.default_factory is msgspec.NODEFAULT
            else msgspec.field(default_factory=field.default_factory),
        )
        for field in msgspec.structs.fields(Message)
    ],
    forbid_unknown_fields=True,
    omit_defaults=True,
)
_PlainConversation: Final = _conversation(_PlainMessage)
_Conversation: Final = _conversation(Message)


#: The free-form fields of ``Request`` itself: every configuration field but the tools
#: (Structs, whose schemas are listed apart) may hold any JSON. A value that is no
#: container (a ``tool_choice`` string, None) is kept as msgspec checked it, so a new
#: field of ``Request`` (``scope``) needs no change here.
_TOP_LEVEL_FREE: Final = tuple(name for name in _CONFIG_NAMES if name != "tools")
_TOP: Final = len(_TOP_LEVEL_FREE)


def _config_path(i: int) -> str:
    return f"$.{_TOP_LEVEL_FREE[i]}" if i < _TOP else f"$.tools[{i - _TOP}].parameters"


def _config_bytes(present: dict[str, Any]) -> bytes:
    """The canonical bytes of the configuration fields in ``present`` (no messages)."""
    cfg = _convert(present, _Config)
    tools = cfg.tools
    values = [getattr(cfg, name) for name in _TOP_LEVEL_FREE]
    values += [tool.parameters for tool in tools]
    if clean_as_they_are(values):
        encoded = encode_prepared(cfg, cfg)
        if not needs_key_reorder(encoded):
            return encoded
    raws = canonical_each(values, _config_path)
    for name, raw in zip(_TOP_LEVEL_FREE, raws[:_TOP], strict=True):
        if raw is not None:
            setattr(cfg, name, raw)
    for tool, raw in zip(tools, raws[_TOP:], strict=True):
        if raw is not None:
            tool.parameters = raw
    return encode_prepared(cfg, cfg)


def _member(name: str) -> Callable[[Any], bytes]:
    """How to compute field ``name``'s member, as it follows the messages: ``,"name":…``
    (empty when the value is the field's default, which is omitted)."""

    def compute(value: Any) -> bytes:
        if name == "scope" and value == {}:
            return b""  # an empty scope pairs nothing apart: it hashes as no scope at all
        encoded = _config_bytes({name: value})
        return b"" if encoded == b"{}" else b"," + encoded[1:-1]

    return compute


# One memo per configuration field, so that a field that changes from call to call (a
# seed, a scope) does not make the others be computed again.
_MEMBERS: Final[tuple[tuple[str, Memo[bytes], Callable[[Any], bytes]], ...]] = tuple(
    (name, Memo(len, max_value=1024 * 1024, max_bytes=4 * 1024 * 1024), _member(name))
    for name in sorted(_CONFIG_NAMES)  # the canonical order: the names are ASCII
    if name != _LEADING
)


#: The reasoning a request carries: (message index, ``{"vendor", "items"}``) pairs.
Carried = list[tuple[int, dict[str, Any]]]


def _reasoning_json(reasoning: Reasoning, i: int) -> dict[str, Any]:
    """``reasoning`` as plain JSON (what an adapter sends); ``RequestError`` if its items
    hold something JSON cannot say."""
    try:
        plain: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(reasoning))
    except (TypeError, ValueError, OverflowError):
        plain = {}
    else:
        return plain
    # Raised outside the except block: no chained exception carrying the items along.
    raise RequestError(f"$.messages[{i}].reasoning.items is not JSON")


def _canonical_contents(messages: list[Message], carried: Carried | None) -> None:
    """Replace, on our fresh copy, every list of content parts by its canonical bytes,
    and take every message's reasoning out (into ``carried`` when asked for): it is not
    hashed (docs/request.md, "Reasoning sent back").

    Not remembered, unlike the configuration: content parts are the prompt itself, which
    changes from call to call and may be private, so no copy of it outlives the call.
    """
    for i, message in enumerate(messages):
        if type(message.content) is list:
            (raw,) = canonical_each([message.content], lambda _: f"$.messages[{i}].content")  # noqa: B023 - called at once
            if raw is not None:
                message.content = raw  # type: ignore[assignment]
        if message.reasoning is not None:
            plain = _reasoning_json(message.reasoning, i)
            if carried is not None:
                carried.append((i, plain))
            message.reasoning = None  # the default: omitted from the encoding


def _canonical_parts(
    request: RequestLike, carried: Carried | None = None
) -> tuple[bytes, list[bytes]]:
    """The canonical request in parts: the messages' object (its closing brace is to be
    dropped), then the configuration's members, closing brace included. The reasoning
    messages carry is left out, and appended to ``carried`` if that is given."""
    other = other_kind_canonical(request)
    if other is not None:
        return other, [b"}"]
    source = _source(request)
    try:
        conversation = msgspec.convert(source, _PlainConversation)
    except msgspec.ValidationError:  # content parts, reasoning, or an invalid request
        conversation = _convert(source, _Conversation)
        _canonical_contents(conversation.messages, carried)
    members = []
    unset = msgspec.UNSET
    for name, memo, compute in _MEMBERS:
        value = getattr(conversation, name)
        if value is not unset:
            members.append(memo(value, compute))
            setattr(conversation, name, unset)  # the head holds the messages only
    members.append(b"}")
    kind = conversation.kind
    conversation.kind = unset  # it leads the bytes (sorted before "messages"), if at all
    if kind is unset or kind is None:
        return encode_prepared(conversation, conversation), members
    prefix = _HASHED_KINDS.get(kind) if type(kind) is str else None
    if prefix is None:
        raise RequestError(
            "invalid request: $.kind must be 'count_tokens', 'embedding', 'completion' or "
            "'mcp' or 'http' (absent for chat)"
        )
    return prefix + encode_prepared(conversation, conversation)[1:], members


def normalise_request(request: RequestLike) -> AnyRequest:
    """Validate ``request`` and return a fresh, checked request of its kind (a
    ``Request``, or one of ``_kinds.OTHER_REQUESTS``: ``EmbeddingRequest``,
    ``CompletionRequest``, ``McpRequest``, ``HttpRequest``).

    Raises ``RequestError`` saying what is wrong and where (a JSON path).
    """
    other = other_kind_request(request)
    if other is not None:
        return other
    _canonical_parts(request)  # checks every free-form value as hashing does
    return _convert(_source(request), Request)


def canonical_request(request: RequestLike) -> bytes:
    """The RFC 8785 bytes of the normalised request (what ``request_hash`` hashes)."""
    head, members = _canonical_parts(request)
    return b"".join([head[:-1], *members])


def canonical_request_and_reasoning(request: RequestLike) -> tuple[bytes, Carried]:
    """``canonical_request(request)`` and the reasoning its messages carry, which the
    canonical bytes leave out: (message index, plain ``{"vendor", "items"}``) pairs, for a
    live provider to hand on to its adapter."""
    carried: Carried = []
    head, members = _canonical_parts(request, carried)
    return b"".join([head[:-1], *members]), carried


#: ``(request, its hash)`` while a wrapper that has just hashed ``request`` hands it on
#: (the run log's provider, attribution/provider.py): the provider it wraps then reads
#: the hash instead of computing it again. Context-local, so another thread or asyncio
#: task never sees it, and matched by identity within that one hand-over only.
HASHED: Final[contextvars.ContextVar[tuple[object, str] | None]] = contextvars.ContextVar(
    "replay_actor_hashed", default=None
)


def request_hash_and_canonical(
    request: RequestLike, keep: Callable[[str], bool]
) -> tuple[str, bytes | None]:
    """``request_hash(request)`` and, when ``keep(hash)`` says so, the canonical bytes
    it hashed (``canonical_request(request)``), from one walk of the request: a caller
    that needs both (the run log, for its request sidecar) never walks it twice."""
    handed = HASHED.get()
    if handed is not None and handed[0] is request:
        return handed[1], canonical_request(request) if keep(handed[1]) else None
    head, members = _canonical_parts(request)
    digest = hashlib.sha256(memoryview(head)[:-1])
    digest.update(b"".join(members))
    hashed = "sha256:" + digest.hexdigest()
    return hashed, b"".join([head[:-1], *members]) if keep(hashed) else None


def request_hash(request: RequestLike) -> str:
    """``sha256:`` + hex sha256 of the canonical JSON of the normalised request."""
    handed = HASHED.get()
    if handed is not None and handed[0] is request:
        return handed[1]
    head, members = _canonical_parts(request)
    digest = hashlib.sha256(memoryview(head)[:-1])
    digest.update(b"".join(members))
    return "sha256:" + digest.hexdigest()


#: hashlib lets go of the GIL for an update of 2,048 bytes or more (CPython's
#: ``HASHLIB_GIL_MINSIZE``); a piece this long never does.
_PIECE: Final = 2047


def request_hash_in_turn(request: RequestLike) -> str:
    """``request_hash(request)``, computed without ever letting go of the GIL.

    For a thread that shares its process with other calling threads (``caller/sync.py``):
    a release in the middle of a hash that takes microseconds hands the GIL to another
    thread, and the hashing thread then sleeps until it gets it back. The same digest,
    fed to sha256 in pieces too short for hashlib to release the GIL around.
    """
    handed = HASHED.get()
    if handed is not None and handed[0] is request:
        return handed[1]
    head, members = _canonical_parts(request)
    data = memoryview(b"".join([memoryview(head)[:-1], *members]))
    digest = hashlib.sha256(data[:_PIECE])
    update = digest.update
    for start in range(_PIECE, len(data), _PIECE):
        update(data[start : start + _PIECE])
    return "sha256:" + digest.hexdigest()
