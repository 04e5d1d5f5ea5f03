"""The Anthropic family: the Messages API and its token counting (docs/sdk.md).

::

    messages.py      messages: body <-> request, response -> message or events
    count_tokens.py  /v1/messages/count_tokens (kind count_tokens)
"""

from __future__ import annotations

from typing import Final

from .._family import Family, Variables

__all__ = ["FAMILY"]

FAMILY: Final = Family(
    name="anthropic",
    shapes=(
        ("anthropic", "messages"),
        ("anthropic-count-tokens", "count_tokens"),
    ),
    hosts=("api.anthropic.com",),
    paths=r"^/v1/messages(?:/|$)",
    headers=("anthropic-version",),
    # The Anthropic SDKs post {base}/v1/messages.
    ready=("anthropic_base_url", ""),
    variables=Variables(
        base_urls=(("ANTHROPIC_BASE_URL", ""),),
        keys=("ANTHROPIC_API_KEY",),
        # Not set to the token: the SDKs would send it twice; an inherited one goes.
        credentials=("ANTHROPIC_AUTH_TOKEN",),
        switches=("CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"),
    ),
    clients=("anthropic_client", "async_anthropic_client"),
)
