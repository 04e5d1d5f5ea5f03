"""What a provider transport answers, whichever HTTP client library carries it.

One HTTP exchange in, one provider call, one HTTP answer out::

    POST .../chat/completions | .../v1/messages   --vendors.<api>.read_body-->  neutral request
    provider.complete / acomplete (exactly once)  --vendors.<api>.response_body / stream_body-->
    200 JSON, or 200 text/event-stream when the body asked for "stream": true

Every failure is an HTTP error the vendors' SDKs raise as their own exception and never
retry: each carries ``x-should-retry: false`` (both SDKs obey it before their status-code
rules), and no exception ever leaves the transport (an exception would be a connection
error, which the SDKs retry, asking the provider again). Nothing is forwarded anywhere.

=========================  ======  =====================
failure                    status  ``error.type``
=========================  ======  =====================
other path or method       404     ``not_found``
invalid request            400     ``invalid_request``
miss                       404     ``replay_miss``
exhausted sequence         404     ``replay_exhausted``
released provider / lost   503     ``replay_unavailable``
live endpoint failed       502     ``live_provider_error``
=========================  ======  =====================

The error message is the exception's own first line (for a miss, exactly the message
docs/privacy.md gives): in private mode it carries no hash, and no header or id is
derived from the request hash, so nothing private crosses. In normal mode a miss that
the fixture's request sidecar explains adds ``error.nearest`` (``{"request_hash",
"paths"}``, docs/authoring.md) beside the message, so an SDK user can read it from the
exception's ``body``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol

import msgspec

from .._errors import (
    ActorLost,
    LiveProviderError,
    ProviderClosed,
    ReplayError,
    ReplayMiss,
    RequestError,
    SequenceExhausted,
)
from .._response import Unexpressible, read_response
from .._strict_json import MAX_BODY_DEPTH, NotStrictJSON, loads_strict
from ..vendors import Vendor, make_vendor, served_with, vendor_names
from ..vendors._common import VendorCall
from ._outcomes import Kind, Outcomes

if TYPE_CHECKING:
    from .._interface import Provider

__all__ = [
    "API_NAMES",
    "SCOPE_HEADER",
    "Answer",
    "Api",
    "AsyncServing",
    "Exchange",
    "HeaderLists",
    "Serving",
    "scope_values",
]

#: A registered vendor API name (``vendors.REGISTRY``).
Api = str
API_NAMES: Final = vendor_names()

#: (status, headers, body)
Answer = tuple[int, list[tuple[str, str]], bytes]

_JSON: Final = ("content-type", "application/json")
_SSE: Final = ("content-type", "text/event-stream; charset=utf-8")
_NO_RETRY: Final = ("x-should-retry", "false")
_encode: Final = msgspec.json.encode

#: The header that sets the request's ``scope`` (docs/request.md) for a client that cannot add
#: fields to the body: ``x-replay-scope: {"epoch": 2}`` (docs/front-door.md).
SCOPE_HEADER: Final = "x-replay-scope"


class HeaderLists(Protocol):
    """Headers that keep a repeated header's values apart (httpx's and httpx2's
    ``Headers``, the front door's ASGI list)."""

    def get_list(self, key: str) -> list[str]: ...


def scope_values(headers: HeaderLists | Mapping[str, str] | None) -> list[str]:
    """Every value of the ``x-replay-scope`` header, in order (a plain mapping holds one)."""
    if headers is None:
        return []
    get_list = getattr(headers, "get_list", None)
    if get_list is not None:
        return list(get_list(SCOPE_HEADER))
    assert isinstance(headers, Mapping)
    value = headers.get(SCOPE_HEADER)
    return [] if value is None else [value]


def outcome_of(exc: BaseException) -> Kind:
    """The summary's kind of a call that failed with ``exc`` (``_outcomes``)."""
    if isinstance(exc, ReplayMiss):
        return "missed"
    if isinstance(exc, SequenceExhausted):
        return "exhausted"
    if isinstance(exc, RequestError):
        return "invalid"
    return "failed"


def _error(
    vendor: Vendor, status: int, kind: str, message: str, nearest: dict[str, Any] | None = None
) -> Answer:
    return status, [_JSON, _NO_RETRY], _encode(vendor.error_body(kind, message, nearest))


def _failure(vendor: Vendor, exc: BaseException) -> Answer:
    if isinstance(exc, RequestError):
        return _error(vendor, 400, "invalid_request", str(exc))
    if isinstance(exc, ReplayMiss):
        # The first line is the miss message; the explanation goes in its own field.
        message = str(exc).partition("\n")[0]
        return _error(vendor, 404, "replay_miss", message, exc.nearest)
    if isinstance(exc, SequenceExhausted):
        return _error(vendor, 404, "replay_exhausted", str(exc))
    if isinstance(exc, ProviderClosed | ActorLost):
        return _error(vendor, 503, "replay_unavailable", str(exc))
    if isinstance(exc, LiveProviderError):
        return _error(vendor, 502, "live_provider_error", str(exc))
    if isinstance(exc, Unexpressible):
        return _error(vendor, 500, "replay_unexpressible", str(exc))
    if isinstance(exc, ReplayError):
        return _error(vendor, 500, "replay_error", str(exc))
    # A bug: say which, never what (the message could quote the request).
    return _error(vendor, 500, "replay_internal_error", f"internal error ({type(exc).__name__})")


class Exchange:
    """Routing and answers for the vendor APIs one serving provider speaks: one API
    (``api="openai"``, an SDK's transport) or every registered one (``api=None``, the front
    door), routed by the URL path. Shared by every transport class."""

    __slots__ = ("_vendors", "api")

    def __init__(self, api: str | None) -> None:
        # api="openai" answers the OpenAI SDK's chat completions and Responses calls.
        names = vendor_names() if api is None else served_with(api)
        # make_vendor raises ValueError naming the registered APIs for an unknown one.
        self._vendors: tuple[Vendor, ...] = tuple(make_vendor(name) for name in names)
        self.api = api

    def _route(self, method: str, path: str) -> Vendor | Answer:
        if method == "POST":
            for vendor in self._vendors:
                if any(route.search(path) for route in vendor.routes):
                    return vendor
        answers = " or ".join(
            route.pattern.rstrip("$").removesuffix("/?")
            for vendor in self._vendors
            for route in vendor.routes
        )
        return _error(
            self._vendors[0],
            404,
            "not_found",
            f"replay-actor answers only POST {answers}, not {method} {path}",
        )

    def read(self, method: str, path: str, body: bytes) -> tuple[Vendor, VendorCall] | Answer:
        """The vendor and the call to make, or the answer when there is none to make."""
        vendor = self._route(method, path)
        if isinstance(vendor, tuple):
            return vendor
        problem: str | None = None
        try:
            # Strictly, by the CLI's rules: a repeated key or a body nested deeper than
            # MAX_BODY_DEPTH is refused, so nothing after this can recurse out of stack.
            data = loads_strict(body.decode("utf-8"), max_depth=MAX_BODY_DEPTH)
        except UnicodeDecodeError:
            problem = "the request body is not JSON (not valid UTF-8)"
        except NotStrictJSON as exc:
            problem = f"the request body is not JSON ({exc})"
        if problem is not None:
            return _error(vendor, 400, "invalid_request", problem)
        try:
            call: VendorCall = vendor.read_body(data, path)
        except RequestError as exc:
            return _failure(vendor, exc)
        return vendor, call

    def answer(self, vendor: Vendor, call: VendorCall, response: dict[str, Any]) -> Answer:
        try:
            neutral = read_response(response)
            if not call.stream:
                return 200, [_JSON], _encode(vendor.response_body(neutral, call))
            return 200, [_SSE], vendor.stream_body(neutral, call)
        except Exception as exc:
            return _failure(vendor, exc)

    def fail(self, vendor: Vendor, exc: BaseException) -> Answer:
        return _failure(vendor, exc)

    def scoped(
        self, vendor: Vendor, call: VendorCall, values: Sequence[str]
    ) -> VendorCall | Answer:
        """``call`` with the ``x-replay-scope`` header's object as its request's ``scope``
        (``call`` itself without the header), or the 400 answer naming the header.
        ``values``: the header's values (``scope_values``); more than one is refused,
        whatever they are, so no reader's choice between them decides the hash."""
        if not values:
            return call
        if len(values) > 1:
            once = f"the {SCOPE_HEADER} header must appear at most once"
            return _error(vendor, 400, "invalid_request", once)
        text = values[0]
        try:
            # The body's rules: no repeated key, no nesting past the bound.
            scope = loads_strict(text, max_depth=MAX_BODY_DEPTH)
        except NotStrictJSON:
            scope = None
        if type(scope) is not dict:
            return _error(
                vendor, 400, "invalid_request", f"the {SCOPE_HEADER} header must be a JSON object"
            )
        # The provider validates the scope like every other field (RequestError -> 400).
        return msgspec.structs.replace(call, request={**call.request, "scope": scope})


class _Serving:
    """What every transport class holds, whatever its HTTP library: the vendor API's
    routing (``Exchange``), the provider, and whether closing releases it."""

    def __init__(
        self,
        provider: Provider,
        api: Api | None = "openai",
        *,
        release_on_close: bool = True,
        outcomes: Outcomes | None = None,
    ) -> None:
        self._exchange = Exchange(api)
        self._provider = provider
        self._release_on_close = release_on_close
        #: Counts each answer's kind when given (the front door's summary).
        self.outcomes = outcomes

    def _count(self, kind: Kind) -> None:
        if self.outcomes is not None:
            self.outcomes.add(kind)

    def _counted(self, answer: Answer) -> Answer:
        # The provider answered; the vendor's shape may still fail to express it.
        self._count("served" if answer[0] == 200 else "failed")
        return answer

    @property
    def provider(self) -> Provider:
        return self._provider

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._exchange.api} {self._provider!r}>"


class Serving(_Serving):
    """A sync transport's work: one request in, one answer out, the provider asked once
    (``complete``); a failure is an answer, never an exception (the SDKs would retry an
    exception as a connection error)."""

    def serve(
        self,
        method: str,
        path: str,
        body: bytes,
        headers: HeaderLists | Mapping[str, str] | None = None,
    ) -> Answer:
        """``headers`` may carry ``x-replay-scope`` (``scope_values``)."""
        got = self._exchange.read(method, path, body)
        if len(got) == 3:
            self._count("invalid")
            return got
        vendor, call = got
        scoped = self._exchange.scoped(vendor, call, scope_values(headers))
        if not isinstance(scoped, VendorCall):
            self._count("invalid")
            return scoped
        call = scoped
        try:
            response: dict[str, Any] = self._provider.complete(call.request)
        except Exception as exc:
            self._count(outcome_of(exc))
            return self._exchange.fail(vendor, exc)
        return self._counted(self._exchange.answer(vendor, call, response))

    def close(self) -> None:
        if self._release_on_close:
            self._provider.release()


class AsyncServing(_Serving):
    """The async form of :class:`Serving`: awaits ``provider.acomplete`` (no thread)."""

    async def serve(
        self,
        method: str,
        path: str,
        body: bytes,
        headers: HeaderLists | Mapping[str, str] | None = None,
    ) -> Answer:
        """``headers`` as :meth:`Serving.serve`."""
        got = self._exchange.read(method, path, body)
        if len(got) == 3:
            self._count("invalid")
            return got
        vendor, call = got
        scoped = self._exchange.scoped(vendor, call, scope_values(headers))
        if not isinstance(scoped, VendorCall):
            self._count("invalid")
            return scoped
        call = scoped
        try:
            response: dict[str, Any] = await self._provider.acomplete(call.request)
        except Exception as exc:
            self._count(outcome_of(exc))
            return self._exchange.fail(vendor, exc)
        return self._counted(self._exchange.answer(vendor, call, response))

    async def aclose(self) -> None:
        if self._release_on_close:
            self._provider.release()
