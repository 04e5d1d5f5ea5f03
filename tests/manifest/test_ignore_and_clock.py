"""``provider.ignore`` and ``provider.clock`` (docs/manifest.md): keys of every kind,
stated once with their defaults, checked with the key named and the value never echoed,
settled (host names lower-case, the instant in UTC) and written back by ``as_dict``."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest

from replay_actor import Manifest, ManifestError, read_manifest

SECRET = "sk-live-DO-NOT-PRINT-77c1"
LIVE = {"adapter": "openai", "model": "gpt-live"}


def _read(**keys: Any) -> Manifest:
    return read_manifest({"provider": {"kind": "replay", "fixture": "f.jsonl", **keys}})


def test_the_defaults_and_every_kind_takes_both_keys(tmp_path: Path) -> None:
    plain = _read()
    assert plain.ignore == () and plain.clock is None
    assert "ignore" not in plain.as_dict()["provider"]
    keys = {"ignore": ["r.promptfoo.app"], "clock": "2026-01-01T00:00:00Z"}
    record = read_manifest(
        {"provider": {"kind": "record", "fixture": "f.jsonl", "live": LIVE, **keys}}
    )
    live = read_manifest({"provider": {"kind": "live", **LIVE, **keys}})
    for manifest in (_read(**keys), record, live):
        assert manifest.ignore == ("r.promptfoo.app",)
        assert manifest.clock == "2026-01-01T00:00:00Z"
    # A live manifest's other keys are its adapter's: these two are not.
    assert live.live is not None and live.live.options == {}
    # From a file, unquoted TOML date-times included.
    path = tmp_path / "m.toml"
    path.write_text(
        '[provider]\nkind = "replay"\nfixture = "f.jsonl"\n'
        'ignore = ["R.Promptfoo.App.", "*.huggingface.co", "127.0.0.2:8080", "[::1]"]\n'
        "clock = 2026-01-01T09:00:00+09:00\n"
    )
    read = read_manifest(path)
    assert read.ignore == ("r.promptfoo.app", "*.huggingface.co", "127.0.0.2:8080", "[::1]")
    assert read.clock == "2026-01-01T00:00:00Z"
    assert read_manifest(read.as_dict()) == read


@pytest.mark.parametrize(
    ("given", "settled"),
    [
        ("2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z"),
        ("2026-01-01t00:00:00z", "2026-01-01T00:00:00Z"),
        ("2026-01-01 12:30:00-02:00", "2026-01-01T14:30:00Z"),
        ("2026-01-01T00:00:00.5Z", "2026-01-01T00:00:00.500000Z"),
        ("2026-01-01T00:00:00.123456789Z", "2026-01-01T00:00:00.123456Z"),
        (datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC), "2026-01-01T00:00:00Z"),
    ],
)
def test_a_clock_is_settled_to_utc(given: Any, settled: str) -> None:
    assert _read(clock=given).clock == settled
    assert Manifest(kind="replay", fixture="f.jsonl", clock=given).clock == settled


@pytest.mark.parametrize(
    "given",
    [
        "2026-01-01",  # a date alone
        "2026-01-01T00:00:00",  # no zone
        "2026-01-01T00:00Z",  # no seconds
        "2026-13-01T00:00:00Z",  # no such month
        "1969-12-31T23:59:59Z",  # before the epoch
        f"{SECRET}",
        20260101,
        datetime.date(2026, 1, 1),
        datetime.datetime(2026, 1, 1),  # a local date-time: no zone
    ],
)
def test_a_bad_clock_names_the_key_never_the_value(given: Any) -> None:
    with pytest.raises(ManifestError) as caught:
        _read(clock=given)
    assert caught.value.key == "provider.clock"
    assert str(caught.value).startswith("provider.clock must be an RFC 3339 date-time")
    assert SECRET not in str(caught.value)
    with pytest.raises(ManifestError, match=r"^provider\.clock "):
        Manifest(kind="replay", fixture="f.jsonl", clock=given)


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("r.promptfoo.app", "provider.ignore must be a list of host names, not string"),
        ([3], "provider.ignore[0] must be a string, not integer"),
        (["ok.example", "https://r.promptfoo.app/"], "provider.ignore[1] must be a host name"),
        (["example.com/path"], "provider.ignore[0] must be a host name"),
        (["*"], "provider.ignore[0] must be a host name"),
        (["a.*.example"], "provider.ignore[0] must be a host name"),
        ([""], "provider.ignore[0] must be a host name"),
        ([f"{SECRET} x"], "provider.ignore[0] must be a host name"),
    ],
)
def test_a_bad_ignore_names_the_key_never_the_value(given: Any, message: str) -> None:
    with pytest.raises(ManifestError) as caught:
        _read(ignore=given)
    assert caught.value.key == "provider.ignore"
    assert str(caught.value).startswith(message)
    assert SECRET not in str(caught.value)
