"""Token counting, shared by the three counting shapes (docs/front-door.md, "Token
counting"): a counting body is the vendor's chat body, read by that vendor's chat
mapping and given the ``count_tokens`` kind; the answer is the stored ``input_tokens``;
a live count sends the chat body that vendor's mapping writes back.
"""

from __future__ import annotations

from collections.abc import Callable, Set
from typing import Any

import msgspec

from .._kinds import COUNT_TOKENS
from .._response import Response, Unexpressible
from ._common import MalformedResponse, VendorCall

__all__ = ["chat_body", "count_answer", "counted", "live_count", "stored_count"]


def counted(call: VendorCall) -> VendorCall:
    """``call`` asking for the token count of its conversation (never streamed)."""
    request = {**call.request, "kind": COUNT_TOKENS}
    return msgspec.structs.replace(call, request=request, stream=False)


def chat_body(
    request: dict[str, Any],
    model: str,
    to_body: Callable[[dict[str, Any], str], dict[str, Any]],
    keys: Set[str] | None = None,
) -> dict[str, Any]:
    """The live chat body a count asks about: ``request`` without its ``kind`` through the
    vendor's chat ``to_body``, keeping only ``keys`` when given (what that counting
    endpoint takes; it refuses the rest)."""
    chat = {k: v for k, v in request.items() if k != "kind"}
    body = to_body(chat, model)
    return body if keys is None else {k: v for k, v in body.items() if k in keys}


def stored_count(response: Response) -> int:
    """The stored count; ``Unexpressible`` when the entry holds none."""
    if response.input_tokens is None:
        raise Unexpressible("the stored response holds no input_tokens")
    return response.input_tokens


def count_answer(key: str, **fixed: str) -> Callable[[Response, VendorCall], dict[str, Any]]:
    """A counting shape's ``response_body``: the stored count under ``key``, after the
    ``fixed`` fields the vendor's answer carries (OpenAI's ``object``)."""

    def answer(response: Response, call: VendorCall) -> dict[str, Any]:
        return {**fixed, key: stored_count(response)}

    return answer


def live_count(data: Any, key: str) -> dict[str, Any]:
    """The neutral response for a live count answer holding the integer ``key``."""
    count = data.get(key) if isinstance(data, dict) else None
    if type(count) is not int or count < 0:
        raise MalformedResponse(f"the body has no {key} count")
    return {"input_tokens": count}
