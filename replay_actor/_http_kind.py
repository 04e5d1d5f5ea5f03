"""The ``http`` kind: a tool's HTTP exchange as a neutral request and a neutral response
(docs/tools.md).

Under ``replay-actor run`` an application's HTTP(S) requests to hosts other than the
front door (a search API, a retrieval service, an MCP server over HTTP) come through the
front door's proxy; each is read into an :class:`HttpRequest`, hashed like every other
kind (``"kind": "http"`` is part of the hashed bytes, so no other kind can hash like it)
and answered from the fixture, or forwarded and recorded. This module owns:

- :class:`HttpRequest`: method, scheme, host, port, path, query, the headers the
  manifest names (``provider.http_headers``), the body as ``json`` (canonical), ``text``
  or ``base64``, and ``scope``;
- the credentials rule (:func:`is_credential_header`, :func:`is_credential_parameter`):
  a credential is never part of a request, so it is never hashed or recorded; a request
  that holds one is refused;
- the neutral response (:func:`read_http_response`, :func:`http_response`): ``status``,
  ``headers`` (``[[name, value], ...]``), the body as ``text``, ``base64`` or ``json``,
  and ``open`` for an event stream the client left before it ended;
- :data:`FORWARDING`: the exchange exactly as the client sent it (its credentials and
  its body's own bytes), handed from the front door to a live forwarder beside the
  neutral request, never inside it, so nothing that records or logs a request can see it.

Runs in: any process (the I/O-free core).
"""

from __future__ import annotations

import base64 as _base64
import binascii
import contextvars
from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal, NamedTuple, Protocol

import msgspec

from ._response import Unexpressible

__all__ = [
    "FORWARDING",
    "HTTP",
    "Forwarding",
    "HttpAnswer",
    "HttpRequest",
    "StreamRelay",
    "http_response",
    "is_credential_header",
    "is_credential_parameter",
    "read_http_response",
]

#: The ``kind`` of a tool's HTTP exchange.
HTTP: Final = "http"

#: Header names that always carry credentials (and ``-key``/``-token`` endings, below).
_CREDENTIAL_HEADERS: Final = frozenset(
    {"authorization", "proxy-authorization", "cookie", "set-cookie", "apikey"}
)
_CREDENTIAL_ENDINGS: Final = ("-key", "-token")
#: Query parameters, form fields and top-level JSON keys that carry credentials
#: (compared in lower case, ``-`` and ``_`` alike).
_CREDENTIAL_PARAMETERS: Final = frozenset(
    {
        "key",
        "api_key",
        "apikey",
        "token",
        "access_token",
        "auth_token",
        "id_token",
        "refresh_token",
        "client_secret",
        "password",
    }
)


def is_credential_header(name: str) -> bool:
    """Whether a header of this name carries a credential: ``authorization``, cookies,
    ``*-key``, ``*-token`` (``x-api-key``, ``x-subscription-token``)."""
    lowered = name.strip().lower()
    return lowered in _CREDENTIAL_HEADERS or lowered.endswith(_CREDENTIAL_ENDINGS)


def is_credential_parameter(name: str) -> bool:
    """Whether a query parameter, form field or top-level JSON key of this name carries
    a credential (``key``, ``api_key``, ``access_token``, ``client_secret``, ...)."""
    return name.strip().lower().replace("-", "_") in _CREDENTIAL_PARAMETERS


class HttpRequest(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A tool's HTTP request (docs/tools.md, "What is hashed").

    ``host`` is in lower case (an IPv6 address without brackets), ``port`` always given
    (443 for ``https``, 80 for ``http`` when the URL names none), ``path`` as sent (its
    percent-escapes kept), ``query`` the decoded ``[name, value]`` pairs in order,
    ``headers`` only those the manifest names (lower-case names). At most one body:
    ``json`` (any JSON value: hashed canonically, so key order and spacing never
    matter), ``text`` (UTF-8 text that is not JSON) or ``base64`` (any other bytes).
    """

    method: Annotated[str, msgspec.Meta(pattern=r"^[A-Z][A-Z_-]*$", max_length=32)]
    scheme: Literal["http", "https"]
    host: Annotated[str, msgspec.Meta(min_length=1, max_length=255)]
    port: Annotated[int, msgspec.Meta(ge=1, le=65535)]
    path: Annotated[str, msgspec.Meta(pattern=r"^/")]
    query: list[tuple[str, str]] = []
    headers: dict[str, str] = {}
    json: Any = msgspec.UNSET
    text: str | None = None
    base64: str | None = None
    scope: dict[str, Any] | None = None
    kind: Literal["http"] = "http"

    def __post_init__(self) -> None:
        # msgspec turns a ValueError raised here into its ValidationError: a RequestError
        # naming the problem, like every other invalid request.
        problem = _problem(self)
        if problem is not None:
            raise ValueError(problem)


def _problem(request: HttpRequest) -> str | None:
    if request.host != request.host.lower():
        return "host must be in lower case"
    return _credential_problem(request) or _body_problem(request)


def _credential_problem(request: HttpRequest) -> str | None:
    for name in request.headers:
        if name != name.lower():
            return f"header names must be in lower case ({name!r} is not)"
        if is_credential_header(name):
            return f"the {name} header carries a credential: never part of a request"
    named = [("query parameter", name) for name, _ in request.query]
    if type(request.json) is dict:
        named += [("JSON key", name) for name in request.json]
    for what, name in named:
        if is_credential_parameter(name):
            return f"the {what} {name!r} carries a credential: never part of a request"
    return None


def _body_problem(request: HttpRequest) -> str | None:
    bodies = sum(
        (request.json is not msgspec.UNSET, request.text is not None, request.base64 is not None)
    )
    if bodies > 1:
        return "a request has at most one of json, text and base64"
    if request.base64 is not None and not _is_base64(request.base64):
        return "base64 is not valid base64"
    return None


def _is_base64(text: str) -> bool:
    try:
        _base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


# -- the neutral response -------------------------------------------------------------------


class HttpAnswer(NamedTuple):
    """A neutral http response, read: what goes back to the client."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes
    #: The stream was still open when the recorded client left: a replay sends the
    #: events, then holds the stream open until its client leaves too.
    open: bool = False


class _Stored(msgspec.Struct):
    """A stored http response: ``content`` is ``replay-actor add --content``'s (a text
    answer, 200), the rest the recorded form."""

    # A final answer's status: 1xx are not answers.
    status: Annotated[int, msgspec.Meta(ge=200, le=599)] = 200
    headers: list[tuple[str, str]] | dict[str, str] = []
    text: str | None = None
    base64: str | None = None
    json: Any = msgspec.UNSET
    content: str | None = None
    open: bool = False


_TEXT_PLAIN: Final = ("content-type", "text/plain; charset=utf-8")
_JSON_TYPE: Final = ("content-type", "application/json")


def read_http_response(response: Mapping[str, Any]) -> HttpAnswer:
    """The answer a stored http response gives (unknown keys are ignored).

    Raises :class:`~._response.Unexpressible` for one that cannot be said (a value of
    the wrong type, two bodies, base64 that is not), naming where, never a value.
    """
    try:
        stored = msgspec.convert(response, _Stored)
    except msgspec.ValidationError as exc:
        where = str(exc).rpartition(" - at ")[2] if " - at " in str(exc) else "$"
        raise Unexpressible(f"the stored http response has a wrong value at {where}") from None
    given = [b for b in (stored.text, stored.base64, stored.content) if b is not None] + (
        [stored.json] if stored.json is not msgspec.UNSET else []
    )
    if len(given) > 1:
        raise Unexpressible("the stored http response has more than one body")
    headers = list(stored.headers.items() if isinstance(stored.headers, dict) else stored.headers)
    default: tuple[str, str] | None = None
    body = b""
    if stored.text is not None:
        body = stored.text.encode()
    elif stored.base64 is not None:
        if not _is_base64(stored.base64):
            raise Unexpressible("the stored http response's base64 is not valid base64")
        body = _base64.b64decode(stored.base64)
    elif stored.content is not None:
        body, default = stored.content.encode(), _TEXT_PLAIN
    elif stored.json is not msgspec.UNSET:
        body, default = msgspec.json.encode(stored.json), _JSON_TYPE
    if default is not None and not any(name.lower() == "content-type" for name, _ in headers):
        headers.append(default)
    return HttpAnswer(stored.status, [(n.lower(), v) for n, v in headers], body, stored.open)


def http_response(
    status: int, headers: list[tuple[str, str]], body: bytes, *, open: bool = False
) -> dict[str, Any]:
    """The neutral form of a live answer: the body as ``text`` when it is UTF-8 (its
    exact bytes, so a JSON answer replays byte for byte), else ``base64``."""
    stored: dict[str, Any] = {"status": status, "headers": [[n, v] for n, v in headers]}
    if body:
        try:
            stored["text"] = body.decode("utf-8")
        except UnicodeDecodeError:
            stored["base64"] = _base64.b64encode(body).decode("ascii")
    if open:
        stored["open"] = True
    return stored


# -- the client's own exchange, for a live forwarder ------------------------------------------


class StreamRelay(Protocol):
    """Where a forwarder sends an event stream as it arrives (the front door's answer to
    its client, while the exchange is recorded): ``start`` once, then ``chunk``s;
    ``gone`` tells that the client has left (the stream is then recorded as it stands,
    ``open``)."""

    def start(self, status: int, headers: list[tuple[str, str]]) -> None: ...

    def chunk(self, data: bytes) -> None: ...

    @property
    def gone(self) -> bool: ...


class Forwarding:
    """The exchange exactly as the client sent it: the URL, every header but the
    proxy's own (credentials included), the body's own bytes, and where to relay an
    event stream. Its ``repr`` shows none of it, so no traceback's locals can.

    ``digest`` is the hash of the neutral request read from it: a forwarder uses this
    exchange only for that request."""

    __slots__ = ("body", "digest", "headers", "relay", "url")

    def __init__(
        self,
        digest: str,
        url: str,
        headers: list[tuple[str, str]],
        body: bytes,
        relay: StreamRelay | None = None,
    ) -> None:
        self.digest = digest
        self.url = url
        self.headers = headers
        self.body = body
        self.relay = relay

    def __repr__(self) -> str:
        return "<the client's own exchange>"


#: The exchange being forwarded, set by the front door around one provider call and seen
#: only by the code that call runs (context-local: never another task's or thread's).
FORWARDING: Final[contextvars.ContextVar[Forwarding | None]] = contextvars.ContextVar(
    "replay_actor_forwarding", default=None
)
