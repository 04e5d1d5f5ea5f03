"""The adapter interface (``Adapter``, public) and the adapter registry.

Runs in: the caller, when a manifest opens a live or record provider.

An adapter turns the plain normalised neutral request into a vendor call and the
vendor's answer into the neutral response (``live.LiveProvider`` drives it).
Adapters are found by name in the entry-point group ``replay_actor.adapters``. Every
vendor shape of ``vendors.REGISTRY`` is built in under its name (``openai``,
``anthropic``, ``openai-responses``, ``gemini``; ``builtin.py`` makes each from the
registry), and is used even when the installed package metadata is stale or lacks it
(an editable install whose entry points were never regenerated).

An adapter is a class constructed from the manifest's adapter table (every key but
``adapter``); it validates its own keys and raises ``ManifestError`` naming the key
*relative to that table* — the manifest loader prefixes the table's own path.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol, runtime_checkable

from .._errors import ManifestError
from ..vendors import vendor_names

__all__ = ["ADAPTER_GROUP", "Adapter", "AdapterFactory", "builtin_names", "load_adapter_factory"]

#: The entry-point group third-party adapters register under.
ADAPTER_GROUP: Final = "replay_actor.adapters"


@runtime_checkable
class Adapter(Protocol):
    """What a vendor adapter provides.

    It is constructed as ``Factory(config)``, where ``config`` is the manifest's adapter
    table without its ``adapter`` key (so it includes ``model``). ``complete`` and
    ``acomplete`` take the plain, normalised provider-neutral request (fields equal to
    their defaults are absent; docs/request.md) and return the neutral response
    ``{"content": str | None, "tool_calls": [{"id", "name", "arguments"}],
    "finish_reason": str | None, "usage": dict | None}``, plus ``refusal`` (a string)
    and ``reasoning`` (``{"vendor", "items"}``) only when the model gave them (never
    dropped: docs/manifest.md, "Refusals and reasoning"). Failures of the endpoint raise
    ``LiveProviderError``; its message must never contain the API key or the prompt.
    ``close``/``aclose`` free connections; both are idempotent.
    """

    def complete(self, request: dict[str, Any]) -> dict[str, Any]: ...

    async def acomplete(self, request: dict[str, Any]) -> dict[str, Any]: ...

    def close(self) -> None: ...

    async def aclose(self) -> None: ...


#: A class (or any callable) building an adapter from its manifest table.
AdapterFactory = Callable[[Mapping[str, Any]], Adapter]


def builtin_names() -> tuple[str, ...]:
    """The built-in adapters' names: every registered vendor shape's."""
    return vendor_names()


def _builtin(name: str) -> AdapterFactory | None:
    if name not in vendor_names():
        return None
    from .builtin import builtin_adapter

    return builtin_adapter(name)


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
        known = sorted({*known, *builtin_names()})
        problem = f"unknown adapter {name!r} (known: {', '.join(known)})"
    raise ManifestError(problem, key="adapter")
