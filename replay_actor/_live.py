"""The live provider, the adapter interface, and the adapter registry (SPEC §5).

A live provider validates and normalises the provider-neutral request exactly as the
replay provider does, hands the plain normalised request to a vendor *adapter*, and
returns the adapter's neutral response::

    request --normalise_request--> plain neutral dict --adapter.complete--> vendor API
    neutral response {"content", "tool_calls", "finish_reason", "usage"} <--+

Adapters are found by name in the entry-point group ``replay_actor.adapters``; ``openai``
is built in, and is used even when the installed package metadata is stale (an editable
install whose entry points were never regenerated).

An adapter is a class constructed from the manifest's adapter table (every key but
``adapter``); it validates its own keys and raises ``ManifestError`` naming the key
*relative to that table* — the manifest loader prefixes the table's own path.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import threading
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Final, Protocol, runtime_checkable

import msgspec

from ._errors import ManifestError, ProviderClosed
from ._request import RequestLike, canonical_request

__all__ = [
    "ADAPTER_GROUP",
    "Adapter",
    "AdapterFactory",
    "LiveProvider",
    "load_adapter_factory",
    "prepare_request",
    "toml_type_name",
]

#: The entry-point group third-party adapters register under.
ADAPTER_GROUP: Final = "replay_actor.adapters"


def toml_type_name(value: object) -> str:
    """A manifest value's type in TOML's words, for errors about adapter tables too."""
    return {
        bool: "boolean",
        int: "integer",
        float: "float",
        str: "string",
        list: "array",
        dict: "table",
    }.get(type(value), type(value).__name__)


@runtime_checkable
class Adapter(Protocol):
    """What a vendor adapter provides.

    It is constructed as ``Factory(config)``, where ``config`` is the manifest's adapter
    table without its ``adapter`` key (so it includes ``model``). ``complete`` and
    ``acomplete`` take the plain, normalised provider-neutral request (SPEC §2; fields
    equal to their defaults are absent) and return the neutral response
    ``{"content": str | None, "tool_calls": [{"id", "name", "arguments"}],
    "finish_reason": str | None, "usage": dict | None}``. Failures of the endpoint raise
    ``LiveProviderError``; its message must never contain the API key or the prompt.
    ``close``/``aclose`` free connections; both are idempotent.
    """

    def complete(self, request: dict[str, Any]) -> dict[str, Any]: ...

    async def acomplete(self, request: dict[str, Any]) -> dict[str, Any]: ...

    def close(self) -> None: ...

    async def aclose(self) -> None: ...


#: A class (or any callable) building an adapter from its manifest table.
AdapterFactory = Callable[[Mapping[str, Any]], Adapter]


def _builtin(name: str) -> AdapterFactory | None:
    if name == "openai":
        from ._openai import OpenAIAdapter

        return OpenAIAdapter
    return None


def load_adapter_factory(name: str) -> AdapterFactory:
    """The adapter factory registered as ``name``; ``ManifestError`` (key ``adapter``)
    if there is none or it cannot be imported."""
    found = [ep for ep in importlib.metadata.entry_points(group=ADAPTER_GROUP) if ep.name == name]
    problem = ""
    if found:
        try:
            factory: AdapterFactory = found[0].load()
        except Exception as exc:
            problem = f"adapter {name!r} could not be loaded ({type(exc).__name__})"
        else:
            return factory
    builtin = _builtin(name)
    if builtin is not None:
        return builtin
    if not problem:
        known = sorted({ep.name for ep in importlib.metadata.entry_points(group=ADAPTER_GROUP)})
        known = sorted({*known, "openai"})
        problem = f"unknown adapter {name!r} (known: {', '.join(known)})"
    raise ManifestError(problem, key="adapter")


def prepare_request(request: RequestLike) -> tuple[str, dict[str, Any]]:
    """Validate and normalise once: the request hash and the plain normalised request."""
    canonical = canonical_request(request)
    plain: dict[str, Any] = msgspec.json.decode(canonical)
    return "sha256:" + hashlib.sha256(canonical).hexdigest(), plain


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


class LiveProvider:
    """A provider that asks a live model through an adapter.

    Same interface as the replay provider: ``complete``, ``acomplete``, ``snapshot``,
    ``release`` (idempotent), context manager, ``closed``. Thread-safe as far as the
    adapter is (the built-in one is: httpx clients are).
    """

    def __init__(self, adapter: Adapter, *, adapter_name: str, model: str) -> None:
        self._adapter = adapter
        self._adapter_name = adapter_name
        self._model = model
        self._lock = threading.Lock()
        self._calls = 0
        self._failures = 0
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def _begin(self) -> None:
        with self._lock:
            if self._closed:
                raise ProviderClosed("the provider was released")
            self._calls += 1

    def _failed(self) -> None:
        with self._lock:
            self._failures += 1

    def complete_plain(self, plain: dict[str, Any]) -> dict[str, Any]:
        """Send an already-normalised request (the recorder uses this)."""
        self._begin()
        try:
            return self._adapter.complete(_for_model(plain))
        except BaseException:
            self._failed()
            raise

    async def acomplete_plain(self, plain: dict[str, Any]) -> dict[str, Any]:
        """The async form of :meth:`complete_plain`."""
        self._begin()
        try:
            return await self._adapter.acomplete(_for_model(plain))
        except BaseException:
            self._failed()
            raise

    def complete(self, request: RequestLike) -> dict[str, Any]:
        """Ask the live model; raises ``RequestError``, ``LiveProviderError``,
        ``ProviderClosed``."""
        if self._closed:
            raise ProviderClosed("the provider was released")
        _, plain = prepare_request(request)
        return self.complete_plain(plain)

    async def acomplete(self, request: RequestLike) -> dict[str, Any]:
        """The async form of :meth:`complete`; never blocks the event loop on I/O."""
        if self._closed:
            raise ProviderClosed("the provider was released")
        _, plain = prepare_request(request)
        return await self.acomplete_plain(plain)

    def snapshot(self) -> dict[str, Any]:
        """``kind``, ``adapter``, ``model`` and the call counters; no payload, no key."""
        with self._lock:
            return {
                "kind": "live",
                "adapter": self._adapter_name,
                "model": self._model,
                "calls": self._calls,
                "failures": self._failures,
            }

    def release(self) -> None:
        """Close the adapter's connections; later calls raise ``ProviderClosed``."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._adapter.close()

    def __enter__(self) -> LiveProvider:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<LiveProvider {self._adapter_name} {self._model!r} {state}>"
