"""The stream body of a shape its vendor never streams (embeddings, token counts).

Runs in the caller's process, wherever the shape serves. Such an endpoint answers one
JSON body whatever the request says, so a caller that asked for a stream still gets
that body: its bytes are the shape's ``response_body`` encoded, written once here.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from .._response import Response
from ._common import VendorCall

__all__ = ["Unstreamed"]

_encode: Final = msgspec.json.encode


class Unstreamed:
    """Base of a shape answered only as JSON: ``stream_body`` is ``response_body``'s bytes."""

    def response_body(self, response: Response, call: VendorCall) -> dict[str, Any]:
        """The vendor's JSON answer; every subclass writes its own."""
        raise NotImplementedError

    def stream_body(self, response: Response, call: VendorCall) -> bytes:
        # Never streamed by the vendor: the JSON answer is the only form.
        return _encode(self.response_body(response, call))
