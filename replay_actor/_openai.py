"""The built-in ``openai`` adapter: OpenAI-compatible chat completions at any ``base_url``.

It sends the provider-neutral request as a ``POST {base_url}/chat/completions`` body
and maps the answer back to the neutral response (the mapping is ``vendors.openai``).
httpx is an optional dependency (the ``live`` extra), imported when the adapter is
built, never at import time.

Failure policy:
- timeouts are on by default (``timeout``, ``connect_timeout``);
- 408, 429 and 5xx answers, timeouts and transport errors are retried at most
  ``max_retries`` times, with exponential backoff (``retry_backoff`` doubling, jittered,
  capped at ``retry_max_wait``); a ``Retry-After`` (or ``retry-after-ms``) header is
  honoured up to the same cap;
- every failure is a ``LiveProviderError`` whose message holds a status, an exception
  *type* name, or a short vendor error code — never a body, a header, the URL, the key or
  the prompt — and which is raised outside any ``except`` block, so no httpx exception
  (whose ``.request`` carries the Authorization header and the prompt) rides along in
  ``__context__``.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import re
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import msgspec

from ._errors import LiveProviderError, ManifestError
from ._live import toml_type_name
from .vendors._common import MalformedResponse
from .vendors.openai import from_response, to_body

if TYPE_CHECKING:
    import httpx

__all__ = ["OpenAIAdapter"]

DEFAULT_BASE_URL: Final = "https://api.openai.com/v1"
_ENV_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SAFE_CODE: Final = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
_RETRY_STATUSES: Final = frozenset({408, 429})
_MAX_RETRIES_CAP: Final = 20

_KEYS: Final = frozenset(
    {
        "model",
        "base_url",
        "api_key_env",
        "timeout",
        "connect_timeout",
        "max_retries",
        "retry_backoff",
        "retry_max_wait",
        "headers",
    }
)


# -- configuration --------------------------------------------------------------------------


def _string(config: Mapping[str, Any], key: str, default: str | None) -> str | None:
    value = config.get(key, default)
    if value is not None and type(value) is not str:
        raise ManifestError(f"{key} must be a string, not {toml_type_name(value)}", key=key)
    return value


def _number(config: Mapping[str, Any], key: str, default: float, *, positive: bool) -> float:
    value = config.get(key, default)
    if type(value) not in (int, float):
        raise ManifestError(f"{key} must be a number, not {toml_type_name(value)}", key=key)
    number = float(value)
    if not number == number or number in (float("inf"), float("-inf")):
        raise ManifestError(f"{key} must be finite", key=key)
    if (number <= 0) if positive else (number < 0):
        raise ManifestError(f"{key} must be {'> 0' if positive else '>= 0'}", key=key)
    return number


class _Config:
    """The adapter table, checked. Values are never echoed in errors (a misplaced secret
    must not be printed back)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        if not isinstance(config, Mapping):
            raise ManifestError("the adapter table must be a table")
        for key in config:
            if key not in _KEYS:
                raise ManifestError(f"unknown key {key!r} for the openai adapter", key=str(key))
        model = _string(config, "model", None)
        if model is None:
            raise ManifestError("model is required", key="model")
        self.model: str = model
        base_url = _string(config, "base_url", DEFAULT_BASE_URL)
        assert base_url is not None
        if not base_url.startswith(("http://", "https://")):
            raise ManifestError("base_url must start with http:// or https://", key="base_url")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.api_key_env = _string(config, "api_key_env", None)
        self.timeout = _number(config, "timeout", 60.0, positive=True)
        self.connect_timeout = _number(
            config, "connect_timeout", min(10.0, self.timeout), positive=True
        )
        retries = config.get("max_retries", 2)
        if type(retries) is not int:
            raise ManifestError(
                f"max_retries must be an integer, not {toml_type_name(retries)}", key="max_retries"
            )
        if not 0 <= retries <= _MAX_RETRIES_CAP:
            raise ManifestError(
                f"max_retries must be between 0 and {_MAX_RETRIES_CAP}", key="max_retries"
            )
        self.max_retries: int = retries
        self.retry_backoff = _number(config, "retry_backoff", 0.5, positive=False)
        self.retry_max_wait = _number(config, "retry_max_wait", 20.0, positive=False)
        headers = config.get("headers", {})
        if not isinstance(headers, Mapping):
            raise ManifestError(
                f"headers must be a table, not {toml_type_name(headers)}", key="headers"
            )
        self.headers: dict[str, str] = {"Content-Type": "application/json"}
        for name, value in headers.items():
            if type(value) is not str:
                raise ManifestError(f"headers.{name} must be a string", key=f"headers.{name}")
            self.headers[str(name)] = value
        if self.api_key_env is not None:
            if _ENV_NAME.match(self.api_key_env) is None:
                # Possibly the key itself pasted by mistake: do not echo it.
                raise ManifestError(
                    "api_key_env must be the *name* of an environment variable "
                    "(letters, digits and underscores), not the key",
                    key="api_key_env",
                )
            import os

            key_value = os.environ.get(self.api_key_env, "")
            if not key_value:
                raise ManifestError(
                    f"the environment variable {self.api_key_env} (api_key_env) is not set",
                    key="api_key_env",
                )
            self.headers["Authorization"] = f"Bearer {key_value}"


# -- the adapter ----------------------------------------------------------------------------


def _import_httpx() -> Any:
    try:
        import httpx
    except ImportError:
        pass
    else:
        return httpx
    raise ManifestError(
        "the openai adapter needs httpx: pip install 'replay-actor[live]'", key="adapter"
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


def _error_code(content: bytes) -> str | None:
    """A vendor error code or type, only if it is a short identifier (never a message:
    vendors echo parts of keys and prompts in messages)."""
    try:
        data = msgspec.json.decode(content)
    except msgspec.DecodeError:
        return None
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict):
        return None
    for field in ("code", "type"):
        value = error.get(field)
        if isinstance(value, str) and _SAFE_CODE.match(value):
            return value
    return None


class OpenAIAdapter:
    """OpenAI-compatible chat completions over httpx (sync and async).

    Built from the manifest's adapter table: ``model`` (required), ``base_url``,
    ``api_key_env``, ``timeout``, ``connect_timeout``, ``max_retries``,
    ``retry_backoff``, ``retry_max_wait``, ``headers`` (see docs/manifest.md).
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._config = _Config(config)
        self._httpx = _import_httpx()
        cfg = self._config
        self._timeout = self._httpx.Timeout(cfg.timeout, connect=cfg.connect_timeout)
        # One pooled sync client; async clients are made per call so that acomplete
        # works from any event loop and release() stays synchronous (see docs).
        self._client: httpx.Client = self._httpx.Client(
            timeout=self._timeout, headers=cfg.headers, follow_redirects=False
        )
        self.model = cfg.model

    def __repr__(self) -> str:
        return f"<OpenAIAdapter model={self.model!r}>"

    # The retry policy, shared by both forms: each attempt yields an outcome, which is
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
            code = _error_code(response.content)
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
            return from_response(data)
        except MalformedResponse as exc:
            problem = str(exc)
        return LiveProviderError(
            f"the live endpoint's response is not a chat completion: {problem}", status=status
        )

    def _failure_kind(self, exc: BaseException) -> str:
        if isinstance(exc, self._httpx.TimeoutException):
            return "did not answer within the timeout"
        return f"could not be reached ({type(exc).__name__})"

    def _body(self, request: dict[str, Any]) -> bytes:
        return msgspec.json.encode(to_body(request, self._config.model))

    def complete(self, request: dict[str, Any]) -> dict[str, Any]:
        body = self._body(request)
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
        body = self._body(request)
        cfg = self._config
        attempt = 0
        async with self._httpx.AsyncClient(
            timeout=self._timeout, headers=cfg.headers, follow_redirects=False
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
