"""The provider-neutral response (docs/request.md, "The neutral response"): one typed
reading of the response dicts that providers return, for every place that turns a
response into something else (the vendor shapes, Inspect, pydantic-ai).

A provider answers with a plain dict, because fixtures are written by hand and may carry
keys of their own; :func:`read_response` reads the keys this project gives a meaning to
and ignores the rest, with one tolerance for missing keys everywhere:

=================  ============================  =========================================
key                type                          absent means
=================  ============================  =========================================
``content``        string or null                no text
``tool_calls``     ``[{id, name, arguments}]``   no calls (a missing ``id``/``name``/
                                                 ``arguments`` reads as ``""``)
``finish_reason``  string or null                decided by the vendor shape
``usage``          object or null                zeros
``created``        integer                       0
``refusal``        string or null                the model did not refuse
``reasoning``      ``{vendor, items: [object]}`` no reasoning (replayed only to ``vendor``)
``logprobs``       ``{content: [token], ...}``   none asked for: the tokens' log
                                                 probabilities, kept verbatim in OpenAI
                                                 chat's form (docs/request.md)
``embeddings``     ``[[number]]``                no vectors (the answer to an embedding
                                                 request: one vector per text, in order)
``input_tokens``   integer or null               no count (the answer to a
                                                 ``count_tokens`` request)
=================  ============================  =========================================

A completion (``kind: "completion"``) answers with ``content``, as chat does. Vectors are
kept as JSON numbers: a vector recorded from base64 float32 holds each float32 exactly, so
it is served float32-exact in both of OpenAI's encodings (docs/embeddings.md).

A value of the wrong type (``"content": 3``) cannot be said faithfully in any vendor's
shape: it raises :class:`Unexpressible`, which the transports answer as a closed failure.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any, Final

import msgspec

__all__ = [
    "RAW_VECTORS",
    "Reasoning",
    "Response",
    "ResponseCall",
    "Unexpressible",
    "read_response",
]


class Unexpressible(Exception):
    """A stored response cannot be said in the asked vendor's shape (a value of the wrong
    type, tool arguments that are not a JSON object where the vendor needs one); the
    transports answer it as a closed failure, never a guess."""


class ResponseCall(msgspec.Struct, omit_defaults=True):
    """One tool call the model made; ``arguments`` is JSON text."""

    id: str = ""
    name: str = ""
    arguments: str = ""


class Reasoning(msgspec.Struct):
    """The model's reasoning as its vendor sent it (OpenAI reasoning items, Anthropic
    ``thinking``/``redacted_thinking`` blocks): opaque, replayed verbatim to ``vendor``
    only, and never hashed when a later request sends it back."""

    vendor: str
    items: list[dict[str, Any]]


class Response(msgspec.Struct, omit_defaults=True):
    """The neutral response. See the module docstring for each field."""

    content: str | None = None
    tool_calls: list[ResponseCall] = msgspec.field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    created: int = 0
    refusal: str | None = None
    reasoning: Reasoning | None = None
    #: Verbatim, as OpenAI chat's ``choices[0].logprobs`` (``content``, ``refusal``).
    logprobs: dict[str, Any] | None = None
    #: Lists of numbers; ``array("f")`` where the reader asked for them raw (``RAW_VECTORS``).
    embeddings: list[list[float]] | None = None
    input_tokens: int | None = None


_convert: Final = msgspec.convert


#: Set by a caller that can take a response's vectors as ``array("f")`` (the serving
#: layer, answering an embedding request): the local replay handle then asks its actor
#: to carry them as raw float32 (docs/architecture.md, "Wire protocol"), and the
#: response's ``embeddings`` is a list of arrays of the same float32 values, never
#: parsed from JSON text. Everywhere else vectors are lists of numbers.
RAW_VECTORS: Final[ContextVar[bool]] = ContextVar("replay_actor_raw_vectors", default=False)


def read_response(response: Mapping[str, Any]) -> Response:
    """The typed reading of a provider's response dict; unknown keys are ignored.

    Raises :class:`Unexpressible` naming the JSON path of a value of the wrong type (a
    path into the response, never a value from it).
    """
    vectors = response.get("embeddings")
    if type(vectors) is list and vectors and type(vectors[0]) is array:
        # Raw float32 vectors (``RAW_VECTORS``): checked as numbers where they were made,
        # so the rest is read and they are kept as they are.
        rest = {key: value for key, value in response.items() if key != "embeddings"}
        reading = read_response(rest)
        reading.embeddings = vectors  # (sequences of floats as well: see the field)
        return reading
    try:
        return _convert(response, Response)
    except msgspec.ValidationError as exc:
        where = str(exc).rpartition(" - at ")[2] if " - at " in str(exc) else "$"
        raise Unexpressible(
            f"the stored response has a value of the wrong type at {where}"
        ) from None
