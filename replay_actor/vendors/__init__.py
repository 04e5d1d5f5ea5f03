"""The vendor shapes: the one place a vendor's wire format is read or written, behind one
contract (:class:`Vendor`) and one registry (docs/sdk.md, "The mapping").

Each vendor API is a module (or package) of this package holding one class that
satisfies :class:`Vendor`; :data:`REGISTRY` names it. It is the one list of shapes for
replay, live and record alike: the transports (``integrations/serving.py``), the front
door and the CLI's ``--from`` find vendors here and nowhere else, and every registered
shape is a built-in live adapter under its name (``adapters/builtin.py`` makes it from the
shape's ``live`` endpoint, ``to_body`` and ``from_response``). A new vendor shape is a
new module plus one registry line::

    SDK body --read_body--> VendorCall(neutral request, how to answer)
    provider.complete(request) --> response dict --read_response--> Response
    Response --response_body | stream_body--> vendor JSON | vendor server-sent events
    neutral request --to_body--> live body;  live answer --from_response--> response dict
    live: LiveEndpoint (base URL, path, key header, own keys) --> the live adapter

::

    _common.py    rules every shape shares (arguments, one-text-part content, refusals)
    _endpoint.py  LiveEndpoint: where a shape's live adapter sends a request
    _turns.py     a conversation as alternating turns (Anthropic's, Gemini's live bodies)
    _unstreamed.py  Unstreamed: the stream body of a shape never streamed (its JSON)
    openai.py     chat completions
    anthropic.py  messages
    openai_responses/  the Responses API (its memory of served responses included)
    gemini/       generateContent
    _vectors.py   embedding vectors: stored ones read, float32 base64 both ways
    _counting.py  token counting: a chat body of kind count_tokens, its input_tokens
    openai_embeddings.py       /v1/embeddings (float and base64 from one entry)
    openai_completions.py      legacy /v1/completions (kind completion)
    openai_input_tokens.py     /v1/responses/input_tokens (kind count_tokens)
    anthropic_count_tokens.py  /v1/messages/count_tokens (kind count_tokens)
    gemini_embed.py            :embedContent, :batchEmbedContents (kind embedding)
    gemini_count_tokens.py     :countTokens (kind count_tokens)
    ollama/       Ollama's /api/chat, /api/generate, /api/embed (NDJSON streams)

A chat shape's ``live`` endpoint lists, in ``kinds``, the shape that asks each other
request kind live (docs/request.md, "Request kinds"), so one ``openai`` adapter records
chat, embeddings, completions and token counts alike.

A ``Vendor`` object is made per serving provider (:func:`make_vendor`), so a shape that
must remember what it served (the Responses API's ``previous_response_id``) keeps that
memory per provider, in memory, and nowhere else.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Final

from ._common import identifier
from ._shape import Shape

__all__ = [
    "REGISTRY",
    "Shape",
    "Vendor",
    "identifier",
    "make_vendor",
    "served_with",
    "vendor_names",
]


#: What callers annotate a vendor shape with: a :class:`Shape`.
Vendor = Shape


#: name -> "module:attribute", imported on first use (a vendor's module is only loaded
#: when it is asked for): the attribute is the :class:`Shape`, or a function making one
#: (a shape that remembers what it served).
REGISTRY: Final[dict[str, str]] = {
    "openai": "replay_actor.vendors.openai.chat:SHAPE",
    "anthropic": "replay_actor.vendors.anthropic.messages:SHAPE",
    "openai-responses": "replay_actor.vendors.openai.responses:remembering",
    "gemini": "replay_actor.vendors.gemini.generate:SHAPE",
    "openai-embeddings": "replay_actor.vendors.openai.embeddings:SHAPE",
    "openai-completions": "replay_actor.vendors.openai.completions:SHAPE",
    "openai-input-tokens": "replay_actor.vendors.openai.input_tokens:SHAPE",
    "anthropic-count-tokens": "replay_actor.vendors.anthropic.count_tokens:SHAPE",
    "gemini-embed": "replay_actor.vendors.gemini.embed:SHAPE",
    "gemini-count-tokens": "replay_actor.vendors.gemini.count_tokens:SHAPE",
    "ollama": "replay_actor.vendors.ollama.chat:SHAPE",
    "ollama-generate": "replay_actor.vendors.ollama.generate:SHAPE",
    "ollama-embed": "replay_actor.vendors.ollama.embed:SHAPE",
}


#: The APIs one vendor SDK speaks at one base URL: a transport for ``api="openai"`` answers
#: the OpenAI SDK's chat completions and its Responses API alike.
_SERVED_WITH: Final[dict[str, tuple[str, ...]]] = {
    "openai": (
        "openai",
        "openai-responses",
        "openai-embeddings",
        "openai-completions",
        "openai-input-tokens",
    ),
    "anthropic": ("anthropic", "anthropic-count-tokens"),
    "gemini": ("gemini", "gemini-embed", "gemini-count-tokens"),
    "ollama": ("ollama", "ollama-generate", "ollama-embed"),
}


def served_with(name: str) -> tuple[str, ...]:
    """The vendor APIs a transport for ``name`` answers (``name`` first)."""
    return _SERVED_WITH.get(name, (name,))


def vendor_names() -> tuple[str, ...]:
    """The registered vendor API names, in registry order."""
    return tuple(REGISTRY)


def make_vendor(name: str) -> Shape:
    """The :class:`Shape` registered as ``name`` (a fresh one for a shape that remembers
    what it served); ``ValueError`` naming the known ones."""
    where = REGISTRY.get(name)
    if where is None:
        known = ", ".join(repr(n) for n in REGISTRY)
        raise ValueError(f"api must be one of {known}, not {name!r}")
    module, _, attr = where.partition(":")
    made: Shape | Callable[[], Shape] = getattr(importlib.import_module(module), attr)
    return made if isinstance(made, Shape) else made()
