"""``compare`` under concurrency (docs/attribution.md, "How samples pair"): samples pair
by content, never by the order they reached the log; retries are attempts of one call;
eval rows are samples; and the order of samples in either log never changes the report
(a hypothesis property)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replay_actor.cli import main
from tests.support.attribution_logs import Call, conversation, interleave, write_log

QUESTIONS = [f"What is {a} + {b}?" for a, b in zip(range(2, 22), range(30, 10, -1), strict=True)]
#: The samples the candidate changes (their prompt gains a sentence).
CHANGED = (3, 11, 17)


def _samples(*, candidate: bool, **options: Any) -> list[list[Call]]:
    out = []
    for index, question in enumerate(QUESTIONS):
        changed = candidate and index in CHANGED
        out.append(conversation(question + " Show your working." * changed, **options))
    return out


def _compare(capsys: pytest.CaptureFixture[str], *args: Any) -> tuple[int, Any]:
    capsys.readouterr()
    code = main(["compare", *map(str, args), "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_concurrent_samples_pair_with_their_own_question(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = write_log(tmp_path / "base.log", interleave(_samples(candidate=False), seed=1))
    cand = write_log(tmp_path / "cand.log", interleave(_samples(candidate=True), seed=2))
    code, document = _compare(capsys, base, cand)
    assert code == 1
    assert document["summary"]["identical"] == 17 and document["summary"]["diverged"] == 3
    diverged = [s for s in document["samples"] if s["status"] == "diverged"]
    for sample in diverged:
        asked = sample["question"]
        # Each changed sample is paired with its own baseline question, never another.
        assert asked["candidate"] == asked["baseline"] + " Show your working."
        assert [d["path"] for d in sample["differences"]] == ["messages[1].content"]
    assert sorted(s["question"]["baseline"] for s in diverged) == sorted(
        QUESTIONS[i] for i in CHANGED
    )


def test_the_same_with_every_sample_in_one_scope(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Inspect's epoch scope names no sample: all twenty run concurrently inside it.
    epoch = {"epoch": 1}
    base = write_log(tmp_path / "b.log", interleave(_samples(candidate=False, scope=epoch), 3))
    cand = write_log(tmp_path / "c.log", interleave(_samples(candidate=True, scope=epoch), 4))
    code, document = _compare(capsys, base, cand)
    diverged = [s for s in document["samples"] if s["status"] == "diverged"]
    assert code == 1 and len(diverged) == 3
    assert all(
        s["question"]["candidate"].startswith(s["question"]["baseline"][:-1]) for s in diverged
    )


def test_retries_are_attempts_of_one_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # CrewAI retries a missed call three times: one call, four attempts, not four samples.
    base_calls = [c for q in QUESTIONS[:3] for c in conversation(q, ["5"])]
    changed = conversation(QUESTIONS[1], ["5"])
    request, _, row = changed[1]
    request["messages"][-1]["content"] = "And then? Think again."
    retried = [changed[0], *[(request, "miss", row)] * 4]
    cand_calls = interleave([conversation(QUESTIONS[0], ["5"]), retried], 5)
    cand_calls += conversation(QUESTIONS[2], ["5"])
    base = write_log(tmp_path / "base.log", base_calls)
    cand = write_log(tmp_path / "cand.log", cand_calls)
    code, document = _compare(capsys, base, cand)
    assert code == 1
    assert document["summary"] == {
        "samples": 3,
        "identical": 2,
        "diverged": 1,
        "missed": 0,
        "fewer": 0,
        "extra": 0,
    }
    (sample,) = [s for s in document["samples"] if s["status"] == "diverged"]
    assert sample["question"]["candidate"] == QUESTIONS[1]
    assert (sample["call"], sample["candidate_calls"]) == (2, 2)
    assert sample["candidate"]["attempts"] == 4 and sample["candidate"]["outcome"] == "miss"
    assert [d["path"] for d in sample["differences"]] == ["messages[3].content"]
    code = main(["compare", str(base), str(cand)])
    assert "(miss, 4 attempts)" in capsys.readouterr().out


def test_an_eval_row_is_one_sample_and_pairs_by_row_on_a_tie(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Two rows whose changed prompts tie on paths and distance: each pairs with its row.
    def rows(candidate: bool) -> list[list[Call]]:
        out = []
        for n, question in enumerate(("What is 2 + 2?", "What is 3 + 3?"), 1):
            text = question + (" Be brief." if candidate else "")
            row = {"sample": f"q{n}", "epoch": 1}
            # A solver call and a grader call: one row, however many conversations.
            calls = conversation(text, ["4"], row=row) + conversation(f"Grade: {n}", row=row)
            out.append(calls)
        return out

    base = write_log(tmp_path / "base.log", interleave(rows(False), 6))
    cand = write_log(tmp_path / "cand.log", interleave(rows(True), 7))
    code, document = _compare(capsys, base, cand)
    assert code == 1
    samples = document["samples"]
    names = [(s["sample"], s["status"], s["call"], s["baseline_calls"]) for s in samples]
    assert names == [("q1 (epoch 1)", "diverged", 1, 3), ("q2 (epoch 1)", "diverged", 1, 3)]
    for sample in document["samples"]:
        assert sample["row"] == {"epoch": 1, "sample": sample["sample"].split()[0]}


def test_each_completion_request_is_a_sample_of_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # lm_eval's loglikelihood requests: legacy completions, no messages, no scope.
    def completions(changed: bool) -> list[list[Call]]:
        out: list[list[Call]] = []
        for n, question in enumerate(QUESTIONS[:6]):
            prompt = f"Q: {question}\nA:" + (" Think." if changed and n == 2 else "")
            out.append([({"kind": "completion", "prompt": prompt}, "served", None)])
        return out

    base = write_log(tmp_path / "base.log", interleave(completions(False), 8))
    cand = write_log(tmp_path / "cand.log", interleave(completions(True), 9))
    code, document = _compare(capsys, base, cand)
    assert code == 1
    assert document["summary"]["samples"] == 6 and document["summary"]["identical"] == 5
    (sample,) = [s for s in document["samples"] if s["status"] == "diverged"]
    assert sample["question"]["baseline"] == f"Q: {QUESTIONS[2]} A:"
    assert [d["path"] for d in sample["differences"]] == ["prompt"]


def _report(base: Path, cand: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["compare", str(base), str(cand)])
    text = capsys.readouterr().out
    main(["compare", str(base), str(cand), "--json"])
    document = json.loads(capsys.readouterr().out)
    for side in ("baseline", "candidate"):
        document[side].pop("path")
    return code, text.split("\n", 2)[2], json.dumps(document, sort_keys=True)


@st.composite
def _evals(draw: st.DrawFn) -> tuple[list[list[Call]], list[list[Call]]]:
    """A baseline of a few samples and a candidate that changes, drops or adds some."""
    count = draw(st.integers(1, 6))
    base, cand = [], []
    for n in range(count):
        question = f"Question {n}: {draw(st.sampled_from(['apples', 'pears', 'plums']))}?"
        answers = draw(st.lists(st.sampled_from(["yes", "no"]), max_size=2))
        scope = draw(st.sampled_from([None, {"epoch": 1}]))
        base.append(conversation(question, answers, scope=scope))
        change = draw(st.sampled_from(["same", "prompt", "answer", "drop", "miss", "retry"]))
        if change == "same":
            cand.append(conversation(question, answers, scope=scope))
        elif change == "prompt":
            cand.append(conversation(question + " Briefly.", answers, scope=scope))
        elif change == "answer":
            cand.append(conversation(question, [*answers, "maybe"], scope=scope))
        elif change == "miss":
            cand.append(conversation(question, answers, scope=scope, outcome="miss"))
        elif change == "retry":  # a changed prompt that misses, tried three times
            cand.append(conversation(question + " Again.", scope=scope, outcome="miss") * 3)
    if draw(st.booleans()):
        cand.append(conversation("A question only the candidate asks?"))
    return base, cand


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(evals=_evals(), seeds=st.lists(st.integers(0, 10_000), min_size=4, max_size=4))
def test_the_order_of_samples_in_either_log_never_changes_the_report(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    evals: tuple[list[list[Call]], list[list[Call]]],
    seeds: list[int],
) -> None:
    base_samples, cand_samples = evals
    reports = []
    for index, (one, two) in enumerate(((seeds[0], seeds[1]), (seeds[2], seeds[3]))):
        base = write_log(tmp_path / f"b{index}.log", interleave(base_samples, one))
        cand = write_log(tmp_path / f"c{index}.log", interleave(cand_samples, two))
        reports.append(_report(base, cand, capsys))
    # The log lines' own numbers (seq) move with the order; everything else is the same.
    assert _without_seq(reports[0]) == _without_seq(reports[1])


def _without_seq(report: tuple[int, str, str]) -> tuple[int, str, Any]:
    code, text, document = report

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in ("seq", "line")}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return code, text, strip(json.loads(document))
