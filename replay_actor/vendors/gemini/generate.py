"""Google Gemini ``generateContent`` <-> the neutral request and response (docs/gemini.md):
the shape, made of the family's mapping modules (``request.py``, ``answer.py``,
``live.py``, ``_fields.py``), whose public functions it gathers.

The neutral request is the OpenAI-like one of docs/request.md, so one conversation sent
through google-genai and through the OpenAI SDK hashes alike wherever both can say it:
``systemInstruction`` is a leading system message, ``model`` turns are assistant
messages, ``functionCall`` parts are ``tool_calls`` (``args`` as RFC 8785 text),
``functionResponse`` parts are tool messages, ``topP`` is ``params.top_p`` and
``maxOutputTokens`` is ``params.max_tokens``. Gemini's function calls need not carry an
id; the neutral ones always do, so an absent id is derived from the call itself
(:func:`derived_call_id`), the same way wherever the call is read, and left out again
wherever the call is written.
"""

from __future__ import annotations

from typing import Final

from ._fields import NAME, ROUTE, derived_call_id
from .answer import error_body, response_body, stream_body
from .live import LIVE, from_response, to_body
from .request import read_body

__all__ = [
    "LIVE",
    "NAME",
    "PATHS",
    "ROUTE",
    "ROUTES",
    "derived_call_id",
    "error_body",
    "from_response",
    "read_body",
    "response_body",
    "stream_body",
    "to_body",
]


ROUTES: Final = (ROUTE,)
PATHS: Final = (
    "POST /v1beta/models/{model}:generateContent",
    "POST /v1beta/models/{model}:streamGenerateContent",
)
