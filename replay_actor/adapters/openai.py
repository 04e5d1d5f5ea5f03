"""The built-in ``openai`` adapter: OpenAI-compatible chat completions at any ``base_url``.

Runs in: the caller (a live or record provider's calls).

It sends the plain normalised neutral request (docs/request.md) as a
``POST {base_url}/chat/completions`` body and reads the vendor's answer back as the
neutral response; the mapping both ways is ``vendors.openai`` (the one place OpenAI's
shapes are read and written). Timeouts, retries and error hygiene are
``_http.HTTPAdapter``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ..vendors.openai import from_response, to_body
from ._config import HTTPConfig
from ._http import HTTPAdapter

__all__ = ["DEFAULT_BASE_URL", "OpenAIAdapter", "from_openai_response", "to_openai_body"]

DEFAULT_BASE_URL: Final = "https://api.openai.com/v1"

# The names this module had before the mapping moved to vendors.openai.
to_openai_body: Final = to_body
from_openai_response: Final = from_response


class OpenAIAdapter(HTTPAdapter):
    """OpenAI-compatible chat completions (sync and async).

    Built from the manifest's adapter table: ``model`` (required), ``base_url``,
    ``api_key_env``, ``timeout``, ``connect_timeout``, ``max_retries``,
    ``retry_backoff``, ``retry_max_wait``, ``headers`` (see docs/manifest.md).
    """

    name = "openai"
    _shape = "a chat completion"
    #: The endpoint below ``base_url`` (the Responses adapter, a subclass, posts elsewhere).
    _path = "/chat/completions"

    def __init__(self, config: Mapping[str, Any]) -> None:
        cfg = HTTPConfig(config, name=self.name, default_base_url=DEFAULT_BASE_URL, path=self._path)
        headers = dict(cfg.headers)
        if cfg.api_key is not None:
            headers["Authorization"] = f"Bearer {cfg.api_key}"
        super().__init__(cfg, headers)

    def body(self, request: dict[str, Any]) -> dict[str, Any]:
        return to_body(request, self.model)

    def parse(self, data: Any) -> dict[str, Any]:
        return from_response(data)
