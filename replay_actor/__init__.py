"""replay-actor: serve language-model responses from a frozen fixture, exactly.

The public API is re-exported here; everything else lives in private ``_modules`` and
may change without notice. ``tests/package/test_exported_members.py`` pins ``__all__``.

Names are resolved on first use (PEP 562 ``__getattr__``): the zygote imports
``replay_actor.replay.forked.zygote``, which runs this file first, and must not pay for
the live adapter, the manifest parser or asyncio, which it never uses. ``from
replay_actor import X`` and type checkers see no difference.

The package (docs/architecture.md, "Map of the package", says more)::

    _version.py      the version             _errors.py       the exception tree
    _request.py      the neutral request     _response.py     the neutral response
    _kinds.py        request kinds beyond chat (embedding, completion, mcp, http)
    _http_kind.py    a tool's HTTP exchange: the http request and response
    _canonical.py    RFC 8785 JSON           _memo.py         results by a value's image
    _interface.py    ``Provider``            _strict_json.py  strict JSON text
    _replay.py       acquire, Supervisor
    pydantic_ai.py   ``ReplayModel``         ray.py           the Ray backend's acquire
    __main__.py      ``python -m replay_actor``
    fixture/         the file format and the table
    files/           durable writes and the request sidecar
    replay/          the cursor actor and the handles on it, folders by process
    record/          record mode
    adapters/        live adapters
    vendors/         every vendor wire shape, one folder per family
    authoring/       tools around a fixture
    serving/         the HTTP exchange: routes, answers, outcomes, batches
    integrations/    SDKs, transports, frameworks
    frontdoor/       every vendor API over local HTTP
    mcp/             ``replay-actor mcp``: a stand-in for a stdio MCP server
    attribution/     the run log and ``compare``
    manifest/        ``Manifest``, ``read_manifest``, ``open_provider``
    cli/             the ``replay-actor`` command
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from importlib import import_module
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from ._canonical import canonical_json
    from ._errors import (
        ActorLost,
        ClockUnavailable,
        FixtureError,
        InspectionPathError,
        InvalidArgument,
        LiveProviderError,
        ManifestError,
        OwnerNotAlive,
        ProviderClosed,
        RecordingError,
        RecordingLocked,
        ReplayError,
        ReplayMiss,
        RequestError,
        SequenceExhausted,
        TooManyActors,
    )
    from ._http_kind import HttpRequest
    from ._interface import Provider
    from ._kinds import CompletionRequest, EmbeddingRequest, McpRequest
    from ._replay import Supervisor, acquire
    from ._request import Message, Request, Tool, ToolCall, request_hash
    from .adapters.base import Adapter
    from .fixture import Ceilings, FixtureSet, entry_line, load_fixture

    # The SDK clients each vendor family names (vendors.FAMILIES), for type checkers:
    # at run time they resolve through the families' records (__getattr__), and
    # tests/vendors/test_families.py holds this list and __all__ to those records.
    from .integrations.sdk import (
        anthropic_client,
        async_anthropic_client,
        async_gemini_client,
        async_ollama_client,
        async_openai_client,
        gemini_client,
        ollama_client,
        openai_client,
    )
    from .integrations.transport import AsyncProviderTransport, ProviderTransport
    from .manifest import AdapterTable, Manifest, open_provider, read_manifest
    from .replay.caller.handle import ReplayProvider
    from .replay.caller.ray_backend import RayReplayProvider

from ._version import __version__

# Where each public name lives, but the SDK clients (below).
_FIXED: Final[dict[str, str]] = {
    "canonical_json": "_canonical",
    "ActorLost": "_errors",
    "ClockUnavailable": "_errors",
    "FixtureError": "_errors",
    "InspectionPathError": "_errors",
    "InvalidArgument": "_errors",
    "LiveProviderError": "_errors",
    "ManifestError": "_errors",
    "OwnerNotAlive": "_errors",
    "ProviderClosed": "_errors",
    "RecordingError": "_errors",
    "RecordingLocked": "_errors",
    "ReplayError": "_errors",
    "ReplayMiss": "_errors",
    "RequestError": "_errors",
    "SequenceExhausted": "_errors",
    "TooManyActors": "_errors",
    "Provider": "_interface",
    "CompletionRequest": "_kinds",
    "EmbeddingRequest": "_kinds",
    "McpRequest": "_kinds",
    "HttpRequest": "_http_kind",
    "Message": "_request",
    "Request": "_request",
    "Tool": "_request",
    "ToolCall": "_request",
    "request_hash": "_request",
    "Adapter": "adapters.base",
    "Ceilings": "fixture._ceilings",
    "FixtureSet": "fixture._table",
    "entry_line": "fixture._format",
    "load_fixture": "fixture._load",
    "RayReplayProvider": "replay.caller.ray_backend",
    "open_provider": "manifest",
    "AdapterTable": "manifest.grammar",
    "Manifest": "manifest.grammar",
    "read_manifest": "manifest.grammar",
    "ReplayProvider": "replay.caller.handle",
    "acquire": "_replay",
    "Supervisor": "_replay",
    "AsyncProviderTransport": "integrations.transport",
    "ProviderTransport": "integrations.transport",
}

__all__ = [
    "ActorLost",
    "ClockUnavailable",
    "Adapter",
    "AdapterTable",
    "AsyncProviderTransport",
    "Ceilings",
    "CompletionRequest",
    "EmbeddingRequest",
    "FixtureError",
    "FixtureSet",
    "HttpRequest",
    "InspectionPathError",
    "InvalidArgument",
    "LiveProviderError",
    "Manifest",
    "ManifestError",
    "McpRequest",
    "Message",
    "OwnerNotAlive",
    "Provider",
    "ProviderClosed",
    "ProviderTransport",
    "RayReplayProvider",
    "RecordingError",
    "RecordingLocked",
    "ReplayError",
    "ReplayMiss",
    "ReplayProvider",
    "Request",
    "RequestError",
    "SequenceExhausted",
    "Supervisor",
    "TooManyActors",
    "Tool",
    "ToolCall",
    "__version__",
    "acquire",
    "anthropic_client",
    "async_anthropic_client",
    "async_gemini_client",
    "async_ollama_client",
    "async_openai_client",
    "canonical_json",
    "entry_line",
    "gemini_client",
    "load_fixture",
    "ollama_client",
    "open_provider",
    "openai_client",
    "read_manifest",
    "request_hash",
]


class _Locations(Mapping[str, str]):
    """Where each public name lives: the names above, and the SDK clients every vendor
    family names (``vendors.FAMILIES``, built by ``integrations/sdk.py``), read from the
    families' records only when a client is asked for or the table is read whole (so
    importing the package imports no vendor)."""

    def __init__(self) -> None:
        self._whole: dict[str, str] | None = None

    def _read(self) -> dict[str, str]:
        if self._whole is None:
            from .vendors import client_names

            self._whole = {**_FIXED, **dict.fromkeys(client_names(), "integrations.sdk")}
        return self._whole

    def __getitem__(self, name: str) -> str:
        found = _FIXED.get(name)
        if found is not None:
            return found
        if not name.endswith("_client"):
            raise KeyError(name)
        return self._read()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._read())

    def __len__(self) -> int:
        return len(self._read())


_LOCATIONS: Final = _Locations()


def __getattr__(name: str) -> Any:
    module = _LOCATIONS.get(name)
    if module is None:
        raise AttributeError(f"module 'replay_actor' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value  # resolved once; later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
