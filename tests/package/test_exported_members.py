"""The public API is exactly what ``__all__`` lists, and every name is importable."""

from __future__ import annotations

import replay_actor

EXPECTED = {
    "ActorLost",
    "ClockUnavailable",
    "Adapter",
    "AdapterTable",
    "AsyncProviderTransport",
    "Ceilings",
    "CompletionRequest",
    "EmbeddingRequest",
    "HttpRequest",
    "FixtureError",
    "FixtureSet",
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
}


def test_all_is_pinned() -> None:
    assert set(replay_actor.__all__) == EXPECTED
    assert len(replay_actor.__all__) == len(EXPECTED)


def test_every_exported_name_resolves_and_is_public() -> None:
    for name in replay_actor.__all__:
        value = getattr(replay_actor, name)
        module = getattr(value, "__module__", "replay_actor")
        assert module.startswith("replay_actor"), name


def test_exception_tree() -> None:
    from replay_actor import (
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

    for exc in (
        FixtureError,
        RequestError,
        ReplayMiss,
        SequenceExhausted,
        ProviderClosed,
        ActorLost,
        ManifestError,
        LiveProviderError,
        InvalidArgument,
        OwnerNotAlive,
        TooManyActors,
        InspectionPathError,
        RecordingError,
        ClockUnavailable,
    ):
        assert issubclass(exc, ReplayError)
    assert issubclass(RecordingLocked, RecordingError)
    assert issubclass(RequestError, ValueError)
    assert issubclass(InvalidArgument, ValueError)
    assert not issubclass(ProviderClosed, ActorLost)
    assert not issubclass(ActorLost, ProviderClosed)


def test_every_name_in_all_is_mapped_to_its_module() -> None:
    # The lazy table and __all__ must agree, or a name would be listed but unimportable.
    locations = replay_actor._LOCATIONS
    assert set(locations) | {"__version__"} == set(replay_actor.__all__)
    for name, module in locations.items():
        assert getattr(replay_actor, name).__module__ == f"replay_actor.{module}"
    assert set(replay_actor.__all__) <= set(dir(replay_actor))


def test_unknown_attribute_is_an_attribute_error() -> None:
    import pytest

    with pytest.raises(AttributeError):
        replay_actor.no_such_name  # noqa: B018


def test_the_ray_module_exports_its_acquire_and_handle() -> None:
    # Importing it does not import Ray (tests/replay/caller/test_ray_backend.py checks that
    # in a fresh process).
    import replay_actor.ray

    assert replay_actor.ray.__all__ == ["RayReplayProvider", "acquire"]
    assert replay_actor.ray.RayReplayProvider is replay_actor.RayReplayProvider
    assert replay_actor.ray.acquire.__module__ == "replay_actor.ray"
