"""Anthropic ``POST /v1/messages/count_tokens`` <-> the neutral chat request of kind
``count_tokens`` and its ``input_tokens`` (docs/front-door.md, "Token counting").

The body is a messages body without ``max_tokens``; it is read by the messages mapping
(``anthropic.py``), so a conversation counted hashes as that conversation with the
``count_tokens`` kind.
"""

from __future__ import annotations

import re
from typing import Any, Final

from ..._errors import RequestError
from .._common import VendorCall
from .._counting import chat_body, count_answer, counted, live_count
from .._endpoint import sibling
from .._unstreamed import unstreamed
from . import messages as anthropic

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

ROUTES: Final = (re.compile(r"/messages/count_tokens/?$"),)
PATHS: Final = ("POST /v1/messages/count_tokens",)

#: What the counting endpoint takes of a messages body (anything else is refused there).
_COUNTED_KEYS: Final = frozenset(
    {"model", "messages", "system", "tools", "tool_choice", "thinking", "mcp_servers"}
)


def read_body(body: Any, path: str = "") -> VendorCall:
    """The neutral request (kind ``count_tokens``) for a count_tokens body."""
    if type(body) is not dict:
        raise RequestError("the request body must be a JSON object")
    return counted(anthropic.read_body(body))


def to_body(request: dict[str, Any], model: str) -> dict[str, Any]:
    """The live count_tokens body: the messages body without what counting refuses."""
    return chat_body(request, model, anthropic.to_body, _COUNTED_KEYS)


def from_response(data: Any) -> dict[str, Any]:
    """``{"input_tokens": N}`` for a live count answer."""
    return live_count(data, "input_tokens")


LIVE: Final = sibling(
    anthropic.LIVE, "AnthropicCountTokensAdapter", "a token count", "/v1/messages/count_tokens"
)


#: The stored count, as Anthropic answers it (never streamed).
response_body = count_answer("input_tokens")
stream_body = unstreamed(response_body)
#: Anthropic's error envelope.
error_body = anthropic.error_body
