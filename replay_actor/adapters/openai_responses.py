"""The built-in ``openai-responses`` adapter: the OpenAI Responses API at any ``base_url``.

Runs in: the caller (a live or record provider's calls).

It sends the plain normalised neutral request (docs/request.md) as a
``POST {base_url}/responses`` body and reads the ``response`` object back as the neutral
response, keeping a refusal and the reasoning items (docs/responses.md); the mapping
both ways is ``vendors.openai_responses``. Timeouts, retries and error hygiene are
``_http.HTTPAdapter``'s, and the configuration the ``openai`` adapter's.
"""

from __future__ import annotations

from typing import Any

from ..vendors.openai_responses import from_response, to_body
from .openai import DEFAULT_BASE_URL, OpenAIAdapter

__all__ = ["DEFAULT_BASE_URL", "OpenAIResponsesAdapter"]


class OpenAIResponsesAdapter(OpenAIAdapter):
    """The OpenAI Responses API (sync and async).

    Built from the manifest's adapter table like the ``openai`` adapter, whose
    configuration and bearer key it shares: ``model`` (required), ``base_url``,
    ``api_key_env``, ``timeout``, ``connect_timeout``, ``max_retries``, ``retry_backoff``,
    ``retry_max_wait``, ``headers`` (see docs/manifest.md).
    """

    name = "openai-responses"
    _shape = "a Responses API response"
    _path = "/responses"

    def body(self, request: dict[str, Any]) -> dict[str, Any]:
        return to_body(request, self.model)

    def parse(self, data: Any) -> dict[str, Any]:
        return from_response(data)
