"""The Cohere family: its v2 chat API (docs/cohere.md).

::

    chat.py  POST /v2/chat: body <-> request, response -> chat response or events

The ``cohere`` SDK reads its base URL from ``CO_API_URL`` and its key from
``CO_API_KEY`` (else ``COHERE_API_KEY``); it is built on httpx, so an in-process client
takes the httpx transport (``httpx_client=httpx.Client(transport=...)``).
"""

from __future__ import annotations

from typing import Final

from .._family import Family, Variables

__all__ = ["FAMILY"]

FAMILY: Final = Family(
    name="cohere",
    shapes=(("cohere", "chat"),),
    hosts=("api.cohere.com", "api.cohere.ai"),
    # The v2 API's paths are Cohere's alone among the families.
    paths=r"^/v2/",
    # The cohere SDK posts {base}/v2/chat.
    ready=("cohere_base_url", ""),
    variables=Variables(
        base_urls=(("CO_API_URL", ""),),
        keys=("CO_API_KEY", "COHERE_API_KEY"),
    ),
)
