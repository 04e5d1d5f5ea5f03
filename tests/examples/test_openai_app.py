"""The unchanged openai-SDK example application: it replays from its bundled fixture,
the fixture is derived from the app itself, and every manifest of the example loads."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from replay_actor import open_provider
from tests.support.paths import ROOT

APP = ROOT / "examples" / "openai_app"

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(120)]


def test_the_app_replays_from_the_repository_root() -> None:
    done = subprocess.run(
        [sys.executable, "examples/openai_app/app.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "city:     Porto: port cellars, river views and a walkable old town.",
        "food:     Try a francesinha, Porto's famous layered sandwich.",
        "postcard: Greetings from Porto, full of bridges, tiles and port wine!",
    ]


def test_the_fixture_is_what_the_app_asks() -> None:
    spec = importlib.util.spec_from_file_location("make_fixture", APP / "make_fixture.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.build() == (APP / "fixture.jsonl").read_bytes()


@pytest.mark.parametrize("mode", ["replay", "record", "live"])
def test_every_manifest_opens(mode: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-unused")
    text = (APP / f"{mode}.toml").read_text()
    # Recording writes beside its fixture: keep the repository clean.
    manifest = tmp_path / f"{mode}.toml"
    manifest.write_text(text)
    (tmp_path / "fixture.jsonl").write_bytes((APP / "fixture.jsonl").read_bytes())
    with open_provider(manifest) as provider:
        assert provider.snapshot()["kind"] == mode
