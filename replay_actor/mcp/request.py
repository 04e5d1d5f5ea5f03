"""One MCP request as the fixture sees it, and the answers the relay gives (docs/mcp.md).

Runs in: the ``replay-actor mcp`` process.

The neutral request of a JSON-RPC request to an MCP server (kind ``mcp``,
``_kinds.McpRequest``) is what changes the server's answer, and nothing that varies from
run to run or from client to client::

    {"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"forecast",
     "arguments":{"city":"Paris"},"_meta":{"progressToken":7}}}
      -> {"kind":"mcp","method":"tools/call",
          "params":{"name":"forecast","arguments":{"city":"Paris"}}}

- the ``id`` is the client's numbering of its calls: never hashed;
- ``params._meta`` is metadata about the call (the progress token, and at the stateless
  protocol version the client's name, version and capabilities on every request): left
  out, but for ``io.modelcontextprotocol/protocolVersion``, which decides the answer's
  shape;
- ``initialize``'s ``clientInfo`` and ``capabilities`` describe the client, and an
  upgrade of the client's SDK changes them: left out; its ``protocolVersion`` is kept
  (the server's answer is the version it agrees to).

The fixture's answer is the server's JSON-RPC answer without its envelope:
``{"result": {...}}`` or ``{"error": {"code", "message", "data"?}}``, validated with the
MCP SDK's own JSON-RPC models before it is sent.

The models are imported from ``mcp_types``, the SDK's wire types (``mcp.types`` is the
same objects): importing ``mcp`` itself loads the SDK's whole client and server stack,
which a replay, which starts no server, never uses.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from typing import Any, Final

from mcp_types import ErrorData, JSONRPCError, JSONRPCRequest, JSONRPCResponse, RequestId
from pydantic import ValidationError

from .._kinds import MCP

__all__ = [
    "ADAPTER",
    "EXHAUSTED_CODE",
    "LOCAL_METHODS",
    "MISS_CODE",
    "NOT_AN_ANSWER",
    "PROTOCOL_VERSION_META",
    "RELAYED",
    "answer_of",
    "error_message",
    "neutral_request",
    "stored_answer",
]

#: The live adapter of the server behind the relay (``adapter.py``), by its entry point's
#: name in the group ``replay_actor.adapters``.
ADAPTER: Final = "mcp"
#: Answered by the relay itself, never recorded: a liveness check says nothing of tools.
LOCAL_METHODS: Final = frozenset({"ping"})
#: The one ``_meta`` key that is hashed: the protocol version a stateless request names.
PROTOCOL_VERSION_META: Final = "io.modelcontextprotocol/protocolVersion"
#: ``initialize``'s parameters that describe the client rather than ask anything.
_CLIENT_KEYS: Final = ("clientInfo", "capabilities")
#: The client's JSON-RPC request while the relay has the provider answer it: the live
#: adapter sends it on as it came (its id and its ``_meta``, which the neutral request
#: leaves out). Context-local, so concurrent calls never see each other's.
RELAYED: Final[contextvars.ContextVar[JSONRPCRequest | None]] = contextvars.ContextVar(
    "replay_actor_mcp_relayed", default=None
)
#: JSON-RPC error codes of a replay that failed closed, in the range the MCP
#: specification leaves to implementations (-32000..-32019; the SDK uses -32000 and
#: -32001 itself).
MISS_CODE: Final = -32010
EXHAUSTED_CODE: Final = -32011


def neutral_request(
    method: str, params: Mapping[str, Any] | None, server: str | None = None
) -> dict[str, Any]:
    """The neutral ``mcp`` request of a JSON-RPC request (the module docstring's rules);
    ``server`` is ``replay-actor mcp --name``."""
    hashed = dict(params or {})
    meta = hashed.pop("_meta", None)
    if isinstance(meta, Mapping) and PROTOCOL_VERSION_META in meta:
        hashed["_meta"] = {PROTOCOL_VERSION_META: meta[PROTOCOL_VERSION_META]}
    if method == "initialize":
        for key in _CLIENT_KEYS:
            hashed.pop(key, None)
    request: dict[str, Any] = {"kind": MCP, "method": method}
    if hashed:
        request["params"] = hashed
    if server is not None:
        request["server"] = server
    return request


def stored_answer(message: JSONRPCResponse | JSONRPCError) -> dict[str, Any]:
    """What the fixture keeps of a server's answer: its result or error, no ``id``."""
    if isinstance(message, JSONRPCResponse):
        return {"result": message.result}
    error: dict[str, Any] = message.error.model_dump(mode="json", exclude_unset=True)
    return {"error": error}


def answer_of(
    stored: Mapping[str, Any], request_id: RequestId
) -> JSONRPCResponse | JSONRPCError | None:
    """The JSON-RPC answer to the request ``request_id`` from the fixture's answer; None
    when that is not an MCP answer (a hand-written entry with ``content``, say)."""
    keys = set(stored)
    try:
        if keys == {"result"}:
            return JSONRPCResponse(jsonrpc="2.0", id=request_id, result=stored["result"])
        if keys == {"error"}:
            error = ErrorData.model_validate(stored["error"])
            return JSONRPCError(jsonrpc="2.0", id=request_id, error=error)
    except ValidationError:
        pass
    return None


#: Why ``answer_of`` found no MCP answer (the error message the client gets).
NOT_AN_ANSWER: Final = (
    'the fixture\'s answer to this request is not an MCP answer: an object with "result" '
    '(an object) or "error" (code, message), as replay-actor mcp records them'
)


def error_message(
    request_id: RequestId | None, code: int, message: str, data: Any = None
) -> JSONRPCError:
    """A JSON-RPC error answer."""
    extra = {} if data is None else {"data": data}  # absent, not null, when there is none
    error = ErrorData(code=code, message=message, **extra)
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=error)
