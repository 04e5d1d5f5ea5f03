"""Google Gemini ``generateContent`` <-> the neutral request and response (docs/gemini.md).

This package is the one place the Gemini API's shapes are read or written::

    request.py  a google-genai request body (POST .../models/{model}:generateContent or
                :streamGenerateContent) -> the neutral request (read_body)
    answer.py   the neutral response -> a GenerateContentResponse (response_body), its
                server-sent chunks (stream_body), Google's error envelope (error_body)
    live.py     the neutral request -> a live body (to_body), the live answer -> the
                neutral response (from_response), and where the gemini adapter sends it
    _fields.py  what every direction shares: the route, parameter names, derived call ids

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

from .._shape import Shape, by_model
from ._fields import NAME, ROUTE, derived_call_id
from .answer import error_body, response_body, stream_body
from .live import LIVE, from_response, to_body
from .request import read_body

__all__ = [
    "LIVE",
    "NAME",
    "ROUTE",
    "SHAPE",
    "derived_call_id",
    "error_body",
    "from_response",
    "read_body",
    "response_body",
    "stream_body",
    "to_body",
]


#: Gemini's ``generateContent`` and ``streamGenerateContent``.
SHAPE: Final = Shape(
    name=NAME,
    routes=(ROUTE,),
    paths=(
        "POST /v1beta/models/{model}:generateContent",
        "POST /v1beta/models/{model}:streamGenerateContent",
    ),
    live=LIVE,
    read_body=read_body,
    response_body=by_model(response_body),
    stream_body=by_model(stream_body),
    error_body=error_body,
    to_body=to_body,
    from_response=from_response,
)
