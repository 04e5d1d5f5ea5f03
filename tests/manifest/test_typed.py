"""The manifest's typed form (docs/manifest.md, "The typed form"): ``read_manifest``
reads a file once into a checked ``Manifest``, a ``Manifest`` built in code is checked by
the same rules with the same words, and ``run`` and ``serve`` read the file exactly once:
a manifest replaced after that reading changes nothing."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx2
import pytest

import replay_actor
from replay_actor import (
    AdapterTable,
    Ceilings,
    Manifest,
    ManifestError,
    entry_line,
    open_provider,
    read_manifest,
    request_hash,
)
from tests.support.paths import ROOT

SECRET = "sk-live-DO-NOT-PRINT-5e1d"
EXAMPLES = ROOT / "examples" / "manifests"


def hi(text: str = "hi") -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def _fixture(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(entry_line(request_hash(hi()), response={"content": "frozen"}) + b"\n")
    return path


def _write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


# -- reading: one value, paths resolved, defaults stated once ----------------------------------


def test_read_manifest_resolves_paths_and_states_the_defaults(tmp_path: Path) -> None:
    folder = tmp_path / "suite"
    folder.mkdir()
    manifest = _write(
        folder / "m.toml",
        """
        [provider]
        kind = "replay"
        fixture = "fixtures/../base.jsonl"
        inspection = "state/misses.jsonl"
        timeout = 20
        [provider.ceilings]
        max_entries = 10
        """,
    )
    read = read_manifest(manifest)
    assert read == Manifest(
        kind="replay",
        fixture=str(folder / "base.jsonl"),
        inspection=str(folder / "state" / "misses.jsonl"),
        timeout=20.0,
        ceilings=Ceilings(max_entries=10),
    )
    assert type(read.timeout) is float
    assert (read.data, read.private, read.backend, read.inspection_served) == (
        "normal",
        False,
        "local",
        False,
    )
    assert (read.log, read.live) == (None, None)
    assert read_manifest(read) is read
    # The mapping form says only what differs from the defaults.
    assert read.as_dict() == {
        "provider": {
            "kind": "replay",
            "fixture": str(folder / "base.jsonl"),
            "inspection": str(folder / "state" / "misses.jsonl"),
            "timeout": 20.0,
            "ceilings": {"max_entries": 10},
        }
    }


def test_the_adapter_table_is_held_whole(tmp_path: Path) -> None:
    live = read_manifest(
        {
            "provider": {
                "kind": "live",
                "adapter": "openai",
                "model": "m",
                "api_key_env": "KEY_VAR",
                "headers": {"X-A": "b"},
                "log": "run.log",
            }
        }
    )
    assert live.live == AdapterTable(
        adapter="openai", model="m", options={"api_key_env": "KEY_VAR", "headers": {"X-A": "b"}}
    )
    assert live.live.config() == {"model": "m", "api_key_env": "KEY_VAR", "headers": {"X-A": "b"}}
    assert live.log == os.path.join(os.getcwd(), "run.log")
    record = read_manifest(
        {
            "provider": {
                "kind": "record",
                "fixture": str(tmp_path / "r.jsonl"),
                "data": "private",
                "live": {"adapter": "anthropic", "model": "c", "timeout": 5},
            }
        }
    )
    assert record.private
    assert record.live == AdapterTable(adapter="anthropic", model="c", options={"timeout": 5})
    assert record.timeout == 30.0  # the replay kind's; the adapter has its own


def test_every_example_round_trips_through_its_mapping_form() -> None:
    for example in sorted(EXAMPLES.glob("*.toml")):
        read = read_manifest(example)
        assert read_manifest(read.as_dict()) == read, example.name
        assert pickle.loads(pickle.dumps(read)) == read, example.name


def test_a_mapping_is_resolved_when_read_not_when_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_leaks: None
) -> None:
    _fixture(tmp_path / "here" / "fixtures" / "base.jsonl")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    read = read_manifest({"provider": {"kind": "replay", "fixture": "fixtures/base.jsonl"}})
    built = Manifest(kind="replay", fixture="fixtures/base.jsonl")
    monkeypatch.chdir(tmp_path / "elsewhere")
    for manifest in (read, built):
        with open_provider(manifest) as llm:
            assert llm.complete(hi())["content"] == "frozen"


def test_open_provider_uses_the_manifest_it_was_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_leaks: None
) -> None:
    _fixture(tmp_path / "f.jsonl")
    path = _write(tmp_path / "m.toml", '[provider]\nkind = "replay"\nfixture = "f.jsonl"\n')
    read = read_manifest(path)
    # The file now says something else (or nothing): the value read is what opens.
    path.write_text('[provider]\nkind = "live"\nadapter = "openai"\nmodel = "m"\n')
    with open_provider(read) as llm:
        assert llm.snapshot()["kind"] == "replay"
    path.unlink()
    with open_provider(read) as llm:
        assert llm.complete(hi())["content"] == "frozen"


def test_replace_is_checked_as_a_new_manifest(tmp_path: Path) -> None:
    read = Manifest(kind="replay", fixture=str(tmp_path / "f.jsonl"))
    other = read.replace(fixture=str(tmp_path / "g.jsonl"), data="private")
    assert (other.fixture, other.private) == (str(tmp_path / "g.jsonl"), True)
    with pytest.raises(ManifestError) as caught:
        read.replace(kind="record")
    assert caught.value.key == "provider.live"


def test_manifest_and_read_manifest_are_exported() -> None:
    for name in ("Manifest", "AdapterTable", "read_manifest"):
        assert name in replay_actor.__all__
    from replay_actor.manifest import read_manifest as from_the_package

    assert from_the_package is read_manifest


# -- built in code: the same rules, the same words ---------------------------------------------

OPENAI = AdapterTable(adapter="openai", model="m")

#: (case, the Manifest's keyword arguments, the offending key). Each is also written as
#: the mapping a file would hold; both must fail with the same message and key.
TYPED_BAD: list[tuple[str, dict[str, Any], str]] = [
    ("kind unknown", {"kind": "cache"}, "provider.kind"),
    ("kind wrong type", {"kind": 1}, "provider.kind"),
    ("replay: fixture missing", {"kind": "replay"}, "provider.fixture"),
    ("replay: fixture empty", {"kind": "replay", "fixture": ""}, "provider.fixture"),
    ("replay: fixture wrong type", {"kind": "replay", "fixture": 3}, "provider.fixture"),
    ("replay: data value", {"kind": "replay", "fixture": "f", "data": SECRET}, "provider.data"),
    ("replay: data type", {"kind": "replay", "fixture": "f", "data": True}, "provider.data"),
    (
        "replay: inspection type",
        {"kind": "replay", "fixture": "f", "inspection": 1},
        "provider.inspection",
    ),
    ("replay: backend", {"kind": "replay", "fixture": "f", "backend": "dask"}, "provider.backend"),
    (
        "replay: inspection on ray",
        {"kind": "replay", "fixture": "f", "backend": "ray", "inspection": "i"},
        "provider.inspection",
    ),
    ("replay: timeout zero", {"kind": "replay", "fixture": "f", "timeout": 0}, "provider.timeout"),
    (
        "replay: timeout bool",
        {"kind": "replay", "fixture": "f", "timeout": True},
        "provider.timeout",
    ),
    (
        "replay: timeout text",
        {"kind": "replay", "fixture": "f", "timeout": SECRET},
        "provider.timeout",
    ),
    (
        "replay: served without inspection",
        {"kind": "replay", "fixture": "f", "inspection_served": True},
        "provider.inspection_served",
    ),
    (
        "replay: served not a boolean",
        {"kind": "replay", "fixture": "f", "inspection": "i", "inspection_served": "yes"},
        "provider.inspection_served",
    ),
    ("replay: log type", {"kind": "replay", "fixture": "f", "log": 5}, "provider.log"),
    ("replay: log empty", {"kind": "replay", "fixture": "f", "log": ""}, "provider.log"),
    ("replay: a live table", {"kind": "replay", "fixture": "f", "live": OPENAI}, "provider.live"),
    ("record: live missing", {"kind": "record", "fixture": "f"}, "provider.live"),
    (
        "record: live not a table",
        {"kind": "record", "fixture": "f", "live": "openai"},
        "provider.live",
    ),
    (
        "record: inspection",
        {"kind": "record", "fixture": "f", "live": OPENAI, "inspection": "i"},
        "provider.inspection",
    ),
    (
        "record: backend",
        {"kind": "record", "fixture": "f", "live": OPENAI, "backend": "ray"},
        "provider.backend",
    ),
    (
        "record: model wrong type",
        {"kind": "record", "fixture": "f", "live": AdapterTable(adapter="openai", model=4)},  # type: ignore[arg-type]
        "provider.live.model",
    ),
    ("live: no table", {"kind": "live"}, "provider.adapter"),
    (
        "live: adapter wrong type",
        {"kind": "live", "live": AdapterTable(adapter=SECRET.encode(), model="m")},  # type: ignore[arg-type]
        "provider.adapter",
    ),
]


def _as_mapping(fields: dict[str, Any]) -> dict[str, Any]:
    """The mapping a file would hold for these fields."""
    table = {k: v for k, v in fields.items() if k != "live"}
    live = fields.get("live")
    if isinstance(live, AdapterTable):
        live = {"adapter": live.adapter, "model": live.model, **live.options}
    if fields.get("kind") == "live":
        table.update(live or {})
    elif "live" in fields:
        table["live"] = live
    return {"provider": table}


@pytest.mark.parametrize(
    ("fields", "key"), [c[1:] for c in TYPED_BAD], ids=[c[0] for c in TYPED_BAD]
)
def test_a_manifest_built_in_code_is_checked_as_a_file_is(
    fields: dict[str, Any], key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ManifestError) as typed:
        Manifest(**fields)
    with pytest.raises(ManifestError) as mapped:
        read_manifest(_as_mapping(fields))
    assert (str(typed.value), typed.value.key) == (str(mapped.value), mapped.value.key)
    assert typed.value.key == key
    # Values are never echoed, whichever the form.
    assert SECRET not in str(typed.value) and SECRET not in repr(typed.value.args)
    assert typed.value.__context__ is None


def test_fields_a_kind_does_not_take_are_named(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as caught:
        Manifest(kind="live", live=OPENAI, fixture=str(tmp_path / "f.jsonl"))
    assert (str(caught.value), caught.value.key) == (
        'unknown key provider.fixture for kind = "live"',
        "provider.fixture",
    )
    with pytest.raises(ManifestError) as caught:
        Manifest(
            kind="live", live=AdapterTable(adapter="openai", model="m", options={"model": "n"})
        )
    assert caught.value.key == "provider.model"


def test_the_adapter_checks_its_own_keys_when_opened() -> None:
    # Read: adapter and model are the manifest's; base_url is the adapter's, checked
    # when open_provider builds it, with the key named in full.
    read = read_manifest(
        {
            "provider": {
                "kind": "record",
                "fixture": "f.jsonl",
                "live": {"adapter": "openai", "model": "m", "base_url": 8000},
            }
        }
    )
    with pytest.raises(ManifestError) as caught:
        open_provider(read)
    assert caught.value.key == "provider.live.base_url"


# -- run and serve read the file once ----------------------------------------------------------

#: Runs the CLI with an audit hook that counts the openings of the manifest and, once
#: the first reading is done, replaces the file with a live manifest: anything that read
#: it again would see another kind (no seal, no fixture, no miss reporter).
_ONCE = textwrap.dedent(
    """
    import atexit, os, sys
    manifest, swap, *argv = sys.argv[1:]
    state = {"opens": 0, "swapped": False}

    def hook(event, args):
        if event == "open" and isinstance(args[0], str) and os.path.abspath(args[0]) == manifest:
            state["opens"] += 1
        elif state["opens"] and not state["swapped"]:
            state["swapped"] = True
            os.replace(swap, manifest)

    sys.addaudithook(hook)
    atexit.register(lambda: print(f"manifest opens: {state['opens']}", file=sys.stderr))
    from replay_actor.cli import main
    status = main(argv)
    assert state["swapped"]
    sys.exit(status)
    """
)


def _once_cli(tmp_path: Path, *argv: str) -> list[str]:
    """The command line of ``replay-actor ARGV`` under the counting hook, for a replay
    manifest whose fixture answers ``hi``."""
    _fixture(tmp_path / "f.jsonl")
    manifest = _write(tmp_path / "m.toml", '[provider]\nkind = "replay"\nfixture = "f.jsonl"\n')
    swap = _write(
        tmp_path / "swap.toml",
        '[provider]\nkind = "live"\nadapter = "openai"\nmodel = "m"\nbase_url = "http://127.0.0.1:9"\n',
    )
    return [
        sys.executable,
        "-c",
        _ONCE,
        str(manifest),
        str(swap),
        argv[0],
        str(manifest),
        *argv[1:],
    ]


@pytest.mark.timeout(120)
def test_run_reads_the_manifest_once(tmp_path: Path, no_leaks: None) -> None:
    command = _once_cli(tmp_path, "run", "--", sys.executable, "-c", "pass")
    done = subprocess.run(command, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stderr
    assert "manifest opens: 1" in done.stderr
    # The seal and the summary come from the one reading: a replay manifest's.
    summary = [line for line in done.stderr.splitlines() if "served," in line][-1]
    assert "fixture sha256:" in summary and "; sealed (" in summary, summary
    assert '[provider]\nkind = "live"' in (tmp_path / "m.toml").read_text()


@pytest.mark.timeout(120)
def test_serve_reads_the_manifest_once(tmp_path: Path, no_leaks: None) -> None:
    proc = subprocess.Popen(
        _once_cli(tmp_path, "serve"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        answer = httpx2.post(
            f"{ready['openai_base_url']}/chat/completions",
            headers={"Authorization": f"Bearer {ready['token']}"},
            json={"model": "m", "messages": [{"role": "user", "content": "not recorded"}]},
            timeout=30,
        )
        assert answer.status_code == 422  # a miss (docs/sdk.md, "Failures")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert "manifest opens: 1" in stderr
    # The miss reporter is the replay manifest's: the miss is said, with its fix.
    assert "replay-actor: miss: no replay fixture matches this request" in stderr
    assert "fix:  replay-actor add" in stderr
