"""Mapping rules shared by every vendor shape (see docs/sdk.md, "The mapping").

Two rules decide whether one conversation hashes alike through different vendors' SDKs
and frameworks, so they live in one place:

- tool-call arguments are JSON text; when the text parses as JSON it is re-encoded as
  RFC 8785, so ``{"a": 1}`` and ``{"a":1.0}`` name the same call (text that is not JSON
  is kept as it is: the request still hashes, just not across spellings);
- message content that is an array of exactly one text part without other keys is that
  text, so ``[{"type": "text", "text": "hi"}]`` and ``"hi"`` hash alike; any other array
  is kept verbatim (an image part, a second part or a ``cache_control`` key means
  something a plain string cannot say).
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from .._canonical import canonical_json
from .._errors import RequestError

__all__ = ["canonical_arguments", "collapse_content"]

_decode: Final = msgspec.json.decode
_TEXT_PART_KEYS: Final = frozenset({"type", "text"})


def canonical_arguments(text: str) -> str:
    """``text`` as RFC 8785 when it parses as one JSON value, else ``text`` unchanged.

    A value RFC 8785 cannot encode exactly (``1e400``, an integer beyond 2^53 - 1) keeps
    its original spelling too: rewriting it would change what the model was given.
    """
    try:
        value = _decode(text)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return text
    try:
        return canonical_json(value).decode()
    except RequestError:
        return text


def collapse_content(content: Any) -> Any:
    """A one-text-part array becomes its string; any other value is returned as is."""
    if type(content) is list and len(content) == 1:
        part = content[0]
        if (
            type(part) is dict
            and part.keys() == _TEXT_PART_KEYS
            and part["type"] == "text"
            and type(part["text"]) is str
        ):
            return part["text"]
    return content
