"""The offline and no-telemetry switches ``run`` sets (docs/front-door.md, "Incidental
traffic"): the telemetry ones in every run, the offline ones in sealed runs only, each
only where the user's environment does not name it; the docs' table is the code's."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from replay_actor.frontdoor.switches import SWITCHES, switch_variables
from tests.support.frontdoor_util import neutral_hash, replay_manifest, run_cli, write_fixture
from tests.support.paths import ROOT

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(180)]

OFFLINE = {s.name for s in SWITCHES if s.sealed_only}
TELEMETRY = {s.name for s in SWITCHES if not s.sealed_only}
PRINT_ENV = "import json, os; print(json.dumps(dict(os.environ)))"


def _env_under_run(folder: Path, *flags: str, **user: str) -> dict[str, str]:
    fixture = write_fixture(
        folder / "f.jsonl", {neutral_hash([{"role": "user", "content": "x"}]): {}}
    )
    env = {k: v for k, v in os.environ.items() if k not in OFFLINE | TELEMETRY}
    done = run_cli(
        replay_manifest(folder, fixture),
        [sys.executable, "-c", PRINT_ENV],
        flags=flags,
        env={**env, **user},
    )
    assert done.returncode == 0, done.stderr
    seen: dict[str, str] = json.loads(done.stdout)
    return seen


def test_a_sealed_run_gets_every_switch_and_keeps_the_users(tmp_path: Path) -> None:
    seen = _env_under_run(tmp_path, HF_HUB_OFFLINE="0", DO_NOT_TRACK="")
    for switch in SWITCHES:
        if switch.name not in ("HF_HUB_OFFLINE", "DO_NOT_TRACK"):
            assert seen[switch.name] == switch.value, switch.name
    # What the user set (even to 0, even empty) is the user's.
    assert seen["HF_HUB_OFFLINE"] == "0" and seen["DO_NOT_TRACK"] == ""
    assert seen["PROMPTFOO_DISABLE_TELEMETRY"] == "1" and seen["HF_DATASETS_OFFLINE"] == "1"


def test_an_unsealed_run_gets_the_telemetry_switches_only(tmp_path: Path) -> None:
    # An unsealed run (a first recording) may have to download what the tools need.
    seen = _env_under_run(tmp_path, "--seal", "off")
    assert {name for name in TELEMETRY if seen.get(name)} == TELEMETRY
    assert not OFFLINE & set(seen)


def test_switch_variables() -> None:
    assert switch_variables({}, sealed=True) == {s.name: s.value for s in SWITCHES}
    unsealed = switch_variables({"RAGAS_DO_NOT_TRACK": "false"}, sealed=False)
    assert set(unsealed) == TELEMETRY - {"RAGAS_DO_NOT_TRACK"}
    assert {"HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_EVALUATE_OFFLINE"} <= OFFLINE
    assert {"PROMPTFOO_DISABLE_TELEMETRY", "DEEPEVAL_TELEMETRY_OPT_OUT"} <= TELEMETRY


def test_the_docs_table_is_the_codes() -> None:
    text = (ROOT / "docs" / "front-door.md").read_text("utf-8")
    section = text.split("## Incidental traffic", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| `([^`]*)` \| (every run|sealed runs) \|", section, re.M)
    assert rows == [
        (s.name, s.value, "sealed runs" if s.sealed_only else "every run") for s in SWITCHES
    ]
