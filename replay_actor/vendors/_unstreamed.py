"""The stream body of a shape its vendor never streams (embeddings, token counts).

Runs in the caller's process, wherever the shape serves. Such an endpoint answers one
JSON body whatever the request says, so a caller that asked for a stream still gets
that body: its bytes are the shape's ``response_body`` encoded, written once here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgspec

from .._response import Response
from ._common import VendorCall

__all__ = ["unstreamed"]

_encode: Final = msgspec.json.encode


def unstreamed(
    answer: Callable[[Response, VendorCall], dict[str, Any]],
) -> Callable[[Response, VendorCall], bytes]:
    """The ``stream_body`` of a shape whose ``response_body`` is ``answer``: the JSON
    answer's bytes (never streamed by the vendor, the JSON answer is the only form)."""

    def streamed(response: Response, call: VendorCall) -> bytes:
        return _encode(answer(response, call))

    return streamed
