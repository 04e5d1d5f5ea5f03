"""A newcomer's first hour (issue 26, docs/authoring.md "From nothing"): ``init``, a real
openai-SDK app under ``replay-actor run``, every miss printed with the ``add`` command
that answers it, the printed commands pasted into a shell as they are (only the answer
text put in), the app served on the next run. Also: exhausted sequences, private data,
``add``'s refusal, ``--next``, ``--replace``, ``remove`` and ``explain HASH``."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from replay_actor import load_fixture, request_hash
from replay_actor.files.sidecar import find_request, sidecar_path
from tests.support.frontdoor_util import quiet_env, replay_manifest, write_fixture

pytestmark = pytest.mark.usefixtures("no_leaks")

BIN = Path(sys.executable).parent
TIMEOUT = 120

#: Two distinct calls and one repeated: the newcomer's app, plain openai SDK.
APP = textwrap.dedent(
    """
    import openai
    client = openai.OpenAI(max_retries=0)
    for question in ["Name a city in Portugal.", "Name a dish from there.",
                     "Name a city in Portugal."]:
        try:
            answer = client.chat.completions.create(
                model="gpt-4.1-mini", messages=[{"role": "user", "content": question}]
            )
            print("answer:", answer.choices[0].message.content)
        except openai.NotFoundError:
            print("no answer")
    """
)
ANSWERS = {"Name a city in Portugal.": "Porto.", "Name a dish from there.": "Francesinha."}
FIX = re.compile(r"^  fix:  (replay-actor add .*)$", re.MULTILINE)


def neutral(question: str) -> dict[str, object]:
    return {"messages": [{"role": "user", "content": question}]}


def shell(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``command`` as a user pastes it into bash, the venv's commands on PATH."""
    env = quiet_env(PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def test_from_nothing_to_a_passing_replay_in_five_commands(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(APP)
    # 1: init
    init = shell("replay-actor init", tmp_path)
    assert init.returncode == 0, init.stderr
    assert "next: replay-actor run replay.toml -- python your_app.py" in init.stdout
    run = "replay-actor run replay.toml -- python app.py"
    # 2: run; both distinct misses printed once each, with their add command
    first = shell(run, tmp_path)
    assert first.returncode == 4, first.stderr
    assert first.stdout.splitlines() == ["no answer"] * 3
    fixes = FIX.findall(first.stderr)
    assert len(fixes) == 2, first.stderr
    for question in ANSWERS:
        digest = request_hash(neutral(question))
        assert first.stderr.count(f"(request_hash: {digest})") == 1
        # the missed request is in the sidecar, so explain needs nothing hand-written
        assert find_request(sidecar_path(tmp_path / "fixture.jsonl"), digest) == neutral(question)
    assert "0 served, 3 missed" in first.stderr
    # 3, 4: paste each printed command, the answer text put in its place
    for fix in fixes:
        found = re.search(r"sha256:[0-9a-f]{64}", fix)
        assert found is not None
        question = next(q for q in ANSWERS if request_hash(neutral(q)) == found[0])
        pasted = shell(fix.replace("THE ANSWER", ANSWERS[question]), tmp_path)
        assert pasted.returncode == 0, pasted.stderr
    # 5: run again: served
    second = shell(run, tmp_path)
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines() == [
        "answer: Porto.",
        "answer: Francesinha.",
        "answer: Porto.",
    ]
    assert "3 served, 0 missed, 0 exhausted" in second.stderr
    assert "fix:" not in second.stderr


def test_a_miss_names_the_nearest_recorded_request_and_explain_takes_the_hash(
    tmp_path: Path,
) -> None:
    recorded = neutral("Name a city in Portugal.")
    fixture = write_fixture(
        tmp_path / "fixture.jsonl", {request_hash(recorded): {"content": "Porto."}}
    )
    manifest = replay_manifest(tmp_path, fixture, inspection=False)
    # the recorded request is in the sidecar (as add --request or record mode write it)
    added = shell(
        f"replay-actor add --replace fixture.jsonl {request_hash(recorded)} --content Porto. "
        f"--request /dev/stdin <<'EOF'\n{json.dumps(recorded)}\nEOF",
        tmp_path,
    )
    assert added.returncode == 0, added.stderr
    (tmp_path / "app.py").write_text(APP)
    done = shell(f"replay-actor run {manifest.name} -- python app.py", tmp_path)
    missed = request_hash(neutral("Name a dish from there."))
    assert (
        f"nearest recorded request {request_hash(recorded)} differs at: messages[0].content"
        in done.stderr
    )
    # a miss is never its own nearest, nor another miss's
    assert f"nearest recorded request {missed}" not in done.stderr
    why = re.search(r"^  why:  ?(replay-actor explain .*)$", done.stderr, re.MULTILINE)
    assert why is not None
    explained = shell(why[1], tmp_path)
    assert explained.returncode == 3
    assert f"nearest recorded request: {request_hash(recorded)}" in explained.stdout
    assert '"Name a city in Portugal." → "Name a dish from there."' in explained.stdout


def test_an_exhausted_sequence_is_printed_with_its_add_next_command(tmp_path: Path) -> None:
    city = request_hash(neutral("Name a city in Portugal."))
    dish = request_hash(neutral("Name a dish from there."))
    fixture = write_fixture(
        tmp_path / "fixture.jsonl", {city: [{"content": "Porto."}], dish: {"content": "Bacalhau."}}
    )
    manifest = replay_manifest(tmp_path, fixture, inspection=False)
    (tmp_path / "app.py").write_text(APP)
    run = f"replay-actor run {manifest.name} -- python app.py"
    done = shell(run, tmp_path)
    assert done.returncode == 4
    assert "replay-actor: exhausted: replay sequence exhausted for this request " in done.stderr
    fixes = FIX.findall(done.stderr)
    assert fixes == [f"replay-actor add fixture.jsonl {city} --next --content 'THE ANSWER'"]
    assert shell(fixes[0].replace("THE ANSWER", "Lisbon."), tmp_path).returncode == 0
    again = shell(run, tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[-1] == "answer: Lisbon."


@pytest.mark.parametrize("inspection", [True, False])
def test_a_private_miss_withholds_the_hash_and_names_the_owner_only_record(
    tmp_path: Path, inspection: bool
) -> None:
    fixture = write_fixture(tmp_path / "fixture.jsonl", {})
    manifest = replay_manifest(tmp_path, fixture, private=True, inspection=inspection)
    (tmp_path / "app.py").write_text(APP)
    done = shell(f"replay-actor run {manifest.name} -- python app.py", tmp_path)
    assert done.returncode == 4
    assert "sha256:" not in done.stderr.replace(
        done.stderr.splitlines()[-1], ""
    )  # only the summary's fixture-set hash, which is no request's
    assert done.stderr.count("(private data: the request hash is withheld)") == 2
    if inspection:
        assert "owner-only inspection record misses.jsonl" in done.stderr
        events = [json.loads(line) for line in (tmp_path / "misses.jsonl").read_text().split()]
        assert {e["request_hash"] for e in events if e["event"] == "miss"} == {
            request_hash(neutral(q)) for q in ANSWERS
        }
    else:
        assert 'set inspection = "misses.jsonl"' in done.stderr
    assert not Path(sidecar_path(fixture)).exists()  # nothing private saved in the clear


def test_add_refuses_an_existing_hash_then_next_replace_and_remove(tmp_path: Path) -> None:
    digest = request_hash(neutral("Name a city in Portugal."))
    shell("replay-actor init", tmp_path)
    add = f"replay-actor add fixture.jsonl {digest} --content"
    assert shell(f"{add} Porto.", tmp_path).returncode == 0
    before = (tmp_path / "fixture.jsonl").read_bytes()
    refused = shell(f"{add} Lisbon.", tmp_path)
    assert refused.returncode == 1
    assert "already holds" in refused.stderr and "--next" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert (tmp_path / "fixture.jsonl").read_bytes() == before
    assert shell(f"{add} Lisbon. --next", tmp_path).returncode == 0
    assert load_fixture(tmp_path / "fixture.jsonl").responses_for(digest) == [
        {"content": "Porto."},
        {"content": "Lisbon."},
    ]
    assert shell(f"{add} Faro. --replace", tmp_path).returncode == 0
    assert load_fixture(tmp_path / "fixture.jsonl").responses_for(digest) == [{"content": "Faro."}]
    removed = shell(f"replay-actor remove fixture.jsonl {digest}", tmp_path)
    assert removed.returncode == 0
    assert removed.stdout == f"removed {digest} from fixture.jsonl (a single response)\n"
    assert digest not in load_fixture(tmp_path / "fixture.jsonl")
    again = shell(f"replay-actor remove fixture.jsonl {digest}", tmp_path)
    assert again.returncode == 1 and "holds no entry" in again.stderr


def test_init_refuses_to_overwrite_a_manifest(tmp_path: Path) -> None:
    assert shell("replay-actor init", tmp_path).returncode == 0
    manifest = (tmp_path / "replay.toml").read_bytes()
    again = shell("replay-actor init", tmp_path)
    assert again.returncode == 1 and "already exists" in again.stderr
    assert (tmp_path / "replay.toml").read_bytes() == manifest


def test_serve_prints_each_distinct_miss_as_it_happens(tmp_path: Path) -> None:
    import openai

    fixture = write_fixture(tmp_path / "fixture.jsonl", {})
    manifest = replay_manifest(tmp_path, fixture, inspection=False)
    proc = subprocess.Popen(
        [str(BIN / "replay-actor"), "serve", manifest.name],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        info = json.loads(proc.stdout.readline())
        client = openai.OpenAI(
            base_url=info["openai_base_url"], api_key=info["token"], max_retries=0
        )
        for _ in range(2):
            with pytest.raises(openai.NotFoundError):
                client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "Name a city in Portugal."}]
                )
        client.close()
    finally:
        proc.send_signal(signal.SIGTERM)  # our own child, by its PID
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0
    digest = request_hash(neutral("Name a city in Portugal."))
    assert err.count("replay-actor: miss: no replay fixture matches this request ") == 1
    assert f"  fix:  replay-actor add fixture.jsonl {digest} --content 'THE ANSWER'" in err
    assert find_request(sidecar_path(fixture), digest) == neutral("Name a city in Portugal.")


def test_a_saved_miss_is_never_named_as_the_nearest_recorded_request(tmp_path: Path) -> None:
    from replay_actor import ReplayMiss, acquire
    from replay_actor._request import canonical_request
    from replay_actor.files.sidecar import SidecarWriter

    recorded = neutral("Name a city in Portugal.")
    saved = neutral("Name a city in Spain.")  # a miss run saved: not an answer yet
    asked = neutral("Name a city in Spain!")  # nearer to the saved one than the recorded
    fixture = write_fixture(tmp_path / "fixture.jsonl", {request_hash(recorded): {"content": "x"}})
    writer = SidecarWriter(fixture)
    for request in (recorded, saved):
        writer.append(request_hash(request), canonical_request(request))
    with acquire(fixture, timeout=30) as llm:
        for request, nearest in ((asked, recorded), (saved, recorded)):
            with pytest.raises(ReplayMiss) as info:
                llm.complete(request)
            assert info.value.nearest is not None
            assert info.value.nearest["request_hash"] == request_hash(nearest)
