"""replay-actor: serve language-model responses from a frozen fixture, exactly.

The public API is re-exported here; everything else lives in private ``_modules`` and
may change without notice. ``tests/test_exported_members.py`` pins ``__all__``.
"""

from __future__ import annotations

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

__version__ = "0.1.0"

__all__ = [
    "ActorLost",
    "Ceilings",
    "FixtureError",
    "FixtureSet",
    "LiveProviderError",
    "ManifestError",
    "Message",
    "ProviderClosed",
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
    "canonical_json",
    "load_fixture",
    "open_provider",
    "request_hash",
]
