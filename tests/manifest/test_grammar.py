"""The manifest grammar: every bad manifest names its key; paths resolve; every kind opens.

The replay kind spawns a cursor actor, so those tests assert that no process outlives them.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest

import replay_actor
from replay_actor import ManifestError, ReplayMiss, entry_line, open_provider, request_hash
from replay_actor.adapters.live import LiveProvider
from tests.support.paths import ROOT

SECRET_KEY = "sk-live-DO-NOT-PRINT-91b7"


def hi(text: str = "hi") -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


LIVE: dict[str, Any] = {"kind": "live", "adapter": "openai", "model": "m"}
REPLAY: dict[str, Any] = {"kind": "replay", "fixture": "f.jsonl"}
RECORD: dict[str, Any] = {
    "kind": "record",
    "fixture": "f.jsonl",
    "live": {"adapter": "openai", "model": "m"},
}


def _with(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = {**base, **changes}
    return {"provider": {k: v for k, v in out.items() if v is not DROP}}


DROP: Any = object()

BAD: list[tuple[str, Any, str | None]] = [
    # (case, manifest, key)
    ("no provider", {}, "provider"),
    ("unknown top-level key", {"provider": LIVE, "extra": 1}, "extra"),
    ("provider not a table", {"provider": "live"}, "provider"),
    ("kind missing", _with(LIVE, kind=DROP), "provider.kind"),
    ("kind unknown", _with(LIVE, kind="cache"), "provider.kind"),
    ("kind wrong type", _with(LIVE, kind=1), "provider.kind"),
    ("live: adapter missing", _with(LIVE, adapter=DROP), "provider.adapter"),
    ("live: adapter unknown", _with(LIVE, adapter="vertex"), "provider.adapter"),
    ("live: adapter wrong type", _with(LIVE, adapter=["openai"]), "provider.adapter"),
    ("live: model missing", _with(LIVE, model=DROP), "provider.model"),
    ("live: model wrong type", _with(LIVE, model=4), "provider.model"),
    ("live: unknown key", _with(LIVE, fixture="f.jsonl"), "provider.fixture"),
    ("live: base_url wrong type", _with(LIVE, base_url=8000), "provider.base_url"),
    ("live: base_url scheme", _with(LIVE, base_url="ftp://x"), "provider.base_url"),
    ("live: timeout wrong type", _with(LIVE, timeout="fast"), "provider.timeout"),
    ("live: timeout zero", _with(LIVE, timeout=0), "provider.timeout"),
    ("live: timeout bool", _with(LIVE, timeout=True), "provider.timeout"),
    ("live: connect_timeout", _with(LIVE, connect_timeout=-1.0), "provider.connect_timeout"),
    ("live: max_retries float", _with(LIVE, max_retries=2.0), "provider.max_retries"),
    ("live: max_retries bool", _with(LIVE, max_retries=True), "provider.max_retries"),
    ("live: max_retries huge", _with(LIVE, max_retries=1000), "provider.max_retries"),
    ("live: retry_backoff", _with(LIVE, retry_backoff=-0.5), "provider.retry_backoff"),
    ("live: retry_max_wait", _with(LIVE, retry_max_wait="1m"), "provider.retry_max_wait"),
    ("live: headers wrong type", _with(LIVE, headers="x"), "provider.headers"),
    ("live: header value", _with(LIVE, headers={"X-A": 1}), "provider.headers.X-A"),
    ("live: api_key_env type", _with(LIVE, api_key_env=1), "provider.api_key_env"),
    ("replay: fixture missing", _with(REPLAY, fixture=DROP), "provider.fixture"),
    ("replay: fixture wrong type", _with(REPLAY, fixture=3), "provider.fixture"),
    ("replay: fixture empty", _with(REPLAY, fixture=""), "provider.fixture"),
    ("replay: unknown key", _with(REPLAY, model="m"), "provider.model"),
    ("replay: data value", _with(REPLAY, data="secret"), "provider.data"),
    ("replay: data type", _with(REPLAY, data=True), "provider.data"),
    ("replay: inspection type", _with(REPLAY, inspection=1), "provider.inspection"),
    ("replay: timeout", _with(REPLAY, timeout=-1), "provider.timeout"),
    ("replay: backend unknown", _with(REPLAY, backend="dask"), "provider.backend"),
    ("replay: backend type", _with(REPLAY, backend=True), "provider.backend"),
    (
        "replay: inspection on ray",
        _with(REPLAY, backend="ray", inspection="x.jsonl"),
        "provider.inspection",
    ),
    ("record: backend", _with(RECORD, backend="ray"), "provider.backend"),
    ("replay: ceilings type", _with(REPLAY, ceilings=5), "provider.ceilings"),
    (
        "replay: ceilings unknown",
        _with(REPLAY, ceilings={"max_lines": 5}),
        "provider.ceilings.max_lines",
    ),
    (
        "replay: ceilings type of value",
        _with(REPLAY, ceilings={"max_entries": "10"}),
        "provider.ceilings.max_entries",
    ),
    (
        "replay: ceilings bool",
        _with(REPLAY, ceilings={"max_depth": True}),
        "provider.ceilings.max_depth",
    ),
    (
        "replay: ceilings zero",
        _with(REPLAY, ceilings={"max_entries": 0}),
        "provider.ceilings.max_entries",
    ),
    (
        "replay: sequence cap",
        _with(REPLAY, ceilings={"max_sequence_length": 2048}),
        "provider.ceilings.max_sequence_length",
    ),
    ("record: fixture missing", _with(RECORD, fixture=DROP), "provider.fixture"),
    ("record: live missing", _with(RECORD, live=DROP), "provider.live"),
    ("record: live wrong type", _with(RECORD, live="openai"), "provider.live"),
    ("record: live adapter", _with(RECORD, live={"model": "m"}), "provider.live.adapter"),
    ("record: live model", _with(RECORD, live={"adapter": "openai"}), "provider.live.model"),
    (
        "record: live unknown key",
        _with(RECORD, live={"adapter": "openai", "model": "m", "kind": "live"}),
        "provider.live.kind",
    ),
    ("record: unknown key", _with(RECORD, inspection="x"), "provider.inspection"),
    ("record: data value", _with(RECORD, data="public"), "provider.data"),
]


@pytest.mark.parametrize(("manifest", "key"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_manifest_names_its_key(
    manifest: dict[str, Any], key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ManifestError) as caught:
        open_provider(manifest)
    assert caught.value.key == key
    assert key in str(caught.value)
    assert caught.value.__context__ is None or isinstance(caught.value.__context__, ManifestError)


def test_toml_syntax_error_names_its_line(tmp_path: Path) -> None:
    path = write(
        tmp_path / "m.toml",
        """\
        [provider]
        kind = "live"
        model = "m" "secret-looking tail"
        """,
    )
    with pytest.raises(ManifestError, match="not valid TOML at line 3") as caught:
        open_provider(path)
    assert "secret-looking" not in str(caught.value)
    assert caught.value.__context__ is None


def test_toml_with_the_same_problems_as_a_mapping(tmp_path: Path) -> None:
    path = write(
        tmp_path / "m.toml",
        """
        [provider]
        kind = "replay"
        fixture = "f.jsonl"
        [provider.ceilings]
        max_entries = "many"
        """,
    )
    with pytest.raises(ManifestError) as caught:
        open_provider(path)
    assert caught.value.key == "provider.ceilings.max_entries"


def test_missing_manifest_file(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="does not exist"):
        open_provider(tmp_path / "nope.toml")


def test_not_a_manifest() -> None:
    with pytest.raises(ManifestError, match="TOML file path or a mapping"):
        open_provider(42)  # type: ignore[arg-type]


def test_unset_api_key_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REPLAY_ACTOR_UNSET_KEY", raising=False)
    manifest = _with(LIVE, api_key_env="REPLAY_ACTOR_UNSET_KEY")
    with pytest.raises(ManifestError, match="REPLAY_ACTOR_UNSET_KEY") as caught:
        open_provider(manifest)
    assert caught.value.key == "provider.api_key_env"
    # An empty value is as good as unset.
    monkeypatch.setenv("REPLAY_ACTOR_UNSET_KEY", "")
    with pytest.raises(ManifestError, match="is not set"):
        open_provider(manifest)


def test_a_key_pasted_into_api_key_env_is_not_echoed() -> None:
    with pytest.raises(ManifestError) as caught:
        open_provider(_with(LIVE, api_key_env=SECRET_KEY))
    assert caught.value.key == "provider.api_key_env"
    assert SECRET_KEY not in str(caught.value)
    assert SECRET_KEY not in repr(caught.value.args)


def test_record_kind_names_nested_keys_in_its_live_table() -> None:
    manifest = _with(RECORD, live={"adapter": "openai", "model": "m", "timeout": "x"})
    with pytest.raises(ManifestError) as caught:
        open_provider(manifest)
    assert caught.value.key == "provider.live.timeout"
    assert str(caught.value).startswith("provider.live.timeout ")


def test_manifest_error_pickles() -> None:
    import pickle

    with pytest.raises(ManifestError) as caught:
        open_provider(_with(LIVE, model=DROP))
    again = pickle.loads(pickle.dumps(caught.value))
    assert (str(again), again.key) == (str(caught.value), caught.value.key)


# -- every kind opens, with the same interface -----------------------------------------------


def _fixture(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(entry_line(request_hash(hi()), response={"content": "frozen"}) + b"\n")
    return path


def test_relative_paths_resolve_against_the_manifest_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_leaks: None
) -> None:
    _fixture(tmp_path / "suite" / "fixtures" / "base.jsonl")
    manifest = write(
        tmp_path / "suite" / "replay.toml",
        """
        [provider]
        kind = "replay"
        fixture = "fixtures/base.jsonl"
        """,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    with open_provider(str(manifest)) as llm:
        assert llm.complete(hi())["content"] == "frozen"
        assert llm.snapshot()["entries"] == 1


def test_mapping_paths_resolve_against_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_leaks: None
) -> None:
    _fixture(tmp_path / "fixtures" / "base.jsonl")
    monkeypatch.chdir(tmp_path)
    manifest = {"provider": {"kind": "replay", "fixture": "fixtures/base.jsonl"}}
    with open_provider(manifest) as llm:
        assert asyncio.run(llm.acomplete(hi()))["content"] == "frozen"


def test_replay_kind_honours_data_inspection_ceilings_and_timeout(
    tmp_path: Path, no_leaks: None
) -> None:
    _fixture(tmp_path / "f.jsonl")
    manifest = write(
        tmp_path / "m.toml",
        """
        [provider]
        kind = "replay"
        fixture = "f.jsonl"
        data = "private"
        inspection = "state/misses.jsonl"
        timeout = 20
        [provider.ceilings]
        max_entries = 10
        max_depth = 32
        """,
    )
    (tmp_path / "state").mkdir()
    with open_provider(manifest) as llm:
        with pytest.raises(ReplayMiss) as caught:
            llm.complete(hi("unknown"))
        snap = llm.snapshot()
    assert caught.value.request_hash is None
    assert "sha256" not in str(caught.value)
    assert snap["ceilings"]["max_entries"] == 10
    assert snap["ceilings"]["max_depth"] == 32
    assert llm.closed
    [record] = (tmp_path / "state" / "misses.jsonl").read_text().splitlines()
    assert json.loads(record) == {
        "event": "miss",
        "request_hash": request_hash(hi("unknown")),
        "call": 1,
    }


def test_every_kind_has_the_same_interface(tmp_path: Path, no_leaks: None) -> None:
    _fixture(tmp_path / "f.jsonl")
    providers = [
        open_provider({"provider": {**REPLAY, "fixture": str(tmp_path / "f.jsonl")}}),
        open_provider({"provider": LIVE}),
        open_provider({"provider": {**RECORD, "fixture": str(tmp_path / "r.jsonl")}}),
    ]
    kinds = []
    for provider in providers:
        with provider as same:
            assert same is provider
            assert not provider.closed
            kinds.append(provider.snapshot()["kind"])
            for name in ("complete", "acomplete", "complete_many", "snapshot", "release"):
                assert callable(getattr(provider, name))
        assert provider.closed
        provider.release()
    assert kinds == ["replay", "live", "record"]
    assert isinstance(providers[1], LiveProvider)


def test_open_provider_is_exported() -> None:
    assert replay_actor.open_provider is open_provider
    assert "open_provider" in replay_actor.__all__


EXAMPLES = ROOT / "examples" / "manifests"


def test_example_manifests_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_leaks: None
) -> None:
    """Every shipped example opens as written (record ones in a copy, to write nowhere)."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    kinds = {}
    inspection = EXAMPLES / "misses.jsonl"
    had_inspection = inspection.exists()
    for example in sorted(EXAMPLES.glob("*.toml")):
        path = Path(shutil.copy(example, tmp_path)) if "record" in example.name else example
        with open_provider(path) as llm:
            kinds[path.name] = llm.snapshot()["kind"]
    assert kinds == {
        "live.toml": "live",
        "record.toml": "record",
        "replay-private.toml": "replay",
        "replay.toml": "replay",
    }
    assert not (EXAMPLES / "new.jsonl").exists()
    if not had_inspection:
        inspection.unlink(missing_ok=True)
