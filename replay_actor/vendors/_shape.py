"""One vendor API as one value: :class:`Shape`, the contract every vendor shape keeps
(docs/sdk.md, "The mapping"), and :class:`ShapeModule`, what a shape's module defines.

Runs in: the caller's process, wherever a shape serves or asks live. A shape is data
and functions, nothing else. A shape's module writes its mapping as module functions
under the contract's names, beside three constants, and the shape is built from it
(:meth:`Shape.of`, by ``vendors.make_vendor``) instead of a class per shape that only
delegates (its registry name is its family's record's)::

    ROUTES = (re.compile(r"/chat/completions/?$"),)   # what it answers
    PATHS = ("POST /v1/chat/completions",)            # what a 404 lists
    LIVE = LiveEndpoint(...)                          # where its live adapter goes
    def read_body(body, path=""): ...                 # body -> VendorCall
    def response_body(response, call): ...            # neutral response -> JSON answer
    def stream_body(response, call): ...              # ... as the vendor streams it
    def error_body(kind, message, nearest): ...       # the vendor's error envelope
    def to_body(request, model): ...                  # neutral request -> live body
    def from_response(data): ...                      # live answer -> neutral response
    STREAM_TYPE = "application/x-ndjson"              # optional: not server-sent events
    KEEPS_LOGPROBS = True                             # optional: logprobs said, not refused

mypy holds every registered module to :class:`ShapeModule`
(tests/vendors/test_families.py). A shape that must remember what it served (the
Responses API's ``previous_response_id``) is made by a function instead, one shape per
serving provider, its functions closing over that provider's memory.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

if TYPE_CHECKING:
    from .._response import Response
    from ._common import VendorCall
    from ._endpoint import LiveEndpoint

__all__ = ["SSE", "ReadBody", "Shape", "ShapeModule"]

#: The content type of a streamed answer, unless the shape says otherwise (Ollama's
#: NDJSON).
SSE: Final = "text/event-stream; charset=utf-8"


class ReadBody(Protocol):
    """``read_body(body, path="")``: the neutral request and call options for a decoded
    request body (``path``, the URL path it was posted to, may carry the model or the
    streaming choice). Raises ``RequestError`` naming the field it cannot replay."""

    def __call__(self, body: Any, path: str = "") -> VendorCall: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Shape:
    """One vendor API's mapping to and from the neutral request and response."""

    #: The registry name (``openai``, ``anthropic``, ...): ``api=`` of the transports,
    #: ``--from`` of the CLI, ``adapter =`` of a manifest.
    name: str
    #: ``POST`` paths this API answers, matched with ``search`` against the URL path.
    routes: tuple[re.Pattern[str], ...]
    #: What a user reads for the routes (``POST /v1/chat/completions``), listed by a
    #: 404; a shape without them is listed as "the <name> API". Each must be routed by
    #: ``routes`` (``ValueError`` otherwise).
    paths: tuple[str, ...] = ()
    #: Where its live adapter sends a request (``adapters/builtin.py`` makes the adapter
    #: from it, ``to_body`` and ``from_response``).
    live: LiveEndpoint
    read_body: ReadBody
    #: The vendor's JSON answer for a neutral response.
    response_body: Callable[[Response, VendorCall], dict[str, Any]]
    #: The same answer as the vendor streams it, so its SDK's stream helper rebuilds
    #: exactly ``response_body`` (``_unstreamed.unstreamed`` for an API never streamed).
    stream_body: Callable[[Response, VendorCall], bytes]
    #: The vendor's error envelope ``(kind, message, nearest)``, which its SDK raises as
    #: its own exception.
    error_body: Callable[[str, str, dict[str, Any] | None], dict[str, Any]]
    #: The live request body for a plain normalised neutral request and the model.
    to_body: Callable[[dict[str, Any], str], dict[str, Any]]
    #: The neutral response dict for a live answer (``MalformedResponse`` if not the
    #: vendor's shape).
    from_response: Callable[[Any], dict[str, Any]]
    #: The content type of ``stream_body``.
    stream_type: str = SSE
    #: Its answers say token log probabilities (``logprobs``/``top_logprobs`` are
    #: recorded and replayed, not refused; OpenAI chat's and the Responses API's).
    keeps_logprobs: bool = False

    def __post_init__(self) -> None:
        # What a 404 lists is what the shape serves: a shape made from another with
        # routes of its own cannot keep listing the paths it no longer routes.
        for shown in self.paths:
            concrete = shown.partition(" ")[2].replace("{model}", "model")
            if not any(route.search(concrete) for route in self.routes):
                raise ValueError(f"the {self.name} shape lists {shown!r} but does not route it")

    @classmethod
    def of(cls, module: ShapeModule, name: str) -> Shape:
        """The shape a module defines (:class:`ShapeModule`), registered as ``name``."""
        return cls(
            name=name,
            routes=module.ROUTES,
            paths=module.PATHS,
            live=module.LIVE,
            read_body=module.read_body,
            response_body=module.response_body,
            stream_body=module.stream_body,
            error_body=module.error_body,
            to_body=module.to_body,
            from_response=module.from_response,
            stream_type=getattr(module, "STREAM_TYPE", SSE),
            keeps_logprobs=getattr(module, "KEEPS_LOGPROBS", False),
        )


class ShapeModule(Protocol):
    """What the module of a shape defines (the module docstring above shows it)."""

    @property
    def ROUTES(self) -> tuple[re.Pattern[str], ...]: ...

    @property
    def PATHS(self) -> tuple[str, ...]: ...

    @property
    def LIVE(self) -> LiveEndpoint: ...

    def read_body(self, body: Any, path: str = "") -> VendorCall: ...

    def response_body(self, response: Response, call: VendorCall) -> dict[str, Any]: ...

    def stream_body(self, response: Response, call: VendorCall) -> bytes: ...

    def error_body(
        self, kind: str, message: str, nearest: dict[str, Any] | None
    ) -> dict[str, Any]: ...

    def to_body(self, request: dict[str, Any], model: str) -> dict[str, Any]: ...

    def from_response(self, data: Any) -> dict[str, Any]: ...
