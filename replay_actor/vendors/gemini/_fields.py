"""What every direction of the Gemini mapping shares: the API's name and route, the
parameter names, and the ids of function calls that came without one.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

from ..._canonical import canonical_json

__all__ = [
    "JSON_MIME",
    "NAME",
    "PARAM_NAMES",
    "PARAM_NAMES_BACK",
    "ROUTE",
    "derived_call_id",
]

NAME: Final = "gemini"

#: ``POST .../models/{model}:generateContent`` | ``:streamGenerateContent`` (google-genai
#: adds ``?alt=sse`` to the stream's URL; the path carries no query).
ROUTE: Final = re.compile(
    r"/(?:models|tunedModels)/(?P<model>[^/:]+)(?::|%3[Aa])"
    r"(?P<method>generateContent|streamGenerateContent)/?$"
)

#: The output type that asks for JSON (``responseMimeType``).
JSON_MIME: Final = "application/json"

#: generationConfig fields with a neutral (OpenAI) name, so they hash alike everywhere.
PARAM_NAMES: Final = {
    "temperature": "temperature",
    "topP": "top_p",
    "topK": "top_k",
    "maxOutputTokens": "max_tokens",
    "stopSequences": "stop",
    "seed": "seed",
    "presencePenalty": "presence_penalty",
    "frequencyPenalty": "frequency_penalty",
}
PARAM_NAMES_BACK: Final = {v: k for k, v in PARAM_NAMES.items()}


def derived_call_id(index: int, name: str, arguments: str) -> str:
    """The neutral id of a Gemini function call that carries none: ``call_`` + 24 hex
    characters of the sha256 of ``[index, name, arguments]`` (RFC 8785), ``index`` the
    call's position among the function calls of its turn and ``arguments`` the neutral
    (RFC 8785) text.

    The same call therefore gets the same id in the live answer that recorded it and in
    the request that sends it back, and an id equal to this is left out whenever the call
    is written for Gemini again (the model never sent one).
    """
    digest = hashlib.sha256(canonical_json([index, name, arguments])).hexdigest()
    return "call_" + digest[:24]
