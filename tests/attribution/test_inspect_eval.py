"""The attribution page's eval, end to end (docs/attribution.md): twenty Inspect samples
run concurrently (``--max-connections 10``), recorded through a loopback stand-in model,
then a candidate that changes one solver step and with it the prompts of three known
samples (q5, q12, q18). ``compare`` must report exactly those three as diverged, each
paired with its own baseline sample and with its score change, in text, JSON and HTML;
through the ``replay`` provider (eval rows in the log) and through Inspect's own OpenAI
provider under ``replay-actor run`` with ``--batch`` (no rows: samples matched by their
requests). And the eval row never enters a request's hash."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from replay_actor import load_fixture, request_hash
from replay_actor.cli import main
from tests.support.arith_vendor import ArithVendor
from tests.support.paths import ROOT

pytest.importorskip("inspect_ai")
pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(600)]


EXAMPLE = ROOT / "examples" / "inspect_attribution"
CHANGED = {"q5": "What is 6 times 7?", "q12": "What is 9 times 8?", "q18": "What is 12 times 5?"}
INSPECT = str(Path(sys.executable).with_name("inspect"))


def _env(folder: Path) -> dict[str, str]:
    return dict(
        os.environ,
        INSPECT_DISPLAY="none",
        INSPECT_CACHE_DIR=str(folder / "cache"),
        XDG_DATA_HOME=str(folder / "data"),
        ARITH_KEY="stand-in-key",
    )


#: What the last ``_inspect`` printed (Inspect's batcher says what it sent).
SAID: list[str] = [""]


def _inspect(folder: Path, logs: str, *args: str, run: list[str] | None = None) -> Path:
    """``inspect eval arithmetic.py ARGS`` (under ``replay-actor RUN`` when given): its log."""
    command = [
        INSPECT,
        "eval",
        "arithmetic.py",
        "--max-connections",
        "10",
        "--log-dir",
        logs,
        *args,
    ]
    if run is not None:
        command = [sys.executable, "-m", "replay_actor", *run, "--", *command]
    done = subprocess.run(
        command,
        cwd=folder,
        env=_env(folder),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    SAID[0] = done.stdout + done.stderr
    (found,) = (folder / logs).glob("*.eval")
    return found


def _record_manifest(folder: Path, name: str, vendor: ArithVendor, fixture: str, log: str) -> str:
    (folder / name).write_text(
        "[provider]\n"
        'kind = "record"\n'
        f'fixture = "{fixture}"\n'
        f'log = "{log}"\n'
        "[provider.live]\n"
        'adapter = "openai"\n'
        'model = "arith"\n'
        f'base_url = "{vendor.base_url}"\n'
        'api_key_env = "ARITH_KEY"\n'
    )
    return name


def _compare(folder: Path, base: str, cand: str, evals: tuple[Path, Path], *extra: str) -> Any:
    command = [sys.executable, "-m", "replay_actor", "compare", base, cand]
    done = subprocess.run(
        [*command, "--eval", *map(str, evals), *extra],
        check=False,
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example, its baseline recorded through the stand-in model (twenty samples,
    ten at a time), then replayed; the candidate replayed against the same answers."""
    here = tmp_path_factory.mktemp("inspect-attribution")
    for name in ("arithmetic.py", "base.toml", "cand.toml"):
        shutil.copy(EXAMPLE / name, here / name)
    vendor = ArithVendor()
    try:
        manifest = _record_manifest(here, "record.toml", vendor, "baseline.jsonl", "record.log")
        _inspect(here, "logs/record", "--model", "replay/arith", "-M", f"manifest={manifest}")
        assert len(vendor.bodies) == 20
    finally:
        vendor.close()
    return here


def test_the_committed_baseline_is_what_recording_gives(folder: Path) -> None:
    recorded = load_fixture(folder / "baseline.jsonl").snapshot()["fixture_set_hash"]
    committed = load_fixture(EXAMPLE / "baseline.jsonl").snapshot()["fixture_set_hash"]
    assert recorded == committed
    # Ten at a time, each answer after its own delay: the log is not in the dataset's order.
    rows = [json.loads(line)["row"]["sample"] for line in (folder / "record.log").open()]
    assert sorted(rows) == sorted(f"q{n}" for n in range(1, 21)) and rows != sorted(rows)


@pytest.fixture(scope="module")
def replayed(folder: Path) -> tuple[Path, Path]:
    """The baseline and the candidate replayed: Inspect's two logs."""
    base = _inspect(folder, "logs/base", "--model", "replay/arith", "-M", "manifest=base.toml")
    cand = _inspect(
        folder,
        "logs/cand",
        "-T",
        "candidate=true",
        "--model",
        "replay/arith",
        "-M",
        "manifest=cand.toml",
        "--no-fail-on-error",
    )
    return base, cand


def _check_document(document: Any, after: str) -> None:
    assert document["summary"]["samples"] == 20
    assert document["summary"]["diverged"] == 3 and document["summary"]["identical"] == 17
    assert document["summary"]["score_changed"] == 3
    diverged = {s["sample"]: s for s in document["samples"] if s["status"] == "diverged"}
    assert set(diverged) == {f"{sid} (epoch 1)" for sid in CHANGED}
    for sid, question in CHANGED.items():
        sample = diverged[f"{sid} (epoch 1)"]
        # Paired with its own baseline sample: the same question, the sentence added.
        assert sample["question"]["baseline"] == question
        assert sample["call"] == 1
        assert sample["score"]["change"] == f"C → {after}"
        assert sample["differences"] == [
            {
                "path": "messages[1].content",
                "baseline": question,
                "candidate": question + " Show your working.",
            }
        ]


def test_compare_names_exactly_the_three_changed_samples(
    folder: Path, replayed: tuple[Path, Path]
) -> None:
    text = _compare(folder, "base.log", "cand.log", replayed)
    headlines = sorted(line for line in text.splitlines() if line.startswith("sample "))
    assert headlines == [
        f"sample {sid} (epoch 1): score C → error; diverged at call 1: messages[1].content"
        for sid in sorted(CHANGED)
    ]
    assert "samples: 20: 17 identical, 3 diverged" in text and "scores: 3 changed" in text
    document = json.loads(_compare(folder, "base.log", "cand.log", replayed, "--json"))
    _check_document(document, "error")
    _compare(folder, "base.log", "cand.log", replayed, "--html", "report.html")
    page = (folder / "report.html").read_text(encoding="utf-8")
    for sid in CHANGED:
        assert f"<code>{sid} (epoch 1)</code>" in page
    assert page.count("score C → error") == 3


def test_the_page_in_headless_chromium(folder: Path, replayed: tuple[Path, Path]) -> None:
    """The page as headless Chromium renders it names the same three samples."""
    _compare(folder, "base.log", "cand.log", replayed, "--html", "page.html")
    page = folder / "page.html"
    browser = next(filter(None, map(shutil.which, ("chromium", "chromium-browser"))), None)
    if browser is None:
        pytest.skip("no Chromium installed (make browser)")
    profile = folder / "chromium-profile"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
    flags += ["--disable-component-update", "--no-first-run", f"--user-data-dir={profile}"]
    done = subprocess.run(
        [browser, *flags, "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for sid, question in CHANGED.items():
        assert f"sample <code>{sid} (epoch 1)</code>: " in done.stdout
        assert f"{question} Show your working." in done.stdout
    assert "Summary: 20 samples" in done.stdout


def test_the_recorded_log_as_the_baseline_gives_the_same(
    folder: Path, replayed: tuple[Path, Path]
) -> None:
    # The recording's log (calls in the order ten concurrent samples finished) pairs alike.
    (record,) = (folder / "logs" / "record").glob("*.eval")
    document = json.loads(
        _compare(folder, "record.log", "cand.log", (record, replayed[1]), "--json")
    )
    _check_document(document, "error")


def test_the_candidates_new_answers_recorded_show_the_score_change(
    folder: Path, replayed: tuple[Path, Path]
) -> None:
    shutil.copy(folder / "baseline.jsonl", folder / "candidate.jsonl")
    vendor = ArithVendor()
    try:
        manifest = _record_manifest(
            folder, "cand-record.toml", vendor, "candidate.jsonl", "new.log"
        )
        args = ["-T", "candidate=true", "--model", "replay/arith", "-M", f"manifest={manifest}"]
        cand = _inspect(folder, "logs/cand-record", *args)
        assert len(vendor.bodies) == 3  # only the three new questions reached the model
    finally:
        vendor.close()
    document = json.loads(_compare(folder, "base.log", "new.log", (replayed[0], cand), "--json"))
    _check_document(document, "I")


@pytest.mark.slow  # most of a minute or more: make test-tools runs it
def test_with_batch_under_run_samples_are_matched_by_their_requests(folder: Path) -> None:
    (folder / "batch.yaml").write_text("size: 20\nsend_delay: 0.5\ntick: 0.2\n")
    vendor = ArithVendor()
    try:
        record = _record_manifest(folder, "batch-record.toml", vendor, "batch.jsonl", "b0.log")
        model = ["--model", "openai/gpt-test", "--batch", "batch.yaml", "--max-retries", "0"]
        _inspect(folder, "logs/batch-record", *model, run=["run", record])
        (folder / "batch-replay.toml").write_text(
            '[provider]\nkind = "replay"\nfixture = "batch.jsonl"\n'
        )
        replay = ["run", "--log", "batch-base.log", "batch-replay.toml"]
        base = _inspect(folder, "logs/batch-base", *model, run=replay)
        # Ten at a time (--max-connections 10): the batches hold ten requests.
        assert "Created batch batch_" in SAID[0] and "with 10 requests" in SAID[0]
        record = _record_manifest(
            folder, "batch-cand.toml", vendor, "batch.jsonl", "batch-cand.log"
        )
        cand = _inspect(
            folder, "logs/batch-cand", "-T", "candidate=true", *model, run=["run", record]
        )
    finally:
        vendor.close()
    # Under run, the log has no rows: Inspect's samples find their calls by request.
    assert all(json.loads(line)["row"] is None for line in (folder / "batch-base.log").open())
    document = json.loads(
        _compare(folder, "batch-base.log", "batch-cand.log", (base, cand), "--json")
    )
    _check_document(document, "I")
    assert all(s["baseline_calls"] == 1 for s in document["samples"])


def test_the_eval_row_never_enters_the_hash(tmp_path: Path) -> None:
    """A fixture recorded through the Inspect provider before rows existed replays with
    no miss, and its calls' hashes are the fixture's own; the row is beside them."""
    from inspect_ai.model import ChatMessageSystem, ChatMessageUser, GenerateConfig

    from replay_actor.integrations.inspect_ai import to_request

    request = to_request(
        [
            ChatMessageSystem(content="Answer with a number."),
            ChatMessageUser(content="What is 2 + 3?"),
        ],
        [],
        "none",
        GenerateConfig(temperature=0.0, max_tokens=16),
        epoch=1,
    )
    # Pinned before rows were added: the same request hashes as it always did.
    assert request_hash(request) == (
        "sha256:8e2070b02be2b757435fb8be2feedc9d49e1aaf8edc9b4b524ef2bbf86c71d34"
    )
    shutil.copytree(ROOT / "examples" / "inspect", tmp_path / "inspect")
    (tmp_path / "inspect" / "logged.toml").write_text(
        '[provider]\nkind = "replay"\nfixture = "baseline.jsonl"\nlog = "run.log"\n'
    )
    subprocess.run(
        [INSPECT, "eval", "task.py", "--model", "replay/any", "-M", "manifest=logged.toml"],
        cwd=tmp_path / "inspect",
        env=_env(tmp_path),
        capture_output=True,
        timeout=300,
        check=True,
    )
    lines = [json.loads(line) for line in (tmp_path / "inspect" / "run.log").open()]
    entries = {
        json.loads(line)["request_hash"]
        for line in (ROOT / "examples/inspect/baseline.jsonl").open()
    }
    assert len(lines) == 6 and all(line["outcome"] == "served" for line in lines)
    assert {line["request_hash"] for line in lines} == entries
    assert sorted((line["row"]["sample"], line["row"]["epoch"]) for line in lines) == [
        (sample, epoch) for sample in (1, 2, 3) for epoch in (1, 2)
    ]
    assert all(line["scope"] == {"epoch": line["row"]["epoch"]} for line in lines)
    log = str(tmp_path / "inspect" / "run.log")
    assert main(["compare", log, log]) == 0
