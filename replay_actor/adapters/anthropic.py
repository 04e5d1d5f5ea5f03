"""The built-in ``anthropic`` adapter: Anthropic's Messages API.

Runs in: the caller (a live or record provider's calls).

It sends the plain normalised neutral request (docs/request.md) as a
``POST {base_url}/v1/messages`` body, with the key from ``api_key_env`` in ``x-api-key``
and the ``anthropic-version`` header, and reads the answer back as the neutral response;
the mapping both ways is ``vendors.anthropic``. The default ``base_url`` is the vendor's
(``https://api.anthropic.com``, the SDK's own form: the path adds ``/v1``). Timeouts,
retries and error hygiene are ``_http.HTTPAdapter``'s, as for ``openai``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ..vendors.anthropic import from_response, to_body
from ._config import COMMON_KEYS, HTTPConfig, string_field
from ._http import HTTPAdapter

__all__ = ["ANTHROPIC_VERSION", "DEFAULT_BASE_URL", "AnthropicAdapter"]

DEFAULT_BASE_URL: Final = "https://api.anthropic.com"
#: The API version sent unless the table's ``anthropic_version`` says otherwise.
ANTHROPIC_VERSION: Final = "2023-06-01"


class AnthropicAdapter(HTTPAdapter):
    """Anthropic messages (sync and async).

    Built from the manifest's adapter table: the keys every HTTP adapter takes
    (``model``, ``base_url``, ``api_key_env``, ``timeout``, ``connect_timeout``,
    ``max_retries``, ``retry_backoff``, ``retry_max_wait``, ``headers``) plus
    ``anthropic_version`` (see docs/manifest.md).
    """

    name = "anthropic"
    _shape = "a message"

    def __init__(self, config: Mapping[str, Any]) -> None:
        cfg = HTTPConfig(
            config,
            name=self.name,
            default_base_url=DEFAULT_BASE_URL,
            path="/v1/messages",
            allowed=COMMON_KEYS | {"anthropic_version"},
        )
        version = string_field(config, "anthropic_version", ANTHROPIC_VERSION)
        headers = dict(cfg.headers)
        headers["anthropic-version"] = version or ANTHROPIC_VERSION
        if cfg.api_key is not None:
            headers["x-api-key"] = cfg.api_key
        super().__init__(cfg, headers)

    def body(self, request: dict[str, Any]) -> dict[str, Any]:
        return to_body(request, self.model)

    def parse(self, data: Any) -> dict[str, Any]:
        return from_response(data)
