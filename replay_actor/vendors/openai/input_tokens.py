"""OpenAI ``POST /v1/responses/input_tokens`` <-> the neutral chat request of kind
``count_tokens`` and its ``input_tokens`` (docs/front-door.md, "Token counting").

The body is a Responses request body, read by the Responses mapping
(``responses/``), so a conversation counted hashes as that conversation with the
``count_tokens`` kind. ``previous_response_id`` is refused here: counting has no memory
of served responses (send the conversation as input).
"""

from __future__ import annotations

import re
from typing import Any, Final

from ..._errors import RequestError
from .._common import VendorCall, error_envelope
from .._counting import chat_body, count_answer, counted, live_count
from .._endpoint import sibling
from .._unstreamed import unstreamed
from . import chat as openai
from .responses.live import to_body as responses_body
from .responses.request import read_body as read_responses

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

ROUTES: Final = (re.compile(r"/responses/input_tokens/?$"),)
PATHS: Final = ("POST /v1/responses/input_tokens",)

#: What the counting endpoint takes of a Responses body.
_COUNTED_KEYS: Final = frozenset(
    {
        "model",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "text",
        "reasoning",
        "parallel_tool_calls",
        "truncation",
    }
)


def _no_memory(previous_id: Any) -> dict[str, Any]:
    raise RequestError(
        "previous_response_id cannot be counted by replay-actor; send the conversation as input"
    )


def read_body(body: Any, path: str = "") -> VendorCall:
    """The neutral request (kind ``count_tokens``) for an input_tokens body."""
    if type(body) is not dict:
        raise RequestError("the request body must be a JSON object")
    call = read_responses(body, _no_memory)
    return counted(VendorCall(request=call.request, model=call.model))


def to_body(request: dict[str, Any], model: str) -> dict[str, Any]:
    """The live input_tokens body: the Responses body without what counting refuses."""
    return chat_body(request, model, responses_body, _COUNTED_KEYS)


def from_response(data: Any) -> dict[str, Any]:
    """``{"input_tokens": N}`` for a live input_tokens answer."""
    return live_count(data, "input_tokens")


LIVE: Final = sibling(
    openai.LIVE, "OpenAIInputTokensAdapter", "a token count", "/responses/input_tokens"
)


#: The stored count, as OpenAI answers it (never streamed).
response_body = count_answer("input_tokens", object="response.input_tokens")
stream_body = unstreamed(response_body)
#: OpenAI's error envelope.
error_body = error_envelope
