"""``compare``'s edges (docs/attribution.md): a log without its sidecar still compares, a
path that is not UTF-8 is named, the page shortens values as the text does, and the exit
status is 0 identical, 1 diverged, 2 cannot compare, never anything else."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from replay_actor.cli import main
from tests.support.attribution_logs import conversation, interleave, write_log

QUESTIONS = ("What is 2 + 2?", "What is 3 + 5?", "What is 7 + 1?")


def _logs(tmp_path: Path, *, change: str | None = None) -> tuple[Path, Path]:
    base = [conversation(q, ["4"]) for q in QUESTIONS]
    asked = [q + (change or "") if i == 1 else q for i, q in enumerate(QUESTIONS)]
    cand = [conversation(q, ["4"]) for q in asked]
    return (
        write_log(tmp_path / "base.log", interleave(base, 1)),
        write_log(tmp_path / "cand.log", interleave(cand, 2)),
    )


def test_a_copy_without_its_sidecar_compares_identical(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, _ = _logs(tmp_path)
    copy = tmp_path / "copy.log"
    copy.write_bytes(base.read_bytes())  # the log alone, not its request sidecar
    for first, second in ((base, copy), (copy, base)):
        assert main(["compare", str(first), str(second), "--json"]) == 0
        document = json.loads(capsys.readouterr().out)
        assert document["summary"]["identical"] == 3 == document["summary"]["samples"]
        assert [document[s]["sidecar"] for s in ("baseline", "candidate")].count(False) == 1
    assert main(["compare", str(base), str(copy)]) == 0
    assert "no request sidecar" in capsys.readouterr().out


def test_without_either_sidecar_the_report_says_paths_are_unavailable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, cand = _logs(tmp_path, change=" Show your working.")
    for log in (base, cand):
        Path(f"{log}.requests.jsonl").unlink()
    code = main(["compare", str(base), str(cand)])
    out = capsys.readouterr().out
    assert code == 1
    assert "paths unavailable" in out and "Traceback" not in out


def test_the_candidates_paths_come_from_the_baselines_sidecar_where_it_has_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, cand = _logs(tmp_path, change=" Show your working.")
    Path(f"{cand}.requests.jsonl").unlink()
    # The changed request is in no sidecar: its sample is named and counted, not explained.
    assert main(["compare", str(base), str(cand), "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["summary"]["identical"] == 2
    assert document["candidate"]["sidecar"] is False


@pytest.mark.parametrize("where", ["baseline", "candidate"])
def test_a_path_that_is_not_utf8_is_named_and_compares(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    base, cand = _logs(tmp_path)
    odd = os.fsdecode(bytes(tmp_path) + b"/caf\xe9.log")  # Latin-1 bytes: not UTF-8
    os.rename(base if where == "baseline" else cand, odd)
    os.rename(f"{base if where == 'baseline' else cand}.requests.jsonl", odd + ".requests.jsonl")
    args = [odd, str(cand)] if where == "baseline" else [str(base), odd]
    page = tmp_path / "page.html"
    assert main(["compare", *args, "--html", str(page)]) == 0
    out = capsys.readouterr().out
    assert "caf\\xe9.log" in out
    assert "caf\\xe9.log" in page.read_text(encoding="utf-8")
    assert main(["compare", *args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[where]["path"].endswith("caf\\xe9.log")
    # Unreadable: named in the error, exit 2 (cannot compare), never "internal error".
    missing = os.fsdecode(bytes(tmp_path) + b"/absent-\xff.log")
    assert main(["compare", missing, str(cand)]) == 2
    err = capsys.readouterr().err
    assert "absent-\\xff.log" in err and "internal error" not in err


def test_the_page_shortens_values_as_the_text_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prompt = "Summarise: " + "lorem ipsum " * 90_000  # a megabyte prompt per sample
    base = [call for n in range(5) for call in conversation(f"{n}. {prompt}")]
    cand = [call for n in range(5) for call in conversation(f"{n}. {prompt} (changed)")]
    base_log = write_log(tmp_path / "base.log", base)
    cand_log = write_log(tmp_path / "cand.log", cand)
    page = tmp_path / "page.html"
    assert main(["compare", str(base_log), str(cand_log), "--html", str(page)]) == 1
    text = capsys.readouterr().out
    assert text.count("diverged at call 1") == 5
    html = page.read_text(encoding="utf-8")
    assert len(html) < 40_000, len(html)  # 10 MB of prompts, a page of a few kilobytes
    assert "(changed)" in html and f"({len(prompt) + 13} chars)" in html


def test_exit_2_when_compare_itself_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base, cand = _logs(tmp_path)
    page = tmp_path / "page.html"

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug")

    # A failure of compare itself ends with 2, not with 1 ("diverged"), and no page.
    monkeypatch.setattr("replay_actor.attribution.align.align", broken)
    assert main(["compare", str(base), str(cand), "--html", str(page)]) == 2
    assert "internal error (RuntimeError)" in capsys.readouterr().err
    assert not page.exists()


def test_a_page_that_cannot_be_written_is_exit_2_and_leaves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, cand = _logs(tmp_path)
    folder = tmp_path / "no-such-folder"
    assert main(["compare", str(base), str(cand), "--html", str(folder / "p.html")]) == 2
    assert "cannot be written" in capsys.readouterr().err
    assert not folder.exists()
