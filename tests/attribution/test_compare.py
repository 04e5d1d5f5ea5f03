"""``replay-actor compare`` (docs/attribution.md): samples by scope and by conversation
lineage, the first diverging call and its paths, every status, exit codes, private logs,
and hostile logs skipped and counted, never a crash."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replay_actor import open_provider, request_hash
from replay_actor._errors import ReplayError
from replay_actor.cli import main
from tests.support.frontdoor_util import write_fixture

pytestmark = pytest.mark.usefixtures("no_leaks")

SYSTEM = {"role": "system", "content": "be brief"}


def _turns(*texts: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [SYSTEM]
    for index, text in enumerate(texts):
        out.append({"role": "user" if index % 2 == 0 else "assistant", "content": text})
    return out


def _conversation(
    first: str, *, change: str | None = None, scope: int | None = None
) -> list[dict[str, Any]]:
    """Three calls, each extending the last: (request) per call."""
    third = change or "three"
    calls = [_turns(first), _turns(first, "a1", "two"), _turns(first, "a1", "two", "a2", third)]
    return [{"messages": m, **({"scope": {"sample": scope}} if scope else {})} for m in calls]


def _log(
    tmp_path: Path,
    name: str,
    requests: list[dict[str, Any]],
    *,
    private: bool = False,
    unanswered: int | None = None,
) -> Path:
    """Run ``requests`` through a replay provider whose manifest logs to ``name``; the
    fixture answers each but ``requests[unanswered]``."""
    known = {request_hash(r): {"content": "ok"} for i, r in enumerate(requests) if i != unanswered}
    fixture = write_fixture(tmp_path / f"{name}.fixture.jsonl", known)
    mapping = {
        "provider": {
            "kind": "replay",
            "fixture": str(fixture),
            "log": str(tmp_path / name),
            "data": "private" if private else "normal",
        }
    }
    with open_provider(mapping) as llm:
        for request in requests:
            try:
                llm.complete(request)
            except ReplayError:
                pass
    return tmp_path / name


def _compare(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["compare", *args])
    return code, capsys.readouterr().out


def test_identical_logs_exit_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    calls = _conversation("q1", scope=1) + _conversation("q2", scope=2)
    base = _log(tmp_path, "base.log", calls)
    cand = _log(tmp_path, "cand.log", calls)
    code, out = _compare(capsys, str(base), str(cand))
    assert code == 0
    assert "samples: 2: 2 identical, 0 diverged" in out


def test_a_scoped_sample_diverges_at_its_call_with_the_paths(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _log(tmp_path, "base.log", _conversation("q1", scope=1) + _conversation("q2", scope=2))
    cand = _log(
        tmp_path,
        "cand.log",
        _conversation("q1", scope=1) + _conversation("q2", scope=2, change="THREE"),
    )
    code, out = _compare(capsys, str(base), str(cand))
    assert code == 1
    assert 'sample {"sample":2} "q2": diverged at call 3' in out
    assert 'messages[5].content: "three" → "THREE"' in out
    code, out = _compare(capsys, str(base), str(cand), "--json")
    document = json.loads(out)
    assert document["summary"] == {
        "samples": 2,
        "identical": 1,
        "diverged": 1,
        "missed": 0,
        "fewer": 0,
        "extra": 0,
    }
    assert document["histogram"] == {"3": 1}
    diverged = [s for s in document["samples"] if s["status"] == "diverged"]
    assert [(s["sample"], s["call"]) for s in diverged] == [('{"sample":2} "q2"', 3)]
    assert diverged[0]["differences"] == [
        {"path": "messages[5].content", "baseline": "three", "candidate": "THREE"}
    ]


def test_unscoped_calls_group_by_conversation_lineage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Interleaved conversations: each call joins the conversation its messages extend.
    a, b = _conversation("qa"), _conversation("qb")
    base = _log(tmp_path, "base.log", [a[0], b[0], a[1], b[1], a[2], b[2]])
    b_changed = _conversation("qb", change="other")
    cand = _log(tmp_path, "cand.log", [a[0], b_changed[0], a[1], b_changed[1], a[2], b_changed[2]])
    code, out = _compare(capsys, str(base), str(cand), "--json")
    assert code == 1
    samples = json.loads(out)["samples"]
    assert [(s["sample"], s["status"], s["call"]) for s in samples] == [
        ('"qa"', "identical", None),
        ('"qb"', "diverged", 3),
    ]
    assert [d["path"] for d in samples[1]["differences"]] == ["messages[5].content"]


def test_fewer_extra_and_missed_samples(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one, two, three = (_conversation(q, scope=n) for n, q in enumerate(("q1", "q2", "q3"), 1))
    base = _log(tmp_path, "base.log", one + two + three)
    cand = _log(tmp_path, "cand.log", one + two[:2] + three + [_conversation("q4", scope=4)[0]])
    code, out = _compare(capsys, str(base), str(cand), "--json")
    assert code == 1
    statuses = {s["sample"]: (s["status"], s["call"]) for s in json.loads(out)["samples"]}
    assert statuses == {
        '{"sample":1} "q1"': ("identical", None),
        '{"sample":2} "q2"': ("fewer", 3),
        '{"sample":3} "q3"': ("identical", None),
        '{"sample":4} "q4"': ("extra", 1),
    }
    # The same requests, but the candidate's fixture lacks one: "missed" at that call.
    base = _log(tmp_path, "b2.log", one)
    cand = _log(tmp_path, "c2.log", one, unanswered=1)
    code, out = _compare(capsys, str(base), str(cand))
    assert code == 1
    assert 'sample {"sample":1} "q1": missed at call 2' in out
    assert "(miss)" in out


def test_private_logs_compare_by_fixture_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = _conversation("q1", scope=1)
    base = _log(tmp_path, "base.log", calls, private=True)
    cand = _log(tmp_path, "cand.log", calls, private=True)
    code, out = _compare(capsys, str(base), str(cand))
    assert code == 0, out
    assert "sha256:" not in out


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (
            b'{"seq":1,"time":0,"outcome":"served","scope":{"a":"' + b"x" * 70_000 + b'"}}\n',
            "line_too_long",
        ),
        (
            b'{"seq":1,"time":0,"outcome":"served","scope":'
            + b'{"a":' * 5000
            + b"1"
            + b"}" * 5001
            + b"\n",
            "nesting_too_deep",
        ),
        (b'{"seq":1,"time":0,"outcome":"served","path":"\xff\xfe"}\n', "not_json"),
        (b'{"seq":1,"time":0,"outcome":"hacked"}\n', "invalid_field"),
        (
            b'{"seq":1,"time":0,"outcome":"served","request_hash":"sha256:../../etc"}\n',
            "invalid_field",
        ),
        (b'{"seq":"1","time":0,"outcome":"served"}\n', "invalid_field"),
        (b'{"seq":1,"time":0,"outcome":"served","line":-3}\n', "invalid_field"),
        (b"[1,2,3]\n", "invalid_field"),
        (b"not json at all\n", "not_json"),
    ],
)
def test_hostile_lines_are_skipped_and_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: bytes, reason: str
) -> None:
    good = _log(tmp_path, "base.log", _conversation("q1", scope=1))
    hostile = tmp_path / "hostile.log"
    hostile.write_bytes(good.read_bytes() + line + b'{"seq":9,"time":0,"outcome":"served"')
    (tmp_path / "hostile.log.requests.jsonl").write_bytes(
        (tmp_path / "base.log.requests.jsonl").read_bytes()
    )
    code, out = _compare(capsys, str(good), str(hostile), "--json")
    document = json.loads(out)
    assert document["candidate"]["skipped"] == {reason: 1, "torn": 1}
    assert document["summary"]["identical"] == 1 and code == 0


def test_a_log_that_cannot_be_read_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = _log(tmp_path, "base.log", _conversation("q1", scope=1))
    assert main(["compare", str(good), str(tmp_path / "absent.log")]) == 2
    assert main(["compare", str(good), str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("replay-actor: error:") == 2 and "Traceback" not in err
    assert main(["compare", str(good)]) == 2


def test_conversations_within_one_scope_pair_by_first_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Inspect's scope names the epoch only: its samples run concurrently within it.
    def epoch(request: dict[str, Any]) -> dict[str, Any]:
        return {**request, "scope": {"epoch": 1}}

    a = [epoch(r) for r in _conversation("qa")]
    b = [epoch(r) for r in _conversation("qb")]
    base = _log(tmp_path, "base.log", [a[0], b[0], a[1], b[1], a[2], b[2]])
    cand = _log(tmp_path, "cand.log", [b[0], b[1], a[0], b[2], a[1], a[2]])
    code, out = _compare(capsys, str(base), str(cand), "--json")
    assert code == 0, out
    assert [s["sample"] for s in json.loads(out)["samples"]] == [
        '{"epoch":1} "qa"',
        '{"epoch":1} "qb"',
    ]
    changed = [epoch(r) for r in _conversation("qa", change="else")]
    cand = _log(tmp_path, "cand2.log", [b[0], changed[0], b[1], changed[1], b[2], changed[2]])
    code, out = _compare(capsys, str(base), str(cand), "--json")
    assert code == 1
    different = [s for s in json.loads(out)["samples"] if s["status"] != "identical"]
    assert [(s["sample"], s["call"]) for s in different] == [('{"epoch":1} "qa"', 3)]


def test_rejected_bytes_never_cross_and_the_page_escapes_every_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = "planted-secret-93ae"
    script = "<script>alert(1)</script>"
    base = _log(tmp_path, "base.log", _conversation("q1", scope=1))
    cand = _log(tmp_path, "cand.log", _conversation(script, scope=1))
    with cand.open("ab") as log:
        log.write(b'{"seq":1,"time":0,"outcome":"' + secret.encode() + b'"}\n')
        log.write(b'{"seq":1,"time":0,"outcome":"served","scope":{"' + secret.encode() + b"\n")
    html = tmp_path / "report.html"
    texts = []
    for extra in ((), ("--json",), ("--html", str(html))):
        code, out = _compare(capsys, str(base), str(cand), *extra)
        assert code == 1
        texts.append(out)
    page = html.read_text(encoding="utf-8")
    assert all(secret not in text for text in [*texts, page])
    assert json.loads(texts[1])["candidate"]["skipped"] == {"invalid_field": 1, "not_json": 1}
    # The candidate's request (from its sidecar) is shown, escaped, never as markup.
    assert "&lt;script&gt;" in page and "<script" not in page


def test_a_call_without_messages_joins_its_scopes_sample(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    embedding = {"kind": "embedding", "model": "e", "texts": ["x"], "scope": {"sample": 1}}
    calls = [embedding, *_conversation("q1", scope=1)]
    base = _log(tmp_path, "base.log", calls)
    cand = _log(tmp_path, "cand.log", calls)
    code, out = _compare(capsys, str(base), str(cand), "--json")
    assert code == 0, out
    (sample,) = json.loads(out)["samples"]
    assert (sample["sample"], sample["baseline_calls"]) == ('{"sample":1} "q1"', 4)
