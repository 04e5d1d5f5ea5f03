"""Checking an HTTP adapter's manifest table: the keys every HTTP adapter shares.

Runs in: the caller, when a manifest opens a live or record provider.

Values are never echoed in errors: a secret pasted into the wrong key must not be
printed back. Errors name the key relative to the adapter table; the manifest loader
prefixes the table's own path (docs/manifest.md, "Live adapters").
"""

from __future__ import annotations

import math
import os
import re
import urllib.parse
from collections.abc import Mapping
from typing import Any, Final

from .._errors import ManifestError

__all__ = ["HTTPConfig", "number_field", "string_field", "toml_type_name"]

_ENV_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MAX_RETRIES_CAP: Final = 20
#: What an HTTP header value can carry as it is: visible ASCII, inner spaces and tabs.
_HEADER_VALUE: Final = re.compile(r"^([\x21-\x7e]([\x20-\x7e\t]*[\x21-\x7e])?)?$")
_HEADER_NAME: Final = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
#: A key is one token: visible ASCII, no space.
_KEY: Final = re.compile(r"^[\x21-\x7e]+$")
#: The largest live answer read by default (docs/manifest.md, ``max_response_bytes``).
DEFAULT_MAX_RESPONSE_BYTES: Final = 16 * 1024 * 1024
#: The keys ``HTTPConfig`` reads; an adapter may allow more.
COMMON_KEYS: Final = frozenset(
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
        "max_response_bytes",
    }
)


def toml_type_name(value: object) -> str:
    """A manifest value's type in TOML's words, for errors about any table."""
    return {
        bool: "boolean",
        int: "integer",
        float: "float",
        str: "string",
        list: "array",
        dict: "table",
    }.get(type(value), type(value).__name__)


def string_field(config: Mapping[str, Any], key: str, default: str | None) -> str | None:
    """``config[key]`` if it is a string (or absent: ``default``); ``ManifestError`` else."""
    value = config.get(key, default)
    if value is not None and type(value) is not str:
        raise ManifestError(f"{key} must be a string, not {toml_type_name(value)}", key=key)
    return value


def number_field(config: Mapping[str, Any], key: str, default: float, *, positive: bool) -> float:
    """``config[key]`` as a finite float, > 0 (``positive``) or >= 0."""
    value = config.get(key, default)
    if type(value) not in (int, float):
        raise ManifestError(f"{key} must be a number, not {toml_type_name(value)}", key=key)
    number = float(value)
    if not math.isfinite(number):
        raise ManifestError(f"{key} must be finite", key=key)
    if (number <= 0) if positive else (number < 0):
        raise ManifestError(f"{key} must be {'> 0' if positive else '>= 0'}", key=key)
    return number


class HTTPConfig:
    """An HTTP adapter's table, checked: endpoint, key variable, timeouts, retries, headers.

    ``name`` is the adapter's name (for errors), ``default_base_url`` the vendor's, and
    ``path`` the endpoint below the base URL. The API key is read from the environment
    variable named by ``api_key_env`` and kept in ``api_key`` only: the adapter turns it
    into its vendor's header.
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        *,
        name: str,
        default_base_url: str,
        path: str,
        allowed: frozenset[str] = COMMON_KEYS,
    ) -> None:
        # In this order: the first problem of a table is the one reported.
        _check_keys(config, name, allowed)
        model = string_field(config, "model", None)
        if model is None:
            raise ManifestError("model is required", key="model")
        self.model: str = model
        self.url = _base_url(config, default_base_url) + path
        self.timeout = number_field(config, "timeout", 60.0, positive=True)
        self.connect_timeout = number_field(
            config, "connect_timeout", min(10.0, self.timeout), positive=True
        )
        self.max_retries: int = _max_retries(config)
        self.retry_backoff = number_field(config, "retry_backoff", 0.5, positive=False)
        self.retry_max_wait = number_field(config, "retry_max_wait", 20.0, positive=False)
        self.headers: dict[str, str] = {"Content-Type": "application/json", **_headers(config)}
        max_bytes = config.get("max_response_bytes", DEFAULT_MAX_RESPONSE_BYTES)
        if type(max_bytes) is not int or max_bytes < 1:
            raise ManifestError(
                "max_response_bytes must be a positive integer", key="max_response_bytes"
            )
        self.max_response_bytes: int = max_bytes
        self.api_key: str | None = None
        api_key_env = string_field(config, "api_key_env", None)
        if api_key_env is not None:
            if _ENV_NAME.match(api_key_env) is None:
                # Possibly the key itself pasted by mistake: do not echo it.
                raise ManifestError(
                    "api_key_env must be the *name* of an environment variable "
                    "(letters, digits and underscores), not the key",
                    key="api_key_env",
                )
            self.api_key = _read_key(api_key_env)


def _check_keys(config: Mapping[str, Any], name: str, allowed: frozenset[str]) -> None:
    if not isinstance(config, Mapping):
        raise ManifestError("the adapter table must be a table")
    for key in config:
        if key not in allowed:
            raise ManifestError(f"unknown key {key!r} for the {name} adapter", key=str(key))


def _base_url(config: Mapping[str, Any], default: str) -> str:
    """``base_url`` (or the vendor's), checked, without a trailing slash."""
    base_url = string_field(config, "base_url", default)
    assert base_url is not None
    if not base_url.startswith(("http://", "https://")):
        raise ManifestError("base_url must start with http:// or https://", key="base_url")
    if _has_userinfo(base_url):
        # httpx2 logs every request's URL at INFO: a password there would be in every
        # log. The credential is not echoed.
        raise ManifestError(
            "base_url must not hold credentials (user:password@ before the host); "
            "give the key through api_key_env or headers",
            key="base_url",
        )
    return base_url.rstrip("/")


def _max_retries(config: Mapping[str, Any]) -> int:
    retries = config.get("max_retries", 2)
    if type(retries) is not int:
        raise ManifestError(
            f"max_retries must be an integer, not {toml_type_name(retries)}", key="max_retries"
        )
    if not 0 <= retries <= _MAX_RETRIES_CAP:
        raise ManifestError(
            f"max_retries must be between 0 and {_MAX_RETRIES_CAP}", key="max_retries"
        )
    return retries


def _headers(config: Mapping[str, Any]) -> dict[str, str]:
    """The table's ``headers``, each a name and a value an HTTP header can carry."""
    headers = config.get("headers", {})
    if not isinstance(headers, Mapping):
        raise ManifestError(
            f"headers must be a table, not {toml_type_name(headers)}", key="headers"
        )
    checked: dict[str, str] = {}
    for header, value in headers.items():
        if _HEADER_NAME.match(str(header)) is None:
            raise ManifestError("a key of headers is not an HTTP header name", key="headers")
        if type(value) is not str:
            raise ManifestError(f"headers.{header} must be a string", key=f"headers.{header}")
        if _HEADER_VALUE.match(value) is None:
            # The HTTP client would raise UnicodeEncodeError quoting the value (it may
            # be a credential); say what is wrong instead.
            raise ManifestError(
                f"headers.{header} holds a character an HTTP header cannot carry "
                "(non-ASCII, a line break or a control character, or surrounding "
                "spaces)",
                key=f"headers.{header}",
            )
        checked[str(header)] = value
    return checked


def _has_userinfo(url: str) -> bool:
    try:
        netloc = urllib.parse.urlsplit(url).netloc
    except ValueError:
        return "@" in url
    return "@" in netloc


def _read_key(variable: str) -> str:
    """The key in ``variable``; ``ManifestError`` naming ``api_key_env`` if it is unset,
    empty, or not a header-safe token.

    No local variable of this frame (or of the caller's, which assigns the result) holds
    the key when it raises: reporters print frame locals (``capture_locals``, Sentry),
    and the error must carry no key.
    """
    if not os.environ.get(variable):
        raise ManifestError(
            f"the environment variable {variable} (api_key_env) is not set", key="api_key_env"
        )
    if _KEY.match(os.environ[variable]) is None:
        # A pasted no-break space, smart quote or line break: the HTTP client would raise
        # UnicodeEncodeError (or a protocol error) whose args hold "Bearer <key>".
        raise ManifestError(
            f"the environment variable {variable} (api_key_env) holds a character an API "
            "key cannot have (non-ASCII such as a no-break space or a smart quote, a "
            "space, or a control character); copy the key again",
            key="api_key_env",
        )
    return os.environ[variable]
