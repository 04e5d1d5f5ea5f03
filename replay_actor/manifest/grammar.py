"""The manifest's typed form: ``Manifest``, read and checked once, defaults stated here.

Runs in: the caller (``open_provider``, ``run``, ``serve``, the pytest plugin, the CLI).

``read_manifest(path_or_mapping)`` reads a TOML file once (or takes the equivalent
mapping) and returns a ``Manifest``: a frozen value whose relative paths are already
resolved (against the manifest file's folder; a mapping's, against the current directory),
so every later reader of a manifest takes that value and never the file again. A
``Manifest`` built in code is checked by the same rules, in the same order, with the
same messages.

Every problem is a ``ManifestError`` whose ``key`` is the dotted path of the offending
key (``provider.live.model``); values are never echoed (a secret pasted in the wrong
place must not be printed back). The adapter table's own keys (``base_url``,
``api_key_env``, ...) are the adapter's to check, when ``open_provider`` builds it. The
grammar is documented in docs/manifest.md.
"""

from __future__ import annotations

import datetime
import math
import os
import re
import tomllib
from collections.abc import Mapping
from typing import Any, Final, Literal

import msgspec
from msgspec.structs import force_setattr

from .._errors import ManifestError
from ..adapters import toml_type_name
from ..fixture import DEFAULT_CEILINGS, Ceilings

__all__ = ["BACKENDS", "KINDS", "AdapterTable", "Manifest", "ManifestLike", "read_manifest"]

KINDS: Final = ("replay", "live", "record")
BACKENDS: Final = ("local", "ray")
_DATA: Final = ("normal", "private")
#: ``[provider]`` keys of every kind that ``run`` reads besides ``log`` (a live
#: manifest's other keys belong to its adapter table).
_EVERY_KIND: Final = ("ignore", "clock")
#: The ``[provider]`` keys of each kind (the live kind's belong to its adapter table).
_KEYS: Final = {
    "replay": frozenset(
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
            "http_headers",
            *_EVERY_KIND,
        }
    ),
    "record": frozenset(
        {"kind", "fixture", "data", "ceilings", "live", "log", "http_headers", *_EVERY_KIND}
    ),
    "live": frozenset({"kind", "live", "log", *_EVERY_KIND}),
}
#: The ``[provider]`` keys that hold paths relative to the manifest's folder.
_PATH_KEYS: Final = ("fixture", "inspection", "log")
_TOML_LINE: Final = re.compile(r"at line (\d+), column (\d+)")
#: An ``ignore`` entry: a host name (``*.`` before it: the domain and every name below
#: it), an IPv4 or a bracketed IPv6 address, optionally ``:port``.
_IGNORED_HOST: Final = re.compile(
    r"(?:(?:\*\.)?[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?)*"
    r"|\[[0-9a-f:.]+\])(?::[0-9]{1,5})?\Z"
)
#: RFC 3339's date-time (section 5.6): a full date, a full time, a zone.
_RFC3339: Final = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?"
    r"(?:[Zz]|[+-][0-9]{2}:[0-9]{2})\Z"
)
_EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


class AdapterTable(msgspec.Struct, frozen=True, kw_only=True):
    """A live adapter's table: a live manifest's ``[provider]`` (without ``kind`` and
    ``log``), or a record manifest's ``[provider.live]``.

    ``adapter`` and ``model`` are required for every adapter; ``options`` holds the
    adapter's own keys (``base_url``, ``api_key_env``, ...), which the adapter checks when
    ``open_provider`` builds it.
    """

    adapter: str
    model: str
    options: dict[str, Any] = {}

    def config(self) -> dict[str, Any]:
        """What the adapter is built from: the table without ``adapter``."""
        return {"model": self.model, **self.options}

    def as_dict(self) -> dict[str, Any]:
        """The table as the manifest writes it."""
        return {"adapter": self.adapter, "model": self.model, **self.options}


class Manifest(msgspec.Struct, frozen=True, kw_only=True):
    """A checked manifest (docs/manifest.md): what ``read_manifest`` returns and what
    ``open_provider`` opens. The defaults below are the grammar's, stated once.

    Built in code, it is checked as a file would be (``ManifestError`` naming the key
    as the file spells it: ``provider.fixture``), and its relative paths are resolved
    against the current directory when it is built. Fields a kind does not take must
    keep their defaults.
    """

    kind: Literal["replay", "live", "record"]
    #: The fixture (replay, record); an absolute path once built.
    fixture: str | None = None
    #: ``"private"``: misses and exhaustions carry no hash (docs/privacy.md).
    data: Literal["normal", "private"] = "normal"
    #: The owner-only record of misses and exhaustions (replay, local backend).
    inspection: str | None = None
    #: Also record each hit in ``inspection`` (replay).
    inspection_served: bool = False
    #: The fixture's load bounds (replay, record).
    ceilings: Ceilings = DEFAULT_CEILINGS
    #: Seconds bounding the acquisition and every call (replay).
    timeout: float = 30.0
    #: Where the cursor actor runs (replay): ``"local"`` or ``"ray"``.
    backend: Literal["local", "ray"] = "local"
    #: The run log (any kind; docs/attribution.md).
    log: str | None = None
    #: The live adapter's table (live, record). Like ``ceilings``, it may be given as
    #: the table's mapping (how ``read_manifest`` hands it over): checked, then made one.
    live: AdapterTable | None = None
    #: Hosts whose requests ``run`` and ``serve`` refuse at once and count as
    #: ``ignored``, not as failures (any kind; docs/front-door.md, "Incidental
    #: traffic"): lower-case, as given.
    ignore: tuple[str, ...] = ()
    #: The instant COMMAND's wall clock starts at under ``run`` (any kind; RFC 3339,
    #: settled to UTC: ``"2026-01-01T00:00:00Z"``; docs/front-door.md, "The clock").
    #: A ``datetime`` with a zone is taken too.
    clock: str | None = None
    #: The request headers a tool's HTTP exchange hashes, in lower case (replay, record;
    #: docs/tools.md). Never a credential.
    http_headers: tuple[str, ...] = ("content-type",)

    def __post_init__(self) -> None:
        _check(self)

    @property
    def private(self) -> bool:
        """Whether the data is private (``data = "private"``)."""
        return self.data == "private"

    def replace(self, **changes: Any) -> Manifest:
        """A copy with ``changes``, checked as a new manifest is."""
        return Manifest(**{**msgspec.structs.asdict(self), **changes})

    def as_dict(self) -> dict[str, Any]:
        """The manifest as the mapping ``open_provider`` also takes: its paths absolute,
        keys at their defaults left out."""
        table: dict[str, Any] = {"kind": self.kind}
        if self.kind == "live" and self.live is not None:
            table.update(self.live.as_dict())
        for name, default in _DEFAULTS.items():
            value = getattr(self, name)
            if name in ("live", "ceilings") or _is_default(value, default):
                continue
            table[name] = list(value) if isinstance(value, tuple) else value
        if self.ceilings != DEFAULT_CEILINGS:
            table["ceilings"] = {
                name: value
                for name, value in self.ceilings.as_dict().items()
                if value != getattr(DEFAULT_CEILINGS, name)
            }
        if self.kind == "record" and self.live is not None:
            table["live"] = self.live.as_dict()
        return {"provider": table}


#: Each field's default, read from the class: the one place they are written.
_DEFAULTS: Final = {
    field.name: field.default
    for field in msgspec.structs.fields(Manifest)
    if field.default is not msgspec.NODEFAULT
}

#: What ``open_provider`` and the other readers take: a path, a mapping or a Manifest.
ManifestLike = str | os.PathLike[str] | Mapping[str, Any] | Manifest


def _is_default(value: Any, default: Any) -> bool:
    return type(value) is type(default) and bool(value == default)


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

    def file(self, name: str, base: str, *, required: bool) -> str | None:
        """A path key, resolved against ``base`` (``~`` expanded)."""
        value = self.string(name, required=required)
        if value is None:
            return None
        if not value:
            raise ManifestError(f"{self.key(name)} must not be empty", key=self.key(name))
        return _resolve(value, base)


def _resolve(value: str, base: str) -> str:
    return os.path.normpath(os.path.join(base, os.path.expanduser(value)))


# -- reading: the file (or mapping) once, into a Manifest -------------------------------------


def read_manifest(manifest: ManifestLike) -> Manifest:
    """The manifest checked, as a ``Manifest``: a TOML file path (read once), the same
    mapping, or a ``Manifest`` (returned as it is).

    Relative paths are resolved now: a file's against its folder, a mapping's against
    the current directory. Raises ``ManifestError`` naming the offending key.
    """
    if isinstance(manifest, Manifest):
        return manifest
    data, base = _load(manifest)
    for name in data:
        if name != "provider":
            raise ManifestError(f"unknown top-level key {name}", key=str(name))
    if "provider" not in data:
        raise ManifestError("the manifest has no [provider] table", key="provider")
    table = _Table(data["provider"], "provider")
    # Checked here, before the keys, as the grammar orders its messages; the Manifest
    # checks the rest.
    kind = table.choice("kind", KINDS)
    log = table.file("log", base, required=False)
    if kind == "live":
        # Every key but kind, log, ignore and clock belongs to the adapter table.
        own = ("kind", "log", *_EVERY_KIND)
        live = {k: v for k, v in table.values.items() if k not in own}
        rest = {k: table.values[k] for k in _EVERY_KIND if k in table.values}
        return Manifest(kind="live", log=log, live=live, **rest)  # type: ignore[arg-type]
    table.check_keys(_KEYS[kind], f'kind = "{kind}"')
    fields = dict(table.values)
    for name in _PATH_KEYS:
        value = fields.get(name)
        if isinstance(value, str) and value:  # a wrong one is the Manifest's to name
            fields[name] = _resolve(value, base)
    return Manifest(**fields)


def _load(manifest: Any) -> tuple[Mapping[str, Any], str]:
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


# -- checking: every rule of the grammar, in its order ----------------------------------------


def _check(manifest: Manifest) -> None:
    """Check a Manifest being built, and settle its values (absolute paths, a
    ``Ceilings``, an ``AdapterTable``, a float timeout)."""
    given = {
        name: getattr(manifest, name)
        for name, default in _DEFAULTS.items()
        if not _is_default(getattr(manifest, name), default)
    }
    table = _Table({"kind": manifest.kind, **given}, "provider")
    here = os.getcwd()
    kind = table.choice("kind", KINDS)
    settled: dict[str, Any] = {"log": table.file("log", here, required=False)}
    table.check_keys(_KEYS[kind], f'kind = "{kind}"')
    settled["ignore"] = _ignore(table)
    settled["clock"] = _clock(table)
    if kind == "live":
        settled["live"] = _adapter_table(table.values.get("live", {}), "provider")
    elif kind == "record":
        settled["fixture"] = table.file("fixture", here, required=True)
        table.choice("data", _DATA, default="normal")
        settled["ceilings"] = _ceilings(table)
        if "live" not in table.values:
            raise ManifestError("provider.live is required", key="provider.live")
        settled["live"] = _adapter_table(table.values["live"], "provider.live")
    else:
        settled.update(_replay(table, here))
    if kind != "live":
        settled["http_headers"] = _http_headers(table)
    for name, value in settled.items():
        force_setattr(manifest, name, value)


def _replay(table: _Table, here: str) -> dict[str, Any]:
    backend = table.choice("backend", BACKENDS, default="local")
    fixture = table.file("fixture", here, required=True)
    table.choice("data", _DATA, default="normal")
    inspection = table.file("inspection", here, required=False)
    if backend == "ray" and inspection is not None:
        # The record would be written on whichever node runs the cursor actor.
        raise ManifestError(
            'provider.inspection is not available with backend = "ray" (use inspect())',
            key="provider.inspection",
        )
    ceilings = _ceilings(table)
    timeout = table.values.get("timeout", _DEFAULTS["timeout"])
    if type(timeout) not in (int, float) or not 0 < timeout < math.inf:
        raise ManifestError(
            "provider.timeout must be a positive number of seconds", key="provider.timeout"
        )
    served = table.values.get("inspection_served", False)
    if type(served) is not bool or (served and inspection is None):
        raise ManifestError(
            "provider.inspection_served must be true or false, and true needs provider.inspection",
            key="provider.inspection_served",
        )
    return {
        "fixture": fixture,
        "inspection": inspection,
        "ceilings": ceilings,
        "timeout": float(timeout),
    }


def _ignore(table: _Table) -> tuple[str, ...]:
    """``provider.ignore``: host names, lower-case (docs/manifest.md)."""
    given = table.values.get("ignore", ())
    key = table.key("ignore")
    if not isinstance(given, list | tuple):
        raise ManifestError(
            f"{key} must be a list of host names, not {toml_type_name(given)}", key=key
        )
    hosts = []
    for index, entry in enumerate(given):
        if type(entry) is not str:
            raise ManifestError(
                f"{key}[{index}] must be a string, not {toml_type_name(entry)}", key=key
            )
        host = entry.strip().lower().removesuffix(".")
        if not _IGNORED_HOST.match(host):
            raise ManifestError(
                f'{key}[{index}] must be a host name ("r.promptfoo.app", '
                '"*.huggingface.co", "host:8080"), not a URL or a pattern of another form',
                key=key,
            )
        hosts.append(host)
    return tuple(hosts)


def _clock(table: _Table) -> str | None:
    """``provider.clock``: an RFC 3339 instant, settled to UTC (docs/manifest.md)."""
    given = table.values.get("clock")
    if given is None:
        return None
    key = table.key("clock")
    instant: datetime.datetime | None = None
    if type(given) is str and _RFC3339.match(given):
        # fromisoformat (3.11) takes RFC 3339 once the zone is spelled +00:00 and the
        # fraction has at most microseconds.
        text = re.sub(r"(\.[0-9]{6})[0-9]+", r"\1", given.upper().replace("Z", "+00:00"))
        try:
            instant = datetime.datetime.fromisoformat(text)
        except ValueError:
            instant = None  # a month 13, a 25th hour: named below
    elif type(given) is datetime.datetime and given.tzinfo is not None:
        instant = given  # a TOML offset date-time, unquoted
    if instant is None or instant < _EPOCH:
        raise ManifestError(
            f"{key} must be an RFC 3339 date-time with a zone, from 1970 on "
            '("2026-01-01T00:00:00Z", "2026-01-01T09:00:00+09:00")',
            key=key,
        )
    return instant.astimezone(datetime.UTC).isoformat().replace("+00:00", "Z")


def _http_headers(table: _Table) -> tuple[str, ...]:
    """``provider.http_headers``: header names, in lower case, none a credential."""
    from .._http_kind import is_credential_header

    key = table.key("http_headers")
    given = table.values.get("http_headers", _DEFAULTS["http_headers"])
    if not isinstance(given, list | tuple) or not all(type(n) is str and n for n in given):
        raise ManifestError(f"{key} must be a list of header names", key=key)
    names = tuple(dict.fromkeys(name.strip().lower() for name in given))
    for name in names:
        if not name or any(c.isspace() or c == ":" or not c.isprintable() for c in name):
            raise ManifestError(f"{key} must be a list of header names", key=key)
        if is_credential_header(name):
            raise ManifestError(
                f"{key} names a credential header; credentials are never hashed or recorded",
                key=key,
            )
    return names


def _ceilings(table: _Table) -> Ceilings:
    given = table.values.get("ceilings", DEFAULT_CEILINGS)
    if isinstance(given, Ceilings):
        return given  # checked when it was built
    ceilings = _Table(given, table.key("ceilings"))
    ceilings.check_keys(frozenset(Ceilings.__struct_fields__), "ceilings")
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
        return Ceilings(**overrides)
    except ValueError as exc:
        problem = str(exc)
    bad = next((n for n in overrides if f"Ceilings.{n} " in problem), None)
    key = ceilings.key(bad) if bad else ceilings.path
    raise ManifestError(f"{key}: {problem.removeprefix(f'Ceilings.{bad} ')}", key=key)


def _adapter_table(given: Any, path: str) -> AdapterTable:
    """The adapter table at ``path``: its ``adapter`` and ``model`` checked, the rest
    left to the adapter."""
    if isinstance(given, AdapterTable):
        if not isinstance(given.options, Mapping):
            raise ManifestError(
                f"{path} options must be a table, not {toml_type_name(given.options)}", key=path
            )
        for name in ("adapter", "model"):
            if name in given.options:
                raise ManifestError(
                    f"{path}.{name} is AdapterTable.{name}, not one of its options",
                    key=f"{path}.{name}",
                )
        given = given.as_dict()
    table = _Table(given, path)
    adapter = table.string("adapter", required=True)
    model = table.string("model", required=True)
    options = {k: v for k, v in table.values.items() if k not in ("adapter", "model")}
    return AdapterTable(adapter=adapter, model=model, options=options)
