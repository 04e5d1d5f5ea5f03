"""``replay-actor init`` (docs/authoring.md, "From nothing"): a replay manifest and an
empty fixture, never over a manifest that exists."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.frontdoor_util import shell

pytestmark = pytest.mark.usefixtures("no_leaks")


def test_init_refuses_to_overwrite_a_manifest(tmp_path: Path) -> None:
    assert shell("replay-actor init", tmp_path).returncode == 0
    manifest = (tmp_path / "replay.toml").read_bytes()
    again = shell("replay-actor init", tmp_path)
    assert again.returncode == 1 and "already exists" in again.stderr
    assert (tmp_path / "replay.toml").read_bytes() == manifest
