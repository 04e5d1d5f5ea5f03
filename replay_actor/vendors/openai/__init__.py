"""The OpenAI family: every API the OpenAI SDKs speak at one base URL (docs/sdk.md).

::

    chat.py          chat completions: body <-> request, response -> completion or chunks
    responses/       the Responses API and its memory of served responses
    embeddings.py    /v1/embeddings (float and base64 from one entry)
    completions.py   legacy /v1/completions (kind completion)
    input_tokens.py  /v1/responses/input_tokens (kind count_tokens)

Its clients are also the OpenAI-compatible ones that name OpenAI's variables (LiteLLM,
DSPy's default engine) and ``openai.AzureOpenAI``. It recognises no path or header of
its own: a request no family's look claims is answered in its envelope.
"""

from __future__ import annotations

from typing import Final

from .._family import Family, Variables

__all__ = ["FAMILY"]

FAMILY: Final = Family(
    name="openai",
    shapes=(
        ("openai", "chat"),
        ("openai-responses", "responses:remembering"),
        ("openai-embeddings", "embeddings"),
        ("openai-completions", "completions"),
        ("openai-input-tokens", "input_tokens"),
    ),
    hosts=("api.openai.com",),
    # The OpenAI SDKs post {base}/chat/completions and {base}/responses.
    ready=("openai_base_url", "/v1"),
    variables=Variables(
        base_urls=(
            ("OPENAI_BASE_URL", "/v1"),
            # LiteLLM and older OpenAI-based tools (DSPy's default engine among them).
            ("OPENAI_API_BASE", "/v1"),
            # openai.AzureOpenAI posts {endpoint}/openai/deployments/{name}/...
            ("AZURE_OPENAI_ENDPOINT", ""),
        ),
        keys=("OPENAI_API_KEY", "AZURE_OPENAI_API_KEY"),
        credentials=("AZURE_OPENAI_AD_TOKEN",),
        # openai.AzureOpenAI needs an API version; an inherited one is kept.
        defaults=(("OPENAI_API_VERSION", "2024-10-21"),),
    ),
    clients=("openai_client", "async_openai_client"),
)
