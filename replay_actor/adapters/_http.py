"""The HTTP side every live adapter shares: timeouts, bounded retries, ``Retry-After``,
and errors that carry nothing secret.

Runs in: the caller (a live or record provider's calls).

Failure policy (docs/manifest.md, "Live adapters"):
- timeouts are on by default: ``timeout`` is a *deadline* for the whole attempt
  (connecting, sending, the headers and the whole body), not a bound on each read, so an
  endpoint that trickles a byte at a time cannot hold a call; ``connect_timeout`` bounds
  the connection within it. The sync path enforces the deadline inside every socket
  operation (a wrapper around httpcore2's network backend, reading a per-thread
  deadline); the async path with ``asyncio.timeout``;
- a body is read only up to ``max_response_bytes`` (a larger ``Content-Length`` is refused
  before reading; a body without one is read in chunks and dropped at the ceiling), and
  an error body only up to 64 KiB, so a huge answer costs no more memory than the
  ceiling;
- 408, 429 and 5xx answers, timeouts and transport errors are retried at most
  ``max_retries`` times, with exponential backoff (``retry_backoff`` doubling, jittered,
  capped at ``retry_max_wait``); a ``Retry-After`` (or ``retry-after-ms``) header is
  honoured up to the same cap; ``retries`` counts the retries made (``replay-actor run``'s
  summary says it);
- connections are pooled: one sync client (httpx2's) for every thread, and one async
  client per event loop (aiohttp's when installed, else httpx2's: ``_aclients.py``),
  closed by that loop's own shutdown. A client is costly to make (about 35 ms of CPU:
  its TLS context), and a connection per call costs a handshake per call: recording
  thousands of calls through the front door paid both;
- every failure is a ``LiveProviderError`` whose message holds a status, an exception
  *type* name, or a short vendor error code — never a body, a header, the URL, the key or
  the prompt — and which is raised outside any ``except`` block, so no HTTP-client
  exception (whose ``.request`` carries the credentials and the prompt) rides along in
  ``__context__``;
- nothing that contains the API key's value, or a long piece of it (``_secrets.py``), is
  kept or shown: an error code that holds one is left out of the message, a response
  that echoes one anywhere (its text, its ``usage``, a key) fails the call instead of
  being returned, so it can never reach a recording, and the HTTP library's log records
  are redacted (``_secrets.install_log_filter``).

The HTTP client (httpx2, which the vendors' SDKs use too) is an optional dependency,
imported when an adapter is built, never at import time. A vendor adapter subclasses
``HTTPAdapter`` and supplies the body it sends (``body``) and the neutral response it
reads back (``parse``).
"""

from __future__ import annotations

import asyncio
import contextvars
import email.utils
import os
import random
import re
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import msgspec

from .._errors import LiveProviderError, ManifestError
from ..vendors import MalformedResponse as Malformed
from ._aclients import Answer, AsyncHTTP, LoopClients, ceiling, make_async_client
from ._config import HTTPConfig
from ._secrets import holds_key_piece, install_log_filter, strings_in

if TYPE_CHECKING:
    import httpx2 as httpx

__all__ = ["HTTPAdapter", "Malformed"]

_SAFE_CODE: Final = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
_RETRY_STATUSES: Final = frozenset({408, 429})
#: The end of the current attempt (``time.monotonic()``), for this thread's socket
#: operations; ``None`` outside an attempt.
_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "replay_actor_http_deadline", default=None
)


def _import_httpx(adapter: str) -> Any:
    # httpx2: the HTTP client the vendors' current SDKs are built on, so installing
    # replay-actor[openai] brings one HTTP client, not two.
    try:
        import httpx2
    except ImportError:
        pass
    else:
        return httpx2
    raise ManifestError(
        f"the {adapter} adapter needs httpx2: pip install 'replay-actor[live]'", key="adapter"
    )


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked us to wait, if it said so."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _error_code(content: bytes, key: str | None) -> str | None:
    """A vendor error code or type, only if it is a short identifier (never a message:
    vendors echo parts of keys and prompts in messages) that shares no long piece with
    the key."""
    try:
        data = msgspec.json.decode(content)
    except msgspec.DecodeError:
        return None
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict):
        return None
    for field in ("code", "type"):
        value = error.get(field)
        if isinstance(value, str) and _SAFE_CODE.match(value) and not holds_key_piece(value, key):
            return value
    return None


def _bounded(timeout: float | None, expired: type[Exception]) -> float | None:
    """``timeout`` shortened to what is left of this thread's attempt; ``expired`` (an
    httpcore2 timeout, which httpx2 maps to its own) once nothing is left."""
    deadline = _deadline.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise expired("the attempt's deadline passed")
    return left if timeout is None else min(timeout, left)


def _deadline_backend(httpcore: Any, inner: Any) -> Any:
    """httpcore2's sync network backend, with every connect, read and write bounded by
    the current attempt's deadline (``_deadline``)."""

    class Stream(httpcore.NetworkStream):  # type: ignore[misc]
        def __init__(self, stream: Any) -> None:
            self._stream = stream

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            result: bytes = self._stream.read(max_bytes, _bounded(timeout, httpcore.ReadTimeout))
            return result

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            self._stream.write(buffer, _bounded(timeout, httpcore.WriteTimeout))

        def close(self) -> None:
            self._stream.close()

        def start_tls(
            self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
        ) -> Any:
            bounded = _bounded(timeout, httpcore.ConnectTimeout)
            return Stream(self._stream.start_tls(ssl_context, server_hostname, bounded))

        def get_extra_info(self, info: str) -> Any:
            return self._stream.get_extra_info(info)

    class Backend(httpcore.NetworkBackend):  # type: ignore[misc]
        def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,
            local_address: str | None = None,
            socket_options: Any = None,
        ) -> Any:
            bounded = _bounded(timeout, httpcore.ConnectTimeout)
            return Stream(
                inner.connect_tcp(
                    host, port, bounded, local_address=local_address, socket_options=socket_options
                )
            )

        def connect_unix_socket(
            self, path: str, timeout: float | None = None, socket_options: Any = None
        ) -> Any:
            bounded = _bounded(timeout, httpcore.ConnectTimeout)
            return Stream(inner.connect_unix_socket(path, bounded, socket_options=socket_options))

        def sleep(self, seconds: float) -> None:
            inner.sleep(seconds)

    return Backend()


def _install_deadline(client: Any) -> None:
    """Put the deadline backend under every transport of a sync httpx2 client (the
    default one and any proxy mounts). httpx2 has no public hook for the network
    backend, so this sets the pool's; tests/adapters/test_http.py fails if a new
    httpx2 moves it (a trickling endpoint would then hold the call again)."""
    import httpcore2

    for transport in (client._transport, *client._mounts.values()):
        pool: Any = getattr(transport, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if backend is not None:
            pool._network_backend = _deadline_backend(httpcore2, backend)


_TIMED_OUT: Final = "did not answer within the timeout"


class HTTPAdapter:
    """A live adapter over HTTP (sync and async) with the shared failure policy.

    Subclasses set ``name`` and implement ``body`` and ``parse``; ``__init__`` takes the
    checked ``HTTPConfig`` and the request headers (credentials included).
    """

    name = "http"
    #: Whether the async path posts with aiohttp when it is installed (``_aclients``);
    #: tests/adapters/test_aclients.py sets it False to run the httpx2 fallback.
    prefer_aiohttp = True

    def __init__(self, config: HTTPConfig, headers: dict[str, str]) -> None:
        self._config = config
        self._headers = headers
        self._httpx = _import_httpx(self.name)
        install_log_filter(config)
        # Each read, write and connect is bounded by these; the attempt as a whole by
        # the deadline (``timeout`` from its start).
        self._timeout = self._httpx.Timeout(config.timeout, connect=config.connect_timeout)
        # One pooled sync client, made on the first sync call (a caller that only awaits,
        # as the front door does, never pays for its TLS context: ~25-70 ms); one async
        # client per event loop (``_aclients.LoopClients``).
        self._client: httpx.Client | None = None
        self._client_lock = threading.Lock()
        self._aclients = LoopClients(self._new_async_client)
        self._pid = os.getpid()
        self.model = config.model
        #: Retries made so far (attempts after a first one), all calls together.
        self.retries = 0
        self._retries_lock = threading.Lock()

    def _new_async_client(self) -> AsyncHTTP:
        return make_async_client(
            self._httpx, self._headers, self._timeout, prefer_aiohttp=self.prefer_aiohttp
        )

    def _retrying(self) -> None:
        with self._retries_lock:
            self.retries += 1

    def _new_client(self) -> httpx.Client:
        client: httpx.Client = self._httpx.Client(
            timeout=self._timeout, headers=self._headers, follow_redirects=False
        )
        _install_deadline(client)
        return client

    def _own_client(self) -> httpx.Client:
        """The pooled sync client, made on first use, and afresh in a fork child: the
        parent's pooled connections are shared sockets, and two processes writing
        requests and reading answers on one connection would take each other's answers."""
        client = self._client
        if os.getpid() != self._pid:
            # A fork child. The copies are closed (the parent's sockets stay open) and a
            # new pool starts; so does a new lock (a parent's thread may have held it
            # at the fork, and that thread does not exist here).
            self._client_lock = threading.Lock()
            self._client = None
            self._pid = os.getpid()
            if client is not None:
                client.close()
            client = None
        if client is not None:
            return client
        with self._client_lock:
            if self._client is None:
                self._client = self._new_client()
            return self._client

    def _close_client(self) -> None:
        with self._client_lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} model={self.model!r}>"

    # -- the vendor's part ----------------------------------------------------------------

    def body(self, request: dict[str, Any]) -> dict[str, Any]:
        """The vendor's request body for a plain normalised neutral request."""
        raise NotImplementedError

    def parse(self, data: Any) -> dict[str, Any]:
        """The neutral response for the vendor's decoded body; ``Malformed`` if it is not
        one."""
        raise NotImplementedError

    def url_for(self, request: dict[str, Any]) -> str:
        """Where ``request`` is posted: the configured URL, unless the adapter sends a
        request of another kind elsewhere (an embedding, a token count)."""
        return self._config.url

    def parse_for(self, request: dict[str, Any], data: Any) -> dict[str, Any]:
        """``parse`` for the answer to ``request`` (an adapter may read each kind's
        answer its own way)."""
        return self.parse(data)

    # -- the retry policy, shared by both forms: each attempt yields an outcome, which is
    # either the neutral response, a delay before the next attempt, or the final error.

    def _delay(self, attempt: int, answer: Answer | None) -> float:
        cfg = self._config
        asked = _retry_after(answer.headers) if answer is not None else None
        if asked is not None:
            return min(asked, cfg.retry_max_wait)
        backoff = cfg.retry_backoff * (2.0**attempt) * (0.5 + random.random() / 2)
        return min(backoff, cfg.retry_max_wait)

    def _judge(
        self,
        attempt: int,
        answer: Answer | None,
        failure: str | None,
        request: dict[str, Any],
    ) -> dict[str, Any] | float | LiveProviderError:
        last = attempt >= self._config.max_retries
        attempts = f"{attempt + 1} attempt{'s' if attempt else ''}"
        if answer is None:
            if last:
                return LiveProviderError(f"the live endpoint {failure} ({attempts})")
            return self._delay(attempt, None)
        status = answer.status
        if status in _RETRY_STATUSES or status >= 500:
            if last:
                return LiveProviderError(
                    f"the live endpoint answered HTTP {status} ({attempts})", status=status
                )
            return self._delay(attempt, answer)
        if not 200 <= status < 300:
            code = _error_code(answer.content or b"", self._config.api_key)
            detail = f" (error code: {code})" if code else ""
            return LiveProviderError(
                f"the live endpoint answered HTTP {status}{detail}", status=status
            )
        return self._read_success(answer, request)

    def _read_success(
        self, answer: Answer, request: dict[str, Any]
    ) -> dict[str, Any] | LiveProviderError:
        """A 2xx answer's neutral response, or the error that says why it is not kept."""
        status = answer.status
        if answer.content is None:
            return LiveProviderError(
                "the live endpoint's response is larger than max_response_bytes "
                f"({self._config.max_response_bytes} bytes); it was not read",
                status=status,
            )
        try:
            neutral = self.parse_for(request, msgspec.json.decode(answer.content))
        except msgspec.DecodeError:
            return LiveProviderError(
                "the live endpoint's response is not valid JSON", status=status
            )
        except Malformed as exc:
            return LiveProviderError(
                f"the live endpoint's response is not {self._shape}: {exc}", status=status
            )
        key = self._config.api_key
        if key and any(holds_key_piece(text, key) for text in strings_in(neutral)):
            # Kept, it would be written to a recording and shown to the caller.
            return LiveProviderError(
                "the live endpoint's response echoes the API key (or a piece of it); "
                "it was not kept",
                status=status,
            )
        return neutral

    _shape = "the expected shape"

    def _failure_kind(self, exc: BaseException) -> str:
        if isinstance(exc, self._httpx.TimeoutException):
            return _TIMED_OUT
        return f"could not be reached ({type(exc).__name__})"

    def _encoded(self, request: dict[str, Any]) -> bytes:
        return msgspec.json.encode(self.body(request))

    def _ceiling(self, status: int, headers: Mapping[str, str]) -> int | None:
        """How much of a response's body to read (``None``: none of it, too large)."""
        return ceiling(status, headers, self._config.max_response_bytes)

    # -- one attempt: the sync form runs under the per-thread deadline that the network
    # backend enforces; the async form under asyncio.timeout.

    def _attempt(self, body: bytes, url: str) -> Answer | str:
        deadline = time.monotonic() + self._config.timeout
        token = _deadline.set(deadline)
        try:
            with self._own_client().stream("POST", url, content=body) as response:
                limit = self._ceiling(response.status_code, response.headers)
                content: bytes | None = None
                if limit is not None:
                    buffer = bytearray()
                    for chunk in response.iter_bytes():
                        buffer += chunk
                        if len(buffer) > limit:
                            break
                        if time.monotonic() > deadline:
                            return _TIMED_OUT
                    else:
                        content = bytes(buffer)
                    del buffer
                return Answer(response.status_code, response.headers, content)
        except self._httpx.HTTPError as exc:
            return self._failure_kind(exc)
        finally:
            _deadline.reset(token)

    async def _aattempt(self, client: AsyncHTTP, body: bytes, url: str) -> Answer | str:
        try:
            async with asyncio.timeout(self._config.timeout):
                return await client.post(body, url, self._config.max_response_bytes)
        except TimeoutError:
            return _TIMED_OUT
        except client.errors as exc:
            return self._failure_kind(exc)

    def _settle(
        self, attempt: int, answer: Answer | str, request: dict[str, Any]
    ) -> dict[str, Any] | float:
        """The neutral response, or the delay before the next attempt; raises the final
        ``LiveProviderError`` (outside any ``except`` block: nothing rides along)."""
        if isinstance(answer, str):
            outcome = self._judge(attempt, None, answer, request)
        else:
            outcome = self._judge(attempt, answer, None, request)
        if isinstance(outcome, LiveProviderError):
            raise outcome
        return outcome

    def complete(self, request: dict[str, Any]) -> dict[str, Any]:
        body = self._encoded(request)
        url = self.url_for(request)
        attempt = 0
        while not isinstance(
            outcome := self._settle(attempt, self._attempt(body, url), request), dict
        ):
            self._retrying()
            time.sleep(outcome)
            attempt += 1
        return outcome

    async def acomplete(self, request: dict[str, Any]) -> dict[str, Any]:
        body = self._encoded(request)
        url = self.url_for(request)
        attempt = 0
        client = await self._aclients.get()
        while not isinstance(
            outcome := self._settle(attempt, await self._aattempt(client, body, url), request),
            dict,
        ):
            self._retrying()
            await asyncio.sleep(outcome)
            attempt += 1
        return outcome

    def close(self) -> None:
        self._close_client()
        self._aclients.close()

    async def aclose(self) -> None:
        self._close_client()
        self._aclients.close()
