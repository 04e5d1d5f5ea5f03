"""The manifest: one configuration grammar for the replay, live and record providers.

::

    grammar.py   ``Manifest`` and ``AdapterTable``: the typed form, read and checked once
                 (``read_manifest``), every default and rule of the grammar

This module opens it. ``open_provider(manifest)`` takes a ``Manifest``, or reads one
from a TOML file path or the equivalent mapping, and returns a provider with the same
interface whatever the kind::

    [provider] kind = "replay" -> replay.caller.acquisition.acquire(...)  (cursor actor)
                 backend = "ray" -> replay.caller.ray_backend.acquire(...)  (cursor actor on Ray)
               kind = "live"   -> LiveProvider(adapter from [provider])
               kind = "record" -> RecordingProvider(fixture, LiveProvider(from [provider.live]))

The adapter is found and built here, once per opening; it checks its own keys, and its
``ManifestError`` is re-keyed to the full dotted path. The grammar is documented in
docs/manifest.md.
"""

from __future__ import annotations

import os

from .._errors import ManifestError, ReplayError
from .._interface import Provider
from ..adapters.base import load_adapter_factory
from ..adapters.live import LiveProvider
from .grammar import AdapterTable, Manifest, ManifestLike, read_manifest

__all__ = [
    "AdapterTable",
    "Manifest",
    "ManifestLike",
    "Provider",
    "open_provider",
    "read_manifest",
]


def open_provider(
    manifest: ManifestLike,
    *,
    log: str | os.PathLike[str] | None = None,
) -> Provider:
    """Open the provider a manifest describes (a ``Manifest``, a TOML file path, or the
    same mapping).

    Relative paths are relative to the manifest file's folder (a mapping's: the current
    directory). ``log``: write a run log there (docs/attribution.md), instead of the
    manifest's ``log`` key if it has one. Raises ``ManifestError`` naming the offending
    key; the replay kind may also raise ``FixtureError`` (the fixture is rejected), the
    record kind ``FixtureError`` or ``ReplayError`` (the fixture is being recorded by
    another provider).
    """
    read = read_manifest(manifest)
    log_path = read.log if log is None else os.fspath(log)
    opened: Provider
    if read.kind == "live":
        assert read.live is not None
        opened = _live(read.live, "provider")
    elif read.kind == "record":
        opened = _record(read)
    else:
        opened = _replay(read)
    if log_path is None:
        return opened
    return _logged(opened, log_path, read)


def _live(table: AdapterTable, path: str) -> LiveProvider:
    """A live provider from the adapter table at ``path`` (``provider`` or
    ``provider.live``)."""
    try:
        factory = load_adapter_factory(table.adapter)
        adapter = factory(table.config())
    except ManifestError as exc:
        relative, message = exc.key, str(exc)
    else:
        return LiveProvider(adapter, adapter_name=table.adapter, model=table.model)
    # Adapters name keys relative to their table; the manifest names them in full.
    key = f"{path}.{relative}" if relative else path
    if relative and message.startswith(relative + " "):
        message = key + message[len(relative) :]
    else:
        message = f"{key}: {message}"
    raise ManifestError(message, key=key)


def _logged(opened: Provider, log_path: str, manifest: Manifest) -> Provider:
    """``opened`` with every call written to the run log at ``log_path``."""
    from ..attribution.log import RunLog
    from ..attribution.provider import FixtureIndex, LoggedProvider

    try:
        try:
            run_log = RunLog(log_path, private=manifest.private, provider=manifest.kind)
        except ManifestError:
            raise
        except ReplayError as exc:
            raise ManifestError(f"provider.log: {exc}", key="provider.log") from None
        # Only a replay fixture's lines stay put (a recording rewrites its fixture).
        index = None
        if manifest.kind == "replay" and manifest.fixture is not None:
            try:
                index = FixtureIndex(manifest.fixture)
            except OSError:  # a Ray backend's fixture may be readable only on its node
                index = None
    except BaseException:
        opened.release()
        raise
    return LoggedProvider(opened, run_log, index)


def _record(manifest: Manifest) -> Provider:
    assert manifest.fixture is not None and manifest.live is not None
    live = _live(manifest.live, "provider.live")
    from ..record.provider import RecordingProvider

    return RecordingProvider(
        manifest.fixture, live, private=manifest.private, ceilings=manifest.ceilings
    )


def _replay(manifest: Manifest) -> Provider:
    assert manifest.fixture is not None
    # Both backends explain a miss the same way (the authoring layer's explainer).
    from .._replay import miss_explainer
    from ..replay.caller.acquisition import Terms, acquire

    if manifest.backend == "ray":
        from ..replay.caller.ray_backend import acquire as acquire_on_ray

        terms = Terms(
            private=manifest.private, ceilings=manifest.ceilings, timeout=manifest.timeout
        )
        on_ray: Provider = acquire_on_ray(manifest.fixture, terms, explainers=miss_explainer)
        return on_ray
    terms = Terms(
        private=manifest.private,
        ceilings=manifest.ceilings,
        inspection_path=manifest.inspection,
        timeout=manifest.timeout,
        inspection_served=manifest.inspection_served,
    )
    provider_handle: Provider = acquire(manifest.fixture, terms, explainers=miss_explainer)
    return provider_handle
