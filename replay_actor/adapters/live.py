"""``LiveProvider``: a provider that asks a live model through an adapter.

Runs in: the caller.

A live provider validates and normalises the provider-neutral request exactly as the
replay provider does, hands the plain normalised request to a vendor *adapter*, and
returns the adapter's neutral response::

    request --normalise_request--> plain neutral dict --adapter.complete--> vendor API
    neutral response {"content", "tool_calls", "finish_reason", "usage"} <--+

A tool's HTTP exchange (kind ``http``, docs/tools.md) names its own live endpoint, its
host: whatever the adapter, it goes to a forwarder (``forward.py``) that sends it there.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import msgspec

from .._errors import ProviderClosed, ReplayError
from .._http_kind import HTTP
from .._interface import ReleasedOnExit, complete_each
from .._request import RequestLike, canonical_request_and_reasoning
from ..vendors import refuse_unfaithful
from .base import Adapter

if TYPE_CHECKING:
    from .forward import HttpForwarder

__all__ = ["LiveProvider", "normalise", "prepare_request"]


def normalise(request: RequestLike) -> tuple[bytes, dict[str, Any]]:
    """Validate and normalise once: the canonical bytes (what the request hash hashes)
    and the plain normalised request, for an adapter.

    The reasoning an assistant message sends back is not hashed, so the canonical bytes
    leave it out; it is put back on its message here, for the adapter to return to the
    vendor that produced it (docs/request.md, "Reasoning sent back"). The canonical
    bytes are therefore ``canonical_request(plain)`` too: a recorder keeps them for the
    request sidecar without walking the request a second time.
    """
    canonical, carried = canonical_request_and_reasoning(request)
    plain: dict[str, Any] = msgspec.json.decode(canonical)
    messages = plain.get("messages", [])  # other kinds have none (and carry no reasoning)
    for index, reasoning in carried:
        messages[index]["reasoning"] = reasoning
    return canonical, plain


def prepare_request(request: RequestLike) -> tuple[str, dict[str, Any], bytes]:
    """``normalise``, and the request hash: ``(hash, plain, canonical bytes)``."""
    canonical, plain = normalise(request)
    return "sha256:" + hashlib.sha256(canonical).hexdigest(), plain, canonical


def _for_model(plain: dict[str, Any]) -> dict[str, Any]:
    """The request as an adapter sees it: without ``scope``.

    ``scope`` only pairs otherwise identical requests with their own recorded answers
    (docs/authoring.md); it is part of the hash, never of what a model is asked. Dropping
    it here, before any adapter, keeps every adapter (third-party ones included) from
    sending it.
    """
    if "scope" not in plain:
        return plain
    return {key: value for key, value in plain.items() if key != "scope"}


def _refuse(plain: dict[str, Any], logprobs: bool) -> None:
    """``RequestError`` naming a parameter the neutral response cannot hold (``n`` other
    than 1, ``stream``, audio or other output modalities; ``logprobs`` and
    ``top_logprobs`` unless the adapter keeps them, ``logprobs``, for a chat request),
    before anything is sent: a live answer to it, or a recording of it, would silently
    drop what was asked (docs/manifest.md, "Live adapters")."""
    params = plain.get("params")
    if params:
        keeps = logprobs and "kind" not in plain
        refuse_unfaithful(params, "params.", stream=True, logprobs=keeps)


class LiveProvider(ReleasedOnExit):
    """A provider that asks a live model through an adapter.

    Same interface as the replay provider: ``complete``, ``acomplete``, ``snapshot``,
    ``release`` (idempotent), context manager, ``closed``. Thread-safe as far as the
    adapter is (the built-in ones are: httpx2 clients are).
    """

    def __init__(self, adapter: Adapter, *, adapter_name: str, model: str) -> None:
        self._adapter = adapter
        # An adapter whose answers carry token log probabilities says so (the built-in
        # ones of OpenAI chat and Responses); any other has them refused.
        self._keeps_logprobs = getattr(adapter, "keeps_logprobs", False) is True
        self._adapter_name = adapter_name
        self._model = model
        self._lock = threading.Lock()
        self._calls = 0
        self._failures = 0
        self._closed = False
        self._forwarder: HttpForwarder | None = None

    def _for(self, plain: dict[str, Any]) -> Adapter:
        """The adapter that asks ``plain``: a tool's exchange goes to its own host."""
        if plain.get("kind") != HTTP:
            return self._adapter
        with self._lock:
            if self._forwarder is None:
                from .forward import HttpForwarder

                self._forwarder = HttpForwarder()
            return self._forwarder

    @property
    def closed(self) -> bool:
        return self._closed

    def _begin(self) -> None:
        with self._lock:
            if self._closed:
                raise ProviderClosed("this provider was released")
            self._calls += 1

    def _failed(self) -> None:
        with self._lock:
            self._failures += 1

    def complete_plain(self, plain: dict[str, Any]) -> dict[str, Any]:
        """Send an already-normalised request (the recorder uses this)."""
        _refuse(plain, self._keeps_logprobs)
        self._begin()
        try:
            return self._for(plain).complete(_for_model(plain))
        except BaseException:
            self._failed()
            raise

    async def acomplete_plain(self, plain: dict[str, Any]) -> dict[str, Any]:
        """The async form of :meth:`complete_plain`."""
        _refuse(plain, self._keeps_logprobs)
        self._begin()
        try:
            return await self._for(plain).acomplete(_for_model(plain))
        except BaseException:
            self._failed()
            raise

    def complete(self, request: RequestLike) -> dict[str, Any]:
        """Ask the live model; raises ``RequestError``, ``LiveProviderError``,
        ``ProviderClosed``."""
        if self._closed:
            raise ProviderClosed("this provider was released")
        return self.complete_plain(normalise(request)[1])

    async def acomplete(self, request: RequestLike) -> dict[str, Any]:
        """The async form of :meth:`complete`; never blocks the event loop on I/O."""
        if self._closed:
            raise ProviderClosed("this provider was released")
        return await self.acomplete_plain(normalise(request)[1])

    def complete_many(self, requests: Iterable[RequestLike]) -> list[dict[str, Any] | ReplayError]:
        """``complete`` for each request in turn: one element per request, the response
        or the ``ReplayError`` that call raised (see ``Provider``)."""
        return complete_each(self.complete, requests)

    def snapshot(self) -> dict[str, Any]:
        """``kind``, ``adapter``, ``model`` and the call counters (``retries``: the
        adapter's, 0 for an adapter that does not count them); no payload, no key."""
        retries = getattr(self._adapter, "retries", 0)
        with self._lock:
            return {
                "kind": "live",
                "adapter": self._adapter_name,
                "model": self._model,
                "calls": self._calls,
                "failures": self._failures,
                "retries": retries if type(retries) is int else 0,
            }

    def release(self) -> None:
        """Close the adapter's connections; later calls raise ``ProviderClosed``."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            forwarder, self._forwarder = self._forwarder, None
        self._adapter.close()
        if forwarder is not None:
            forwarder.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<LiveProvider {self._adapter_name} {self._model!r} {state}>"
