"""One HTTP exchange, the same wherever replay-actor answers a vendor API: in-process
(the httpx2 and httpx transports of ``integrations/``, which its SDK clients use) and
over local HTTP (``frontdoor/``): :class:`Exchange` routes and reads a request into a
:class:`Call` (asked once, by ``_serving.py``) or an ``Answer``.

Runs in: whichever process serves (a transport's caller, or the front door). The
package's docstring (``serving/__init__.py``) draws the exchange and its failures: each
an HTTP error the vendors' SDKs raise as their own exception and never retry
(``x-should-retry: false``), its message the exception's first line, private mode with
no hash anywhere in it. The ``x-replay-scope`` header is read here, for both: from a
transport's headers (a mapping with case-insensitive lookup, as httpx's) or from the
front door's raw ASGI header pairs.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from typing import Any, Final, NamedTuple

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
from .._strict_json import MAX_BODY_DEPTH, NotStrictJSON, loads_strict, loads_strict_utf8
from ..vendors import REGISTRY, Vendor, VendorCall, make_vendor, served_with, vendor_names
from ._answer import _JSON, Answer, Headers, _envelope_vendor, _error
from ._routes import AZURE_FORMS, canonical_path, deployment, described, looks_like
from .batches import Batches, BatchWork

__all__ = [
    "ANSWER_PLACEHOLDER",
    "API_NAMES",
    "MISS_STATUS",
    "SCOPE_HEADER",
    "Api",
    "Call",
    "Exchange",
    "MissHint",
    "shown_path",
]

#: A registered vendor API name (``vendors.REGISTRY``).
Api = str
API_NAMES: Final = vendor_names()

_encode: Final = msgspec.json.encode

#: The header that sets the request's ``scope`` (docs/request.md) for a client that cannot add
#: fields to the body: ``x-replay-scope: {"epoch": 2}`` (docs/front-door.md).
SCOPE_HEADER: Final = "x-replay-scope"
_SCOPE_KEY: Final = SCOPE_HEADER.encode()


#: A miss's and an exhausted sequence's status: 422, a client error no SDK retries
#: (unlike 408, 409, 429 and 5xx) and none reads as something else. 404 read as a
#: missing model: LangChain raises ``OpenAIModelNotFoundError``, CrewAI says "Model …
#: not found" (docs/sdk.md, "Failures", has each framework's reading).
MISS_STATUS: Final = 422
#: What the printed ``add`` command says where the author's answer goes.
ANSWER_PLACEHOLDER: Final = "THE ANSWER"


def shown_path(path: str) -> str:
    """``path`` as a command pasted in the current directory reaches it: relative when
    it is below the current directory, else absolute; shell-quoted."""
    absolute = os.path.abspath(path)
    try:
        relative = os.path.relpath(absolute)
    except ValueError:
        relative = absolute
    return shlex.quote(absolute if relative.startswith(os.pardir) else relative)


class MissHint:
    """``MissHint(fixture=None, private=False, inspection=None)``: what a miss's error
    message says after the miss itself, so that a framework that shows only the error's
    message still shows the way out: the ``replay-actor add`` command that answers it,
    naming the fixture (``FIXTURE`` when the serving does not know it) and, in private
    mode, never the hash (the owner-only inspection record holds it)."""

    __slots__ = ("fixture", "inspection", "private")

    def __init__(
        self, fixture: str | None = None, *, private: bool = False, inspection: str | None = None
    ) -> None:
        self.fixture = fixture
        self.private = private
        self.inspection = inspection

    def __call__(self, exc: ReplayMiss | SequenceExhausted) -> str:
        fixture = "FIXTURE" if self.fixture is None else shown_path(self.fixture)
        more = " --next" if isinstance(exc, SequenceExhausted) else ""
        digest = exc.request_hash
        # Double quotes: a framework that shows the error's repr (Inspect) escapes single
        # ones, and the command must survive being copied from there.
        answer = f'--content "{ANSWER_PLACEHOLDER}"'
        if digest is not None and not self.private:
            return f"to answer it: replay-actor add {fixture} {digest}{more} {answer}"
        where = (
            f"the owner-only inspection record {shown_path(self.inspection)}"
            if self.inspection is not None
            else 'an inspection record (inspection = "misses.jsonl" in the manifest)'
        )
        return (
            f"to answer it: replay-actor add {fixture} HASH{more} {answer}, "
            f"HASH withheld (private data) but written to {where}"
        )


#: The failures answered with the exception's own message, the first that matches:
#: (exception types, status, ``error.type``).
_PLAIN: Final[tuple[tuple[tuple[type[BaseException], ...], int, str], ...]] = (
    ((RequestError,), 400, "invalid_request"),
    ((ProviderClosed, ActorLost), 503, "replay_unavailable"),
    ((LiveProviderError,), 502, "live_provider_error"),
    ((Unexpressible,), 500, "replay_unexpressible"),
    ((ReplayError,), 500, "replay_error"),
)


def _failure(vendor: Vendor, exc: BaseException, hint: MissHint | None = None) -> Answer:
    if isinstance(exc, ReplayMiss | SequenceExhausted):
        # The miss message (its first line: the explanation goes in its own field), then
        # the way out, in the one field every SDK and framework shows.
        kind = "replay_miss" if isinstance(exc, ReplayMiss) else "replay_exhausted"
        headline = str(exc).partition("\n")[0]
        message = f"{headline}; {(hint or MissHint())(exc)}"
        nearest = exc.nearest if isinstance(exc, ReplayMiss) else None
        return _error(vendor, MISS_STATUS, kind, message, nearest)
    for types, status, kind in _PLAIN:
        if isinstance(exc, types):
            return _error(vendor, status, kind, str(exc))
    # A bug: say which, never what (the message could quote the request).
    return _error(vendor, 500, "replay_internal_error", f"internal error ({type(exc).__name__})")


class Call(NamedTuple):
    """A request read and ready to put to the provider, once: the vendor API it came in
    through and what its body said (the neutral request, how to answer)."""

    vendor: Vendor
    call: VendorCall

    @property
    def request(self) -> dict[str, Any]:
        """The neutral request for ``provider.complete`` / ``acomplete``."""
        return self.call.request

    def answer(self, response: dict[str, Any]) -> Answer:
        """The vendor's answer for the provider's response (a failure's answer if the
        response cannot be said in the vendor's shape); never raises."""
        try:
            neutral = read_response(response)
            if not self.call.stream:
                return Answer(200, [_JSON], _encode(self.vendor.response_body(neutral, self.call)))
            # A shape that streams otherwise (Ollama's NDJSON) says so.
            head = ("content-type", self.vendor.stream_type)
            return Answer(200, [head], self.vendor.stream_body(neutral, self.call))
        except Exception as exc:
            return _failure(self.vendor, exc)

    def fail(self, exc: BaseException, hint: MissHint | None = None) -> Answer:
        """The vendor's error answer for what the provider raised (``hint``: what a
        miss's message says to do, :class:`MissHint`)."""
        return _failure(self.vendor, exc, hint)


def _scope_texts(headers: Headers | None) -> list[str]:
    """Every ``x-replay-scope`` value the request carries, in order: a transport's headers
    as its HTTP library reads them (httpx's and httpx2's ``Headers`` keep a repeated
    header's values apart: ``get_list``), the raw pairs decoded as httpx decodes a header
    (UTF-8 when it is, else Latin-1)."""
    if headers is None:
        return []
    if isinstance(headers, Mapping):
        get_list = getattr(headers, "get_list", None)
        if get_list is not None:
            return list(get_list(SCOPE_HEADER))
        one = headers.get(SCOPE_HEADER)
        return [] if one is None else [one]
    texts: list[str] = []
    for name, value in headers:
        if name == _SCOPE_KEY:
            try:
                texts.append(value.decode("utf-8"))
            except UnicodeDecodeError:
                texts.append(value.decode("latin-1"))
    return texts


def _header_names(headers: Headers | None) -> frozenset[str]:
    """The request's header names in lower case (for :func:`looks_like`)."""
    if headers is None:
        return frozenset()
    if isinstance(headers, Mapping):
        return frozenset(name.lower() for name in headers)
    return frozenset(name.decode("latin-1").lower() for name, _ in headers)


def _read_json(vendor: Vendor, body: bytes) -> Any:
    """The decoded body, or the 400 answer saying why it is not JSON."""
    try:
        # Strictly, by the CLI's rules: a repeated key or a body nested deeper than
        # MAX_BODY_DEPTH is refused, so nothing after this can recurse out of stack.
        return loads_strict_utf8(body, max_depth=MAX_BODY_DEPTH)
    except UnicodeDecodeError:
        problem = "the request body is not JSON (not valid UTF-8)"
    except NotStrictJSON as exc:
        problem = f"the request body is not JSON ({exc})"
    return _error(vendor, 400, "invalid_request", problem)


class Exchange:
    """Routing and answers for the vendor APIs one serving provider speaks: one API
    (``api="openai"``, an SDK's transport) or every registered one (``api=None``, the front
    door), routed by the URL path. Shared by every transport class and the front door."""

    __slots__ = ("_batches", "_vendors", "api")

    def __init__(self, api: str | None) -> None:
        # api="openai" answers the OpenAI SDK's chat completions and Responses calls.
        names = vendor_names() if api is None else served_with(api)
        # make_vendor raises ValueError naming the registered APIs for an unknown one.
        self._vendors: tuple[Vendor, ...] = tuple(make_vendor(name) for name in names)
        self.api = api
        # The batch endpoints of the families served (docs/batches.md), their state
        # bounded and in memory, this exchange's own.
        self._batches = Batches(self, tuple(names))

    def serves_post(self, path: str) -> bool:
        """Whether a vendor shape of this exchange answers ``POST path``."""
        path = canonical_path(path)
        return any(route.search(path) for v in self._vendors for route in v.routes)

    def batch(
        self, method: str, path: str, body: bytes, headers: Headers | None = None, query: str = ""
    ) -> Answer | BatchWork | None:
        """The answer, or the batch to run, for a batch endpoint; ``None`` for any other
        path (then :meth:`prepare` it). ``query``: the URL's, which a list pages by."""
        return self._batches.handle(method, canonical_path(path), body, headers, query)

    def _route(self, method: str, path: str, headers: Headers | None) -> Vendor | Answer:
        """The vendor serving ``path`` (already canonical), or the 404 answer."""
        if method == "POST":
            for vendor in self._vendors:
                if any(route.search(path) for route in vendor.routes):
                    return vendor
        return self.not_found(method, path, headers)

    def not_found(
        self, method: str, path: str, headers: Headers | None = None, more: Sequence[str] = ()
    ) -> Answer:
        """The 404 for a path or method no vendor serves, in the envelope of the vendor
        the path looks like, listing what is served (``more``: served besides the vendor
        shapes, such as batches)."""
        served = [*described(self._vendors), *self._batches.paths, *more]
        if any(vendor.name == "openai" for vendor in self._vendors):
            served.append(AZURE_FORMS)
        return _error(
            self._envelope(path, headers),
            404,
            "not_found",
            f"replay-actor does not serve {method} {path}; it serves {', '.join(served)}",
        )

    def _envelope(self, path: str, headers: Headers | None) -> Vendor:
        """The vendor whose error envelope an answer to ``path`` is written in: the one it
        looks like (:func:`looks_like`), one of this exchange's when it has it; a path a
        vendor serves is that vendor's, whatever the headers."""
        served = canonical_path(path)
        for vendor in self._vendors:
            if any(route.search(served) for route in vendor.routes):
                return vendor
        name = looks_like(path, _header_names(headers))
        for vendor in self._vendors:
            if vendor.name == name:
                return vendor
        if name in REGISTRY:
            return _envelope_vendor(name)
        return self._vendors[0]

    def prepare(
        self, method: str, path: str, body: bytes, headers: Headers | None = None
    ) -> Call | Answer:
        """The call to put to the provider, or the answer when there is none to make (an
        unserved path, a body that is not the vendor's request, a bad ``x-replay-scope``)."""
        given, path = path, canonical_path(path)
        vendor = self._route(method, path, headers)
        if isinstance(vendor, Answer):
            return vendor
        data = _read_json(vendor, body)
        if isinstance(data, Answer):
            return data
        name = deployment(given)
        if name is not None and type(data) is dict and "model" not in data:
            # Azure names the model in the URL; its SDKs may leave it out of the body.
            data["model"] = name
        try:
            call = Call(vendor, vendor.read_body(data, path))
        except RequestError as exc:
            return _failure(vendor, exc)
        except Exception as exc:
            # A shape that missed a malformed body is still a malformed body: a 400 (a
            # 500 would be retried, an exception from a transport too), naming only the
            # exception's type, never the body.
            return _error(
                vendor,
                400,
                "invalid_request",
                f"the request body is not a {vendor.name} request replay-actor can read "
                f"({type(exc).__name__})",
            )
        return _scoped(call, _scope_texts(headers))

    def refusal(
        self, path: str, status: int, kind: str, message: str, headers: Headers | None = None
    ) -> Answer:
        """An error answer made before any call (the front door's 401, 413, 500), in the
        envelope of the vendor the request looks like."""
        return _error(self._envelope(path, headers), status, kind, message)


def _scoped(call: Call, texts: list[str]) -> Call | Answer:
    """``call`` with the ``x-replay-scope`` header's object as its request's ``scope``
    (``call`` itself without the header), or the 400 answer naming the header. More than
    one value is refused, whatever they are, so no reader's choice between them decides
    the hash (the front door and every transport alike)."""
    if not texts:
        return call
    if len(texts) > 1:
        once = f"the {SCOPE_HEADER} header must appear at most once"
        return _error(call.vendor, 400, "invalid_request", once)
    text = texts[0]
    try:
        # The body's rules: no repeated key, no nesting past the bound.
        scope = loads_strict(text, max_depth=MAX_BODY_DEPTH)
    except NotStrictJSON:
        scope = None
    if type(scope) is not dict:
        return _error(
            call.vendor, 400, "invalid_request", f"the {SCOPE_HEADER} header must be a JSON object"
        )
    # The provider validates the scope like every other field (RequestError -> 400).
    request = {**call.request, "scope": scope}
    return Call(call.vendor, msgspec.structs.replace(call.call, request=request))
