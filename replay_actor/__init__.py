"""replay-actor: serve language-model responses from a frozen fixture, exactly.

The public API is re-exported here; everything else lives in private ``_modules`` and
may change without notice. ``tests/test_exported_members.py`` pins ``__all__``.

Names are resolved on first use (PEP 562 ``__getattr__``): the cursor actor imports
``replay_actor._actor``, which runs this file first, and must not pay for the live
adapter, the manifest parser or asyncio, which it never uses. ``from replay_actor
import X`` and type checkers see no difference.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._canonical import canonical_json
    from ._ceilings import Ceilings
    from ._errors import (
        ActorLost,
        FixtureError,
        LiveProviderError,
        ManifestError,
        ProviderClosed,
        ReplayError,
        ReplayMiss,
        RequestError,
        SequenceExhausted,
    )
    from ._fixture import FixtureSet, load_fixture
    from ._manifest import open_provider
    from ._provider import ReplayProvider, acquire
    from ._request import Message, Request, Tool, ToolCall, request_hash
    from ._supervisor import Supervisor
    from .integrations.sdk import (
        anthropic_client,
        async_anthropic_client,
        async_openai_client,
        openai_client,
    )
    from .integrations.transport import AsyncProviderTransport, ProviderTransport

__version__ = "0.1.0"

# Where each public name lives.
_LOCATIONS: dict[str, str] = {
    "canonical_json": "_canonical",
    "Ceilings": "_ceilings",
    "ActorLost": "_errors",
    "FixtureError": "_errors",
    "LiveProviderError": "_errors",
    "ManifestError": "_errors",
    "ProviderClosed": "_errors",
    "ReplayError": "_errors",
    "ReplayMiss": "_errors",
    "RequestError": "_errors",
    "SequenceExhausted": "_errors",
    "FixtureSet": "_fixture",
    "load_fixture": "_fixture",
    "open_provider": "_manifest",
    "ReplayProvider": "_provider",
    "acquire": "_provider",
    "Message": "_request",
    "Request": "_request",
    "Tool": "_request",
    "ToolCall": "_request",
    "request_hash": "_request",
    "Supervisor": "_supervisor",
    "anthropic_client": "integrations.sdk",
    "async_anthropic_client": "integrations.sdk",
    "async_openai_client": "integrations.sdk",
    "openai_client": "integrations.sdk",
    "AsyncProviderTransport": "integrations.transport",
    "ProviderTransport": "integrations.transport",
}

__all__ = [
    "ActorLost",
    "AsyncProviderTransport",
    "Ceilings",
    "FixtureError",
    "FixtureSet",
    "LiveProviderError",
    "ManifestError",
    "Message",
    "ProviderClosed",
    "ProviderTransport",
    "ReplayError",
    "ReplayMiss",
    "ReplayProvider",
    "Request",
    "RequestError",
    "SequenceExhausted",
    "Supervisor",
    "Tool",
    "ToolCall",
    "__version__",
    "acquire",
    "anthropic_client",
    "async_anthropic_client",
    "async_openai_client",
    "canonical_json",
    "load_fixture",
    "open_provider",
    "openai_client",
    "request_hash",
]


def __getattr__(name: str) -> Any:
    module = _LOCATIONS.get(name)
    if module is None:
        raise AttributeError(f"module 'replay_actor' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value  # resolved once; later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
