"""The manifest: one configuration grammar for the replay, live and record providers.

``open_provider(manifest)`` reads a TOML file (or takes the equivalent mapping), checks
every key, and returns a provider with the same interface whatever the kind::

    [provider] kind = "replay" -> replay.caller.acquisition.acquire(...)  (cursor actor)
                 backend = "ray" -> replay.caller.ray_backend.acquire(...)  (cursor actor on Ray)
               kind = "live"   -> LiveProvider(adapter from [provider])
               kind = "record" -> RecordingProvider(fixture, LiveProvider(from [provider.live]))

Every problem is a ``ManifestError`` whose ``key`` is the dotted path of the offending
key (``provider.live.model``); values are never echoed (a secret pasted in the wrong
place must not be printed back). The grammar is documented in docs/manifest.md.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from typing import Any, Final

from ._errors import ManifestError, ReplayError
from ._interface import Provider
from .adapters._config import toml_type_name
from .adapters.base import load_adapter_factory
from .adapters.live import LiveProvider
from .fixture import Ceilings

__all__ = ["Provider", "open_provider", "read_manifest"]

KINDS: Final = ("replay", "live", "record")
BACKENDS: Final = ("local", "ray")
_REPLAY_KEYS: Final = frozenset(
    {
        "kind",
        "fixture",
        "data",
        "inspection",
        "inspection_served",
        "ceilings",
        "timeout",
        "backend",
        "log",
    }
)
_RECORD_KEYS: Final = frozenset({"kind", "fixture", "data", "ceilings", "live", "log"})
_TOML_LINE: Final = re.compile(r"at line (\d+), column (\d+)")


class _Table:
    """One manifest table being read: typed getters that name the dotted key."""

    def __init__(self, values: Any, path: str) -> None:
        if not isinstance(values, Mapping):
            raise ManifestError(f"{path} must be a table, not {toml_type_name(values)}", key=path)
        self.values: Mapping[str, Any] = values
        self.path = path

    def key(self, name: str) -> str:
        return f"{self.path}.{name}"

    def check_keys(self, allowed: frozenset[str], what: str) -> None:
        for name in self.values:
            if name not in allowed:
                raise ManifestError(
                    f"unknown key {self.key(str(name))} for {what}", key=self.key(str(name))
                )

    def string(self, name: str, *, required: bool = False, default: str | None = None) -> Any:
        if name not in self.values:
            if required:
                raise ManifestError(f"{self.key(name)} is required", key=self.key(name))
            return default
        value = self.values[name]
        if type(value) is not str:
            raise ManifestError(
                f"{self.key(name)} must be a string, not {toml_type_name(value)}",
                key=self.key(name),
            )
        return value

    def choice(self, name: str, options: tuple[str, ...], default: str | None = None) -> str:
        value = self.string(name, required=default is None, default=default)
        if value not in options:
            raise ManifestError(
                f"{self.key(name)} must be one of {', '.join(repr(o) for o in options)}",
                key=self.key(name),
            )
        return str(value)


def _read(manifest: str | os.PathLike[str] | Mapping[str, Any]) -> tuple[Mapping[str, Any], str]:
    """The manifest's data and the folder its relative paths are relative to."""
    if isinstance(manifest, Mapping):
        return manifest, os.getcwd()
    if not isinstance(manifest, (str, os.PathLike)):
        raise ManifestError(
            f"a manifest is a TOML file path or a mapping, not {type(manifest).__name__}"
        )
    path = os.path.abspath(os.fspath(manifest))
    problem: str | None = None
    data: bytes = b""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        problem = "the manifest file does not exist"
    except IsADirectoryError:
        problem = "the manifest path is a directory"
    except OSError as exc:
        problem = f"the manifest file cannot be read ({os.strerror(exc.errno or 0)})"
    if problem is None:
        try:
            return tomllib.loads(data.decode("utf-8")), os.path.dirname(path)
        except UnicodeDecodeError:
            problem = "the manifest is not valid UTF-8"
        except tomllib.TOMLDecodeError as exc:
            found = _TOML_LINE.search(str(exc))
            where = f" at line {found[1]}, column {found[2]}" if found else ""
            problem = f"the manifest is not valid TOML{where}"
    # Raised outside the except blocks: the parser's message may quote the line.
    raise ManifestError(problem)


def _path(table: _Table, name: str, base: str, *, required: bool) -> str | None:
    value = table.string(name, required=required)
    if value is None:
        return None
    if not value:
        raise ManifestError(f"{table.key(name)} must not be empty", key=table.key(name))
    return os.path.normpath(os.path.join(base, os.path.expanduser(value)))


def _ceilings(table: _Table) -> dict[str, int]:
    if "ceilings" not in table.values:
        return {}
    ceilings = _Table(table.values["ceilings"], table.key("ceilings"))
    fields = frozenset(Ceilings.__struct_fields__)
    ceilings.check_keys(fields, "ceilings")
    overrides: dict[str, int] = {}
    for name, value in ceilings.values.items():
        if type(value) is not int:
            raise ManifestError(
                f"{ceilings.key(name)} must be an integer, not {toml_type_name(value)}",
                key=ceilings.key(name),
            )
        overrides[name] = value
    problem: str | None = None
    try:
        Ceilings(**overrides)
    except ValueError as exc:
        problem = str(exc)
    if problem is not None:
        bad = next((n for n in overrides if f"Ceilings.{n} " in problem), None)
        key = ceilings.key(bad) if bad else ceilings.path
        raise ManifestError(f"{key}: {problem.removeprefix(f'Ceilings.{bad} ')}", key=key)
    return overrides


def _private(table: _Table) -> bool:
    return table.choice("data", ("normal", "private"), default="normal") == "private"


def _live(table: _Table, adapter_keys: Mapping[str, Any]) -> LiveProvider:
    """A live provider from the adapter table (``[provider]`` minus ``kind``, or
    ``[provider.live]``)."""
    name = table.string("adapter", required=True)
    table.string("model", required=True)
    config = {k: v for k, v in adapter_keys.items() if k != "adapter"}
    try:
        factory = load_adapter_factory(name)
        adapter = factory(config)
    except ManifestError as exc:
        relative, message = exc.key, str(exc)
    else:
        return LiveProvider(adapter, adapter_name=name, model=str(config["model"]))
    # Adapters name keys relative to their table; the manifest names them in full.
    key = table.key(relative) if relative else table.path
    if relative and message.startswith(relative + " "):
        message = key + message[len(relative) :]
    else:
        message = f"{key}: {message}"
    raise ManifestError(message, key=key)


def open_provider(
    manifest: str | os.PathLike[str] | Mapping[str, Any],
    *,
    log: str | os.PathLike[str] | None = None,
) -> Provider:
    """Open the provider a manifest describes (a TOML file path, or the same mapping).

    Relative paths are relative to the manifest file's folder (a mapping's: the current
    directory). ``log``: write a run log there (docs/attribution.md), instead of the
    manifest's ``log`` key if it has one. Raises ``ManifestError`` naming the offending
    key; the replay kind may also raise ``FixtureError`` (the fixture is rejected), the
    record kind ``FixtureError`` or ``ReplayError`` (the fixture is being recorded by
    another provider).
    """
    data, base = _read(manifest)
    for name in data:
        if name != "provider":
            raise ManifestError(f"unknown top-level key {name}", key=str(name))
    if "provider" not in data:
        raise ManifestError("the manifest has no [provider] table", key="provider")
    provider = _Table(data["provider"], "provider")
    kind = provider.choice("kind", KINDS)
    log_path = _path(provider, "log", base, required=False) if log is None else os.fspath(log)
    opened: Provider
    if kind == "live":
        # Every key but kind (and log) belongs to the adapter, which checks them itself.
        rest = {k: v for k, v in provider.values.items() if k not in ("kind", "log")}
        opened = _live(provider, rest)
    elif kind == "record":
        opened = _record(provider, base)
    else:
        opened = _replay(provider, base)
    if log_path is None:
        return opened
    return _logged(opened, log_path, kind, provider, base)


def _logged(opened: Provider, log_path: str, kind: str, table: _Table, base: str) -> Provider:
    """``opened`` with every call written to the run log at ``log_path``."""
    from .attribution.log import RunLog
    from .attribution.provider import FixtureIndex, LoggedProvider

    try:
        private = kind != "live" and _private(table)
        try:
            run_log = RunLog(log_path, private=private, provider=kind)
        except ManifestError:
            raise
        except ReplayError as exc:
            raise ManifestError(f"provider.log: {exc}", key="provider.log") from None
        # Only a replay fixture's lines stay put (a recording rewrites its fixture).
        fixture = _path(table, "fixture", base, required=True) if kind == "replay" else None
        index = None
        if fixture is not None:
            try:
                index = FixtureIndex(fixture)
            except OSError:  # a Ray backend's fixture may be readable only on its node
                index = None
    except BaseException:
        opened.release()
        raise
    return LoggedProvider(opened, run_log, index)


def _record(provider: _Table, base: str) -> Provider:
    provider.check_keys(_RECORD_KEYS, 'kind = "record"')
    fixture = _path(provider, "fixture", base, required=True)
    private = _private(provider)
    overrides = _ceilings(provider)
    if "live" not in provider.values:
        raise ManifestError("provider.live is required", key="provider.live")
    live_table = _Table(provider.values["live"], "provider.live")
    live = _live(live_table, live_table.values)
    from .record.provider import RecordingProvider

    assert fixture is not None
    return RecordingProvider(fixture, live, private=private, ceilings=Ceilings(**overrides))


def _replay(provider: _Table, base: str) -> Provider:
    provider.check_keys(_REPLAY_KEYS, 'kind = "replay"')
    backend = provider.choice("backend", BACKENDS, default="local")
    fixture = _path(provider, "fixture", base, required=True)
    private = _private(provider)
    inspection = _path(provider, "inspection", base, required=False)
    if backend == "ray" and inspection is not None:
        # The record would be written on whichever node runs the cursor actor.
        raise ManifestError(
            'provider.inspection is not available with backend = "ray" (use inspect())',
            key="provider.inspection",
        )
    overrides = _ceilings(provider)
    extra = _replay_options(provider, inspection)
    assert fixture is not None
    # Both backends explain a miss the same way (the authoring layer's explainer).
    from ._replay import miss_explainer

    if backend == "ray":
        from .replay.caller.ray_backend import acquire as acquire_on_ray

        on_ray: Provider = acquire_on_ray(
            fixture,
            private=private,
            ceilings=Ceilings(**overrides),
            explainers=miss_explainer,
            **extra,
        )
        return on_ray
    from .replay.caller.acquisition import acquire

    provider_handle: Provider = acquire(
        fixture,
        private=private,
        ceilings=Ceilings(**overrides),
        inspection_path=inspection,
        explainers=miss_explainer,
        **extra,
    )
    return provider_handle


def _replay_options(provider: _Table, inspection: str | None) -> dict[str, Any]:
    """``timeout`` and ``inspection_served``, as ``acquire``'s keyword arguments."""
    extra: dict[str, Any] = {}
    if "timeout" in provider.values:
        timeout = provider.values["timeout"]
        if type(timeout) not in (int, float) or not 0 < timeout < float("inf"):
            raise ManifestError(
                "provider.timeout must be a positive number of seconds", key="provider.timeout"
            )
        extra["timeout"] = float(timeout)
    if "inspection_served" in provider.values:
        served = provider.values["inspection_served"]
        if type(served) is not bool or (served and inspection is None):
            raise ManifestError(
                "provider.inspection_served must be true or false, and true needs "
                "provider.inspection",
                key="provider.inspection_served",
            )
        extra["inspection_served"] = served
    return extra


#: The ``[provider]`` keys that hold paths relative to the manifest's folder.
_PATH_KEYS: Final = ("fixture", "inspection", "log")


def read_manifest(manifest: str | os.PathLike[str] | Mapping[str, Any]) -> dict[str, Any]:
    """The manifest as the mapping ``open_provider`` takes, its relative paths
    (``provider.fixture``, ``provider.inspection``, ``provider.log``) made absolute, so it
    can be changed (another kind, another table) and opened from any directory.

    Only reads: a file that is not a readable TOML manifest raises ``ManifestError``, but
    the keys are checked by ``open_provider``, which reports them with its usual words.
    """
    data, base = _read(manifest)
    out = dict(data)
    table = out.get("provider")
    if isinstance(table, Mapping):
        table = dict(table)
        for key in _PATH_KEYS:
            value = table.get(key)
            if isinstance(value, str) and value:
                table[key] = os.path.normpath(os.path.join(base, os.path.expanduser(value)))
        out["provider"] = table
    return out
