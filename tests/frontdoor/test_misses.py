"""Every miss said as it happens (docs/authoring.md, "From nothing"; frontdoor/misses.py):
a real openai-SDK app under ``replay-actor run`` from ``init`` on, every miss printed
once with the ``add`` command that answers it, the printed commands pasted into a shell
as they are (only the answer text put in), the app served on the next run; a miss names
its nearest recorded request and the ``explain`` command that takes its hash; an
exhausted sequence prints its ``add --next``; a private miss withholds its hash; and
``serve`` prints each distinct miss as it happens."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import textwrap
from pathlib import Path

import pytest

from replay_actor import request_hash
from replay_actor.files.sidecar import find_request, sidecar_path
from tests.support.frontdoor_util import BIN, neutral, replay_manifest, shell, write_fixture

pytestmark = pytest.mark.usefixtures("no_leaks")

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
        except openai.UnprocessableEntityError:
            print("no answer")
    """
)
ANSWERS = {"Name a city in Portugal.": "Porto.", "Name a dish from there.": "Francesinha."}
FIX = re.compile(r"^  fix:  (replay-actor add .*)$", re.MULTILINE)


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
            with pytest.raises(openai.UnprocessableEntityError):
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
