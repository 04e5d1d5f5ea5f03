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

from typing import TYPE_CHECKING, Any, Final, Literal

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
from ..vendors import anthropic as _anthropic
from ..vendors import openai as _openai
from ..vendors._common import VendorCall

if TYPE_CHECKING:
    from .._interface import Provider

__all__ = ["API_NAMES", "Answer", "Api", "AsyncServing", "Exchange", "Serving"]

Api = Literal["openai", "anthropic"]
API_NAMES: Final = ("openai", "anthropic")

#: (status, headers, body)
Answer = tuple[int, list[tuple[str, str]], bytes]

_JSON: Final = ("content-type", "application/json")
_SSE: Final = ("content-type", "text/event-stream; charset=utf-8")
_NO_RETRY: Final = ("x-should-retry", "false")
_encode: Final = msgspec.json.encode
_decode: Final = msgspec.json.decode


def _error(
    api: str, status: int, kind: str, message: str, nearest: dict[str, Any] | None = None
) -> Answer:
    error: dict[str, Any]
    if api == "anthropic":
        error = {"type": kind, "message": message}
        payload: dict[str, Any] = {"type": "error", "error": error}
    else:
        error = {"message": message, "type": kind, "param": None, "code": kind}
        payload = {"error": error}
    if nearest is not None:
        error["nearest"] = nearest
    return status, [_JSON, _NO_RETRY], _encode(payload)


def _failure(api: str, exc: BaseException) -> Answer:
    if isinstance(exc, RequestError):
        return _error(api, 400, "invalid_request", str(exc))
    if isinstance(exc, ReplayMiss):
        # The first line is the miss message; the explanation goes in its own field.
        message = str(exc).partition("\n")[0]
        return _error(api, 404, "replay_miss", message, exc.nearest)
    if isinstance(exc, SequenceExhausted):
        return _error(api, 404, "replay_exhausted", str(exc))
    if isinstance(exc, ProviderClosed | ActorLost):
        return _error(api, 503, "replay_unavailable", str(exc))
    if isinstance(exc, LiveProviderError):
        return _error(api, 502, "live_provider_error", str(exc))
    if isinstance(exc, _anthropic.Unexpressible):
        return _error(api, 500, "replay_unexpressible", str(exc))
    if isinstance(exc, ReplayError):
        return _error(api, 500, "replay_error", str(exc))
    # A bug: say which, never what (the message could quote the request).
    return _error(api, 500, "replay_internal_error", f"internal error ({type(exc).__name__})")


class Exchange:
    """One vendor API's routing and answers; shared by every transport class."""

    __slots__ = ("_suffix", "_vendor", "api")

    def __init__(self, api: str) -> None:
        if api == "openai":
            self._vendor: Any = _openai
            self._suffix = "/chat/completions"
        elif api == "anthropic":
            self._vendor = _anthropic
            self._suffix = "/v1/messages"
        else:
            raise ValueError(f"api must be 'openai' or 'anthropic', not {api!r}")
        self.api = api

    def read(self, method: str, path: str, body: bytes) -> VendorCall | Answer:
        """The call to make, or the answer when there is none to make."""
        if method != "POST" or not path.rstrip("/").endswith(self._suffix):
            where = f"{method} {path}"
            return _error(
                self.api,
                404,
                "not_found",
                f"replay-actor answers only POST ...{self._suffix}, not {where}",
            )
        try:
            data = _decode(body)
        except (msgspec.DecodeError, UnicodeDecodeError):
            return _error(self.api, 400, "invalid_request", "the request body is not JSON")
        try:
            result: VendorCall = self._vendor.read_body(data)
        except RequestError as exc:
            return _failure(self.api, exc)
        return result

    def answer(self, call: VendorCall, response: dict[str, Any]) -> Answer:
        try:
            if not call.stream:
                body = _encode(self._vendor.response_body(response, call.model))
                return 200, [_JSON], body
            if self.api == "openai":
                events = _openai.stream_body(response, call.model, include_usage=call.include_usage)
            else:
                events = _anthropic.stream_body(response, call.model)
        except Exception as exc:
            return _failure(self.api, exc)
        return 200, [_SSE], events

    def fail(self, exc: BaseException) -> Answer:
        return _failure(self.api, exc)


class _Serving:
    """What every transport class holds, whatever its HTTP library: the vendor API's
    routing (``Exchange``), the provider, and whether closing releases it."""

    def __init__(
        self, provider: Provider, api: Api = "openai", *, release_on_close: bool = True
    ) -> None:
        self._exchange = Exchange(api)
        self._provider = provider
        self._release_on_close = release_on_close

    @property
    def provider(self) -> Provider:
        return self._provider

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._exchange.api} {self._provider!r}>"


class Serving(_Serving):
    """A sync transport's work: one request in, one answer out, the provider asked once
    (``complete``); a failure is an answer, never an exception (the SDKs would retry an
    exception as a connection error)."""

    def serve(self, method: str, path: str, body: bytes) -> Answer:
        got = self._exchange.read(method, path, body)
        if isinstance(got, tuple):
            return got
        try:
            response: dict[str, Any] = self._provider.complete(got.request)
        except Exception as exc:
            return self._exchange.fail(exc)
        return self._exchange.answer(got, response)

    def close(self) -> None:
        if self._release_on_close:
            self._provider.release()


class AsyncServing(_Serving):
    """The async form of :class:`Serving`: awaits ``provider.acomplete`` (no thread)."""

    async def serve(self, method: str, path: str, body: bytes) -> Answer:
        got = self._exchange.read(method, path, body)
        if isinstance(got, tuple):
            return got
        try:
            response: dict[str, Any] = await self._provider.acomplete(got.request)
        except Exception as exc:
            return self._exchange.fail(exc)
        return self._exchange.answer(got, response)

    async def aclose(self) -> None:
        if self._release_on_close:
            self._provider.release()
