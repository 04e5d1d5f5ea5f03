"""The built-in ``gemini`` adapter: Google's Gemini API (``generateContent``).

Runs in: the caller (a live or record provider's calls).

It sends the plain normalised neutral request (docs/request.md) as a
``POST {base_url}/{api_version}/models/{model}:generateContent`` body, with the key from
``api_key_env`` in ``x-goog-api-key``, and reads the answer back as the neutral response;
the mapping both ways is ``vendors.gemini``. The default ``base_url`` is the vendor's
(``https://generativelanguage.googleapis.com``) and ``api_version`` defaults to
``v1beta``, where every field the mapping writes (``parametersJsonSchema``,
``responseJsonSchema``, function call ids) is accepted. Timeouts, retries and error
hygiene are ``_http.HTTPAdapter``'s, as for ``openai`` and ``anthropic``. Answers are
whole (never streamed): a streamed SDK call is served from the whole answer.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from typing import Any, Final

from .._errors import ManifestError
from ..vendors.gemini import from_response, to_body
from ._config import COMMON_KEYS, HTTPConfig, string_field
from ._http import HTTPAdapter

__all__ = ["API_VERSION", "DEFAULT_BASE_URL", "GeminiAdapter"]

DEFAULT_BASE_URL: Final = "https://generativelanguage.googleapis.com"
#: The REST version in the path unless the table's ``api_version`` says otherwise.
API_VERSION: Final = "v1beta"
_VERSION: Final = re.compile(r"^v[0-9][A-Za-z0-9]*$")


class GeminiAdapter(HTTPAdapter):
    """Gemini ``generateContent`` (sync and async).

    Built from the manifest's adapter table: the keys every HTTP adapter takes
    (``model``, ``base_url``, ``api_key_env``, ``timeout``, ``connect_timeout``,
    ``max_retries``, ``retry_backoff``, ``retry_max_wait``, ``headers``) plus
    ``api_version`` (see docs/gemini.md). ``model`` may be given as ``gemini-x`` or
    ``models/gemini-x``.
    """

    name = "gemini"
    _shape = "a GenerateContentResponse"

    def __init__(self, config: Mapping[str, Any]) -> None:
        model = string_field(config, "model", None) if isinstance(config, Mapping) else None
        version = (
            string_field(config, "api_version", API_VERSION)
            if isinstance(config, Mapping)
            else API_VERSION
        )
        if version is None or _VERSION.match(version) is None:
            raise ManifestError("api_version must look like v1 or v1beta", key="api_version")
        name = (model or "").removeprefix("models/")
        path = f"/{version}/models/{urllib.parse.quote(name, safe='')}:generateContent"
        cfg = HTTPConfig(
            config,
            name=self.name,
            default_base_url=DEFAULT_BASE_URL,
            path=path,
            allowed=COMMON_KEYS | {"api_version"},
        )
        headers = dict(cfg.headers)
        if cfg.api_key is not None:
            headers["x-goog-api-key"] = cfg.api_key
        super().__init__(cfg, headers)

    def body(self, request: dict[str, Any]) -> dict[str, Any]:
        return to_body(request, self.model)

    def parse(self, data: Any) -> dict[str, Any]:
        return from_response(data)
