"""The Google Gemini family: ``generateContent``, embeddings and token counting
(docs/gemini.md).

::

    generate.py      generateContent and streamGenerateContent: the shape
    request.py       a google-genai request body -> the neutral request (read_body)
    answer.py        the neutral response -> a GenerateContentResponse, its server-sent
                     chunks, Google's error envelope
    live.py          the neutral request -> a live body, the live answer -> the neutral
                     response, and where the gemini adapter sends it
    _fields.py       what every direction shares: the route, parameter names, derived
                     call ids
    embed.py         :embedContent, :batchEmbedContents (kind embedding)
    count_tokens.py  :countTokens (kind count_tokens)
"""

from __future__ import annotations

from typing import Final

from .._family import Family, Variables

__all__ = ["FAMILY"]

FAMILY: Final = Family(
    name="gemini",
    shapes=(
        ("gemini", "generate"),
        ("gemini-embed", "embed"),
        ("gemini-count-tokens", "count_tokens"),
    ),
    hosts=("generativelanguage.googleapis.com",),
    # Google's versioned paths, and models/{model}:method.
    paths=r"^/(?:upload/)?v1(?:alpha|beta)\d*/|/models/[^/]+(?::|%3[Aa])",
    # google-genai's GET /v1/models/{model} is spelled like OpenAI's: its key header
    # says whose envelope to answer in.
    headers=("x-goog-api-key",),
    # google-genai posts {base}/{version}/models/{model}:generateContent.
    ready=("gemini_base_url", ""),
    variables=Variables(
        base_urls=(
            ("GOOGLE_GEMINI_BASE_URL", ""),
            # LiteLLM's gemini/ posts {base}/models/{model}:generateContent.
            ("GEMINI_API_BASE", "/v1beta"),
        ),
        keys=("GEMINI_API_KEY",),
        # @ai-sdk/google has no base-URL variable (its baseURL option).
        unredirected=("GOOGLE_GENERATIVE_AI_API_KEY",),
        credentials=("GOOGLE_API_KEY",),
        switches=("GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_ENTERPRISE"),
    ),
    clients=("gemini_client", "async_gemini_client"),
)
