"""The kinds of neutral request beyond chat (docs/request.md, "Request kinds").

A chat request (``Request``, ``_request.py``) has no ``kind`` field: every fixture recorded
before kinds existed hashes exactly as it did. Every other kind carries ``"kind"`` in the
hashed bytes, so no request of one kind can hash like a request of another::

    kind            struct               hashed fields                       answer
    (absent)        Request              messages, tools, params, ...        content, tool_calls
    count_tokens    Request              the chat request + kind             input_tokens
    completion      CompletionRequest    prompt, params, scope + kind        content
    embedding       EmbeddingRequest     texts, model, dimensions, params,   embeddings
                                         scope + kind
    mcp             McpRequest           method, params, server, scope       result | error
                                         + kind
    http            HttpRequest          method, scheme, host, port, path,   status, headers,
                                         query, named headers, body,         body
                                         scope + kind

An embedding's ``model`` is hashed (a vector means something only for the model that made
it); a completion model stays provider configuration, as a chat model does. An MCP
request is one JSON-RPC request to an MCP server (docs/mcp.md): its ``method`` and what
of its ``params`` changes the answer, never its ``id``. This module owns the structs of
the kinds with their own fields (``OTHER_REQUESTS``) and their canonical bytes;
``_request.py`` dispatches to it on the ``kind`` of the request it is given, so a new kind
is written here alone. A tool's HTTP exchange (``http``) has its struct and its rules in
``_http_kind.py`` (docs/tools.md); it is listed here as the others are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal

import msgspec

from ._canonical import canonical_json
from ._errors import RequestError
from ._http_kind import HTTP, HttpRequest

__all__ = [
    "CHAT_KINDS",
    "COMPLETION",
    "COUNT_TOKENS",
    "EMBEDDING",
    "HTTP",
    "MCP",
    "OTHER_REQUESTS",
    "CompletionRequest",
    "EmbeddingRequest",
    "HttpRequest",
    "McpRequest",
    "OtherRequest",
    "kind_of",
    "other_kind_canonical",
    "other_kind_request",
]

#: The ``kind`` of a token-counting request: the chat request, not answered but counted.
COUNT_TOKENS: Final = "count_tokens"
#: The ``kind`` of a legacy completion (prompt text in, text out).
COMPLETION: Final = "completion"
#: The ``kind`` of an embedding request (texts in, one vector per text out).
EMBEDDING: Final = "embedding"
#: The ``kind`` of one request to an MCP server (JSON-RPC ``method`` and ``params``).
MCP: Final = "mcp"
#: The kinds a ``Request`` (messages) may carry: chat is the absent kind.
CHAT_KINDS: Final = (COUNT_TOKENS,)


class EmbeddingRequest(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """Texts to embed with ``model``; the answer holds one vector per text, in order.

    ``dimensions`` asks for shorter vectors (OpenAI's ``dimensions``, Gemini's
    ``outputDimensionality``); ``params`` holds the vendor's other options that change
    the vectors (Gemini's ``taskType`` and ``title``, Ollama's ``truncate``).
    """

    model: Annotated[str, msgspec.Meta(min_length=1)]
    texts: Annotated[list[str], msgspec.Meta(min_length=1)]
    dimensions: Annotated[int, msgspec.Meta(ge=1)] | None = None
    params: dict[str, Any] = {}
    scope: dict[str, Any] | None = None
    kind: Literal["embedding"] = "embedding"


class CompletionRequest(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A legacy completion: ``prompt`` text continued by the model (``/v1/completions``,
    Ollama's ``/api/generate``); the answer's ``content`` is the completion text."""

    prompt: str
    params: dict[str, Any] = {}
    scope: dict[str, Any] | None = None
    kind: Literal["completion"] = "completion"


class McpRequest(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """One request to an MCP server: the JSON-RPC ``method`` and the part of its
    ``params`` that changes the answer (``replay-actor mcp`` leaves out ``_meta`` but for
    the protocol version, and ``initialize``'s ``clientInfo`` and ``capabilities``:
    docs/mcp.md, "What is hashed"). ``server`` tells apart servers that share a fixture
    (``replay-actor mcp --name``). The answer is ``{"result": ...}`` or ``{"error": ...}``,
    the server's JSON-RPC answer without its ``id``."""

    method: Annotated[str, msgspec.Meta(min_length=1)]
    params: dict[str, Any] = {}
    server: str | None = None
    scope: dict[str, Any] | None = None
    kind: Literal["mcp"] = "mcp"


#: A request of a kind with fields of its own (not a ``Request``'s messages).
OtherRequest = EmbeddingRequest | CompletionRequest | McpRequest | HttpRequest
#: Their structs, for ``isinstance`` and for the fields a request sidecar may hold.
OTHER_REQUESTS: Final = (EmbeddingRequest, CompletionRequest, McpRequest, HttpRequest)
_OTHER: Final[dict[str, type[msgspec.Struct]]] = {
    EMBEDDING: EmbeddingRequest,
    COMPLETION: CompletionRequest,
    MCP: McpRequest,
    HTTP: HttpRequest,
}


def kind_of(source: Mapping[str, Any]) -> str | None:
    """The ``kind`` a request mapping names (None: chat)."""
    kind = source.get("kind")
    return kind if type(kind) is str else None


def other_kind_canonical(source: Mapping[str, Any] | msgspec.Struct) -> bytes | None:
    """The canonical bytes of an embedding, completion or http request (``kind``
    included), or None when ``source`` is a chat-shaped request (``Request``'s path
    hashes it).

    Raises ``RequestError`` naming what is wrong (a JSON path), as chat requests do.
    """
    kind: str | None
    if isinstance(source, OTHER_REQUESTS):
        kind = source.kind
        source = {name: getattr(source, name) for name in source.__struct_fields__}
    elif isinstance(source, Mapping):
        kind = kind_of(source)
    else:
        return None
    into = _OTHER.get(kind) if kind is not None else None
    if into is None:
        return None
    try:
        checked = msgspec.convert(source, into)
    except msgspec.ValidationError as exc:
        message = str(exc)
    else:
        plain: dict[str, Any] = msgspec.to_builtins(checked)
        plain["kind"] = kind  # the default, which omit_defaults left out: always hashed
        if plain.get("scope") == {}:
            del plain["scope"]  # an empty scope pairs nothing apart, as for chat
        return canonical_json(plain)
    # Raised outside the except block: no chained parser exception to carry along.
    raise RequestError(f"invalid request: {message}")


def other_kind_request(source: Mapping[str, Any] | msgspec.Struct) -> OtherRequest | None:
    """The checked struct of a request of another kind (None: a chat-shaped request,
    which ``_request.py`` builds). Raises ``RequestError`` as ``other_kind_canonical``."""
    canonical = other_kind_canonical(source)
    if canonical is None:
        return None
    plain = msgspec.json.decode(canonical)
    made: OtherRequest = msgspec.convert(plain, _OTHER[plain["kind"]])  # type: ignore[assignment]
    return made
