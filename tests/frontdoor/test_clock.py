"""COMMAND's clock (docs/front-door.md, "The clock"): with ``provider.clock`` a prompt
that carries today's date, recorded once, replays on any later day, for a Python and a
Node child; without it the same replay misses; where no usable libfaketime is found
``run`` refuses before anything starts.

The test cannot move the real date. It shows the later day the other way round: the
recording and the replay both run at the manifest's clock (2026-01-01) while the real
clock says another day, so the date in the prompt can only have come from the clock."""

from __future__ import annotations

import datetime
import glob
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import replay_actor
from replay_actor.frontdoor.clock import OVERRIDE, Clock, prepare_clock
from tests.support.chat_server import ChatServer
from tests.support.frontdoor_util import run_cli, summary
from tests.support.paths import ROOT

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(240)]

CLOCK = "2026-01-01T12:00:00Z"
DAY = "2026-01-01"
NODE = shutil.which("node")
NODE_MODULES = ROOT / ".cache" / "node" / "node_modules"

PYTHON_APP = textwrap.dedent(
    """
    import datetime, json, time
    import openai
    today = datetime.datetime.now().date().isoformat()
    start = time.monotonic()
    time.sleep(0.05)  # Python's sleep on the monotonic clock, under the preload
    slept = time.monotonic() - start
    answer = openai.OpenAI().chat.completions.create(
        model="gpt-test",
        messages=[{"role": "user", "content": f"Today is {today}. Say hi."}],
    )
    content = answer.choices[0].message.content
    print(json.dumps({"today": today, "slept": slept, "content": content}))
    """
)
NODE_APP = textwrap.dedent(
    """
    const OpenAI = require("openai");
    (async () => {
      const today = new Date().toISOString().slice(0, 10);
      const client = new OpenAI();
      const answer = await client.chat.completions.create({
        model: "gpt-test",
        messages: [{ role: "user", content: `Today is ${today}. Say hi.` }],
      });
      console.log(JSON.stringify({ today, content: answer.choices[0].message.content }));
    })().catch((error) => { console.error(String(error)); process.exit(1); });
    """
)


@pytest.fixture
def clock_library() -> str:
    """A libfaketime the run can use (``make test`` installs the clock extra)."""
    try:
        found = prepare_clock(CLOCK, {})
    except replay_actor.ClockUnavailable as exc:
        pytest.fail(f"no usable libfaketime here: {exc}")
    assert found is not None
    return found.library


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with ChatServer() as server:
        yield server


def _manifests(folder: Path, base_url: str) -> tuple[Path, Path, Path]:
    """Record with the clock; replay with it; replay without it."""
    clock = f"clock = {json.dumps(CLOCK)}\n"
    record = folder / "record.toml"
    record.write_text(
        '[provider]\nkind = "record"\nfixture = "dated.jsonl"\n'
        + clock
        + f'[provider.live]\nadapter = "openai"\nmodel = "gpt-live"\nbase_url = "{base_url}"\n'
    )
    replay = folder / "replay.toml"
    replay.write_text(
        '[provider]\nkind = "replay"\nfixture = "dated.jsonl"\nlog = "replay.log"\n' + clock
    )
    unclocked = folder / "unclocked.toml"
    unclocked.write_text('[provider]\nkind = "replay"\nfixture = "dated.jsonl"\n')
    return record, replay, unclocked


def _env(**more: str) -> dict[str, str]:
    # UTC: the date a program reads is its time zone's (docs: choose a clock at noon).
    return {**os.environ, "TZ": "UTC", **more}


Done = subprocess.CompletedProcess[str]


def _record_then_replay(
    folder: Path, chat: ChatServer, command: list[str], env: dict[str, str]
) -> tuple[Done, Done, Done]:
    record, replay, unclocked = _manifests(folder, chat.base_url())
    recorded = run_cli(record, command, env=env, cwd=folder)
    assert recorded.returncode == 0, recorded.stderr
    replayed = run_cli(replay, command, env=env, cwd=folder)
    missed = run_cli(unclocked, command, env=env, cwd=folder)
    return recorded, replayed, missed


def test_a_python_prompt_with_todays_date_replays_on_a_later_day(
    tmp_path: Path, chat: ChatServer, clock_library: str
) -> None:
    real_day = datetime.datetime.now(datetime.UTC).date().isoformat()
    assert real_day != DAY, "the real clock must say another day than the manifest's"
    script = tmp_path / "app.py"
    script.write_text(PYTHON_APP)
    before = time.time()
    recorded, replayed, missed = _record_then_replay(
        tmp_path, chat, [sys.executable, str(script)], _env()
    )
    first = json.loads(recorded.stdout)
    assert first["today"] == DAY and first["content"] == f"1: Today is {DAY}. Say hi."
    assert 0.04 < first["slept"] < 5  # the monotonic clock is the real one
    # Sealed, a later day (the real one): the same prompt, served from the fixture.
    assert replayed.returncode == 0, replayed.stderr
    again = json.loads(replayed.stdout)
    assert again == {**first, "slept": again["slept"]}
    assert summary(replayed.stderr).startswith("replay-actor: 1 served, 0 missed")
    # run itself is not under the clock: its run log's times are the real ones.
    logged = [json.loads(line) for line in (tmp_path / "replay.log").read_text().splitlines()]
    assert [line["outcome"] for line in logged] == ["served"]
    assert before <= logged[0]["time"] <= time.time()
    # Without the clock the prompt carries the real date: a miss (the SDK raises it, so
    # the app's own status is run's).
    assert missed.returncode == 1
    assert summary(missed.stderr).startswith("replay-actor: 0 served, 1 missed")
    assert "no replay fixture matches this request" in missed.stderr
    assert f"Today is {real_day}" not in recorded.stdout


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_a_node_prompt_with_todays_date_replays_on_a_later_day(
    tmp_path: Path, chat: ChatServer, clock_library: str
) -> None:
    assert NODE is not None
    if not (NODE_MODULES / "openai").is_dir():
        pytest.fail(f"the npm packages are not in {NODE_MODULES}: `make test` installs them")
    script = tmp_path / "app.cjs"
    script.write_text(NODE_APP)
    env = _env(NODE_PATH=str(NODE_MODULES))
    recorded, replayed, missed = _record_then_replay(tmp_path, chat, [NODE, str(script)], env)
    first = json.loads(recorded.stdout)
    assert first == {"today": DAY, "content": f"1: Today is {DAY}. Say hi."}
    assert replayed.returncode == 0, replayed.stderr
    assert json.loads(replayed.stdout) == first
    assert missed.returncode == 1
    assert summary(missed.stderr).startswith("replay-actor: 0 served, 1 missed")


def test_every_process_of_command_reads_one_clock(tmp_path: Path, clock_library: str) -> None:
    # A grandchild started a second later reads a later time, not the start again.
    manifest = tmp_path / "m.toml"
    (tmp_path / "f.jsonl").write_text("")
    manifest.write_text(f'[provider]\nkind = "replay"\nfixture = "f.jsonl"\nclock = "{CLOCK}"\n')
    code = (
        "import subprocess, sys, time; a = time.time(); time.sleep(1.1); "
        "b = float(subprocess.run([sys.executable, '-c', 'import time; print(time.time())'], "
        "capture_output=True, text=True).stdout); print(a, b)"
    )
    done = run_cli(manifest, [sys.executable, "-c", code], env=_env())
    assert done.returncode == 0, done.stderr
    first, later = (float(x) for x in done.stdout.split())
    start = datetime.datetime.fromisoformat(CLOCK.replace("Z", "+00:00")).timestamp()
    assert start <= first < start + 60
    assert 1.0 < later - first < 30


def test_without_a_usable_library_run_refuses_before_anything_starts(tmp_path: Path) -> None:
    manifest = tmp_path / "m.toml"
    (tmp_path / "f.jsonl").write_text("")
    manifest.write_text(f'[provider]\nkind = "replay"\nfixture = "f.jsonl"\nclock = "{CLOCK}"\n')
    marker = tmp_path / "ran"
    command = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    missing = str(tmp_path / "no" / "libfaketime.so.1")
    done = run_cli(manifest, command, env=_env(**{OVERRIDE: missing}))
    assert done.returncode == 1
    assert not marker.exists()  # COMMAND never ran
    assert f"{OVERRIDE} names a library that cannot be used: {missing} (no such file)" in (
        done.stderr
    )
    assert "pip install 'replay-actor[clock]'" in done.stderr
    assert "apt-get install libfaketime" in done.stderr
    assert done.stderr.startswith("replay-actor: error: provider.clock: ")
    assert " served, " not in done.stderr  # nothing ran: no summary
    # The typed error, for the library's callers.
    with pytest.raises(replay_actor.ClockUnavailable, match="no such file"):
        prepare_clock(CLOCK, {OVERRIDE: missing})
    # Something that is no library: the loader ignores it, and the probe says so.
    bogus = tmp_path / "bogus.so"
    bogus.write_text("not a library")
    with pytest.raises(replay_actor.ClockUnavailable, match="did not fake the clock"):
        prepare_clock(CLOCK, {OVERRIDE: str(bogus)})


def test_libfaketime_0_9_10_is_refused_with_its_reason() -> None:
    # Debian's and Ubuntu's 0.9.10 breaks Python's time.sleep (wolfcw/libfaketime#426);
    # 0.9.11, which fixed it, also brought FAKETIME_DISABLE_SHM: its name tells them apart.
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketime*.so.1"))
    if not found:
        pytest.skip("no system libfaketime here")
    for path in found:
        if b"FAKETIME_DISABLE_SHM" in Path(path).read_bytes():
            clock = prepare_clock(CLOCK, {OVERRIDE: path})
            assert clock is not None and clock.library == path
            continue
        with pytest.raises(replay_actor.ClockUnavailable, match=r"time\.sleep fails under it"):
            prepare_clock(CLOCK, {OVERRIDE: path})


def test_the_clock_variables() -> None:
    start = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=3, seconds=0.25)
    clock = Clock(start, "/lib/libfaketime.so.1")
    env = clock.variables({"LD_PRELOAD": "/lib/other.so"})
    assert env["LD_PRELOAD"] == "/lib/libfaketime.so.1:/lib/other.so"
    # Whole seconds, rounded up: never before the instant.
    assert env["FAKETIME"] == f"+{3 * 86400 + 1}"
    assert env["FAKETIME_DONT_FAKE_MONOTONIC"] == "1" and env["NO_FAKE_STAT"] == "1"
    assert env["FAKETIME_DISABLE_SHM"] == "1"
    past = Clock(datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC), "/l.so")
    assert past.variables({})["FAKETIME"].startswith("-")
    assert past.variables({})["LD_PRELOAD"] == "/l.so"
    inherited = {"FAKETIME": "@2000-01-01 00:00:00", "FAKETIME_ONLY_CMDS": "x", "NO_FAKE_STAT": "1"}
    Clock.scrub(inherited)
    assert inherited == {}


def test_an_older_librarys_shared_memory_is_removed_after_command(tmp_path: Path) -> None:
    pid = 2**22 + os.getpid() % 1000  # above pid_max's default: no process has it
    names = [Path(f"/dev/shm/faketime_shm_{pid}"), Path(f"/dev/shm/sem.faketime_sem_{pid}")]
    for name in names:
        name.write_bytes(b"\0" * 8)
    Clock.clean_up(pid)
    assert not any(name.exists() for name in names)
