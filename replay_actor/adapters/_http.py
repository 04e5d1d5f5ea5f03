"""The HTTP side every live adapter shares: timeouts, bounded retries, ``Retry-After``,
and errors that carry nothing secret.

Runs in: the caller (a live or record provider's calls).

Failure policy (docs/manifest.md, "Live adapters"):
- timeouts are on by default (``timeout``, ``connect_timeout``);
- 408, 429 and 5xx answers, timeouts and transport errors are retried at most
  ``max_retries`` times, with exponential backoff (``retry_backoff`` doubling, jittered,
  capped at ``retry_max_wait``); a ``Retry-After`` (or ``retry-after-ms``) header is
  honoured up to the same cap;
- every failure is a ``LiveProviderError`` whose message holds a status, an exception
  *type* name, or a short vendor error code — never a body, a header, the URL, the key or
  the prompt — and which is raised outside any ``except`` block, so no HTTP-client
  exception (whose ``.request`` carries the credentials and the prompt) rides along in
  ``__context__``;
- nothing that contains the API key's value is kept or shown: an error code that holds
  it (or a piece of it) is left out of the message, and a response that echoes it
  anywhere (its text, its ``usage``) fails the call instead of being returned, so it can
  never reach a recording.

The HTTP client (httpx2, which the vendors' SDKs use too) is an optional dependency,
imported when an adapter is built, never at import time. A vendor adapter subclasses
``HTTPAdapter`` and supplies the body it sends (``body``) and the neutral response it
reads back (``parse``).
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import re
import time
from typing import TYPE_CHECKING, Any, Final

import msgspec

from .._errors import LiveProviderError, ManifestError
from ..vendors._common import MalformedResponse as Malformed
from ._config import HTTPConfig

if TYPE_CHECKING:
    import httpx2 as httpx

__all__ = ["HTTPAdapter", "Malformed"]

_SAFE_CODE: Final = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
_RETRY_STATUSES: Final = frozenset({408, 429})


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


def _retry_after(headers: httpx.Headers) -> float | None:
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


#: A vendor code this long that is a piece of the key is taken for one.
_KEY_PIECE: Final = 8


def _holds_key(value: str, key: str | None) -> bool:
    """Whether ``value`` contains the key, or is a piece of it long enough to matter."""
    if not key:
        return False
    return key in value or (len(value) >= _KEY_PIECE and value in key)


def _error_code(content: bytes, key: str | None) -> str | None:
    """A vendor error code or type, only if it is a short identifier (never a message:
    vendors echo parts of keys and prompts in messages) that does not hold the key."""
    try:
        data = msgspec.json.decode(content)
    except msgspec.DecodeError:
        return None
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict):
        return None
    for field in ("code", "type"):
        value = error.get(field)
        if isinstance(value, str) and _SAFE_CODE.match(value) and not _holds_key(value, key):
            return value
    return None


class HTTPAdapter:
    """A live adapter over HTTP (sync and async) with the shared failure policy.

    Subclasses set ``name`` and implement ``body`` and ``parse``; ``__init__`` takes the
    checked ``HTTPConfig`` and the request headers (credentials included).
    """

    name = "http"

    def __init__(self, config: HTTPConfig, headers: dict[str, str]) -> None:
        self._config = config
        self._headers = headers
        self._httpx = _import_httpx(self.name)
        self._timeout = self._httpx.Timeout(config.timeout, connect=config.connect_timeout)
        # One pooled sync client; async clients are made per call so that acomplete
        # works from any event loop and release() stays synchronous (see docs).
        self._client: httpx.Client = self._httpx.Client(
            timeout=self._timeout, headers=headers, follow_redirects=False
        )
        self.model = config.model

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

    # -- the retry policy, shared by both forms: each attempt yields an outcome, which is
    # either the neutral response, a delay before the next attempt, or the final error.

    def _delay(self, attempt: int, response: httpx.Response | None) -> float:
        cfg = self._config
        asked = _retry_after(response.headers) if response is not None else None
        if asked is not None:
            return min(asked, cfg.retry_max_wait)
        backoff = cfg.retry_backoff * (2.0**attempt) * (0.5 + random.random() / 2)
        return min(backoff, cfg.retry_max_wait)

    def _judge(
        self, attempt: int, response: httpx.Response | None, failure: str | None
    ) -> dict[str, Any] | float | LiveProviderError:
        last = attempt >= self._config.max_retries
        attempts = f"{attempt + 1} attempt{'s' if attempt else ''}"
        if response is None:
            if last:
                return LiveProviderError(f"the live endpoint {failure} ({attempts})")
            return self._delay(attempt, None)
        status = response.status_code
        if status in _RETRY_STATUSES or status >= 500:
            if last:
                return LiveProviderError(
                    f"the live endpoint answered HTTP {status} ({attempts})", status=status
                )
            return self._delay(attempt, response)
        if not 200 <= status < 300:
            code = _error_code(response.content, self._config.api_key)
            detail = f" (error code: {code})" if code else ""
            return LiveProviderError(
                f"the live endpoint answered HTTP {status}{detail}", status=status
            )
        try:
            data = msgspec.json.decode(response.content)
        except msgspec.DecodeError:
            return LiveProviderError(
                "the live endpoint's response is not valid JSON", status=status
            )
        try:
            neutral = self.parse(data)
        except Malformed as exc:
            problem = str(exc)
        else:
            key = self._config.api_key
            if key and key.encode() in msgspec.json.encode(neutral):
                # Kept, it would be written to a recording and shown to the caller.
                return LiveProviderError(
                    "the live endpoint's response echoes the API key; it was not kept",
                    status=status,
                )
            return neutral
        return LiveProviderError(
            f"the live endpoint's response is not {self._shape}: {problem}", status=status
        )

    _shape = "the expected shape"

    def _failure_kind(self, exc: BaseException) -> str:
        if isinstance(exc, self._httpx.TimeoutException):
            return "did not answer within the timeout"
        return f"could not be reached ({type(exc).__name__})"

    def _encoded(self, request: dict[str, Any]) -> bytes:
        return msgspec.json.encode(self.body(request))

    def complete(self, request: dict[str, Any]) -> dict[str, Any]:
        body = self._encoded(request)
        attempt = 0
        while True:
            response: httpx.Response | None = None
            failure: str | None = None
            try:
                response = self._client.post(self._config.url, content=body)
            except self._httpx.HTTPError as exc:
                failure = self._failure_kind(exc)
            outcome = self._judge(attempt, response, failure)
            if isinstance(outcome, dict):
                return outcome
            if isinstance(outcome, LiveProviderError):
                raise outcome
            time.sleep(outcome)
            attempt += 1

    async def acomplete(self, request: dict[str, Any]) -> dict[str, Any]:
        body = self._encoded(request)
        cfg = self._config
        attempt = 0
        async with self._httpx.AsyncClient(
            timeout=self._timeout, headers=self._headers, follow_redirects=False
        ) as client:
            while True:
                response: httpx.Response | None = None
                failure: str | None = None
                try:
                    response = await client.post(cfg.url, content=body)
                except self._httpx.HTTPError as exc:
                    failure = self._failure_kind(exc)
                outcome = self._judge(attempt, response, failure)
                if isinstance(outcome, dict):
                    return outcome
                if isinstance(outcome, LiveProviderError):
                    raise outcome
                await asyncio.sleep(outcome)
                attempt += 1

    def close(self) -> None:
        self._client.close()

    async def aclose(self) -> None:
        self._client.close()
