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
import re
from typing import TYPE_CHECKING, Any, Final, Protocol

from ._common import identifier

if TYPE_CHECKING:
    from .._response import Response
    from ._common import VendorCall
    from ._endpoint import LiveEndpoint

__all__ = ["REGISTRY", "Vendor", "identifier", "make_vendor", "served_with", "vendor_names"]


class Vendor(Protocol):
    """One vendor API's mapping to and from the neutral request and response."""

    @property
    def name(self) -> str:
        """The registry name (``openai``, ``anthropic``, ...): ``api=`` of the transports,
        ``--from`` of the CLI, ``adapter =`` of a manifest."""
        ...

    @property
    def routes(self) -> tuple[re.Pattern[str], ...]:
        """``POST`` paths this API answers, matched with ``search`` against the URL path."""
        ...

    # Optional: ``paths``, a tuple of what a user reads for the routes
    # ("POST /v1/chat/completions"), listed by a 404 (serving.py reads it with getattr,
    # so a shape without it still serves; its 404 then names the API instead). Every
    # registered shape has it (tests/test_endpoint_routes.py holds them to it).

    @property
    def live(self) -> LiveEndpoint:
        """Where its live adapter sends a request (base URL, path, how the key travels,
        keys of its own); ``adapters/builtin.py`` makes the adapter from it, ``to_body``
        and ``from_response``."""
        ...

    def read_body(self, body: Any, path: str = "") -> VendorCall:
        """The neutral request and call options for a decoded request body (``path``, the
        URL path it was posted to, may carry the model or the streaming choice).
        Raises ``RequestError`` naming the field it cannot replay."""
        ...

    def response_body(self, response: Response, call: VendorCall) -> dict[str, Any]:
        """The vendor's JSON answer for a neutral response."""
        ...

    def stream_body(self, response: Response, call: VendorCall) -> bytes:
        """The same answer as the vendor's server-sent events, so its SDK's stream helper
        rebuilds exactly :meth:`response_body`."""
        ...

    def error_body(self, kind: str, message: str, nearest: dict[str, Any] | None) -> dict[str, Any]:
        """The vendor's error envelope, which its SDK raises as its own exception."""
        ...

    def to_body(self, request: dict[str, Any], model: str) -> dict[str, Any]:
        """The live request body for a plain normalised neutral request."""
        ...

    def from_response(self, data: Any) -> dict[str, Any]:
        """The neutral response dict for a live answer (``MalformedResponse`` if not the
        vendor's shape)."""
        ...


#: name -> "module:class", imported on first use (a vendor's module is only loaded when
#: it is asked for).
REGISTRY: Final[dict[str, str]] = {
    "openai": "replay_actor.vendors.openai.chat:OpenAIChat",
    "anthropic": "replay_actor.vendors.anthropic.messages:AnthropicMessages",
    "openai-responses": "replay_actor.vendors.openai.responses:OpenAIResponses",
    "gemini": "replay_actor.vendors.gemini.generate:GeminiGenerateContent",
    "openai-embeddings": "replay_actor.vendors.openai.embeddings:OpenAIEmbeddings",
    "openai-completions": "replay_actor.vendors.openai.completions:OpenAICompletions",
    "openai-input-tokens": "replay_actor.vendors.openai.input_tokens:OpenAIInputTokens",
    "anthropic-count-tokens": "replay_actor.vendors.anthropic.count_tokens:AnthropicCountTokens",
    "gemini-embed": "replay_actor.vendors.gemini.embed:GeminiEmbed",
    "gemini-count-tokens": "replay_actor.vendors.gemini.count_tokens:GeminiCountTokens",
    "ollama": "replay_actor.vendors.ollama.chat:OllamaChat",
    "ollama-generate": "replay_actor.vendors.ollama.generate:OllamaGenerate",
    "ollama-embed": "replay_actor.vendors.ollama.embed:OllamaEmbed",
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


def make_vendor(name: str) -> Vendor:
    """A fresh :class:`Vendor` for ``name``; ``ValueError`` naming the known ones."""
    where = REGISTRY.get(name)
    if where is None:
        known = ", ".join(repr(n) for n in REGISTRY)
        raise ValueError(f"api must be one of {known}, not {name!r}")
    module, _, attr = where.partition(":")
    factory: Any = getattr(importlib.import_module(module), attr)
    made: Vendor = factory()
    return made
