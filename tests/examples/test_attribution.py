"""The attribution example (examples/attribution/, docs/attribution.md), run as the docs
say: the baseline and the candidate under ``replay-actor run --log``, then ``compare``.
Its text, JSON and HTML must name exactly the diverged sample, call and path; the HTML
is also opened in headless Chromium where one is installed, and its text checked."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.support.frontdoor_util import CLI
from tests.support.paths import ROOT

pytestmark = pytest.mark.usefixtures("no_leaks")

EXAMPLE = ROOT / "examples" / "attribution"
PATH = "messages[5].content"
#: The sample the candidate changed, named by its scope and its question.
SAMPLE = '{"sample":2} "Is it warm in Oslo?"'


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(args), cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.tags: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example's baseline and candidate logs, and its report page, in a folder."""
    folder = tmp_path_factory.mktemp("attribution")
    built = _run(sys.executable, "build_fixture.py", str(folder / "fixture.jsonl"), cwd=EXAMPLE)
    assert built.returncode == 0, built.stderr
    # The committed fixture is the builder's output.
    assert (folder / "fixture.jsonl").read_bytes() == (EXAMPLE / "fixture.jsonl").read_bytes()
    manifest = str(EXAMPLE / "replay.toml")
    agent = [sys.executable, str(EXAMPLE / "agent.py")]
    base = _run(*CLI, "run", "--log", "base.log", manifest, "--", *agent, cwd=folder)
    assert base.returncode == 0, base.stderr
    assert "0 missed" in base.stderr
    cand = _run(*CLI, "run", "--log", "cand.log", manifest, "--", *agent, "--candidate", cwd=folder)
    assert cand.returncode == 1  # the agent's own status: sample 2 failed on a miss
    assert "sample 2: failed" in cand.stdout and "1 missed" in cand.stderr
    return folder


def test_text_names_exactly_the_diverged_sample_call_and_path(compared: Path) -> None:
    done = _run(*CLI, "compare", "base.log", "cand.log", cwd=compared)
    assert done.returncode == 1, done.stderr
    out = done.stdout
    assert "samples: 3: 2 identical, 1 diverged, 0 missed, 0 fewer calls, 0 extra calls" in out
    samples = [line for line in out.splitlines() if line.startswith("sample ")]
    assert samples == [f"sample {SAMPLE}: diverged at call 3: {PATH}"]
    assert "  (baseline 3 calls, candidate 3)" in out
    paths = [line.strip() for line in out.splitlines() if line.startswith("    messages")]
    assert "      3 ####" in out  # the histogram: one sample diverged at call 3
    assert paths == [
        f'{PATH}: "{{\\"temperature\\": 8, \\"unit\\": \\"C\\"}}" → '
        f'"{{\\"temperature\\": 46, \\"unit\\": \\"F\\"}}"'
    ]


def test_json_names_exactly_the_diverged_sample_call_and_path(compared: Path) -> None:
    done = _run(*CLI, "compare", "base.log", "cand.log", "--json", cwd=compared)
    assert done.returncode == 1
    document = json.loads(done.stdout)
    assert document["histogram"] == {"3": 1}
    different = [s for s in document["samples"] if s["status"] != "identical"]
    assert [(s["sample"], s["status"], s["call"]) for s in different] == [(SAMPLE, "diverged", 3)]
    assert different[0]["candidate"]["outcome"] == "miss"
    assert different[0]["differences"] == [
        {
            "path": PATH,
            "baseline": '{"temperature": 8, "unit": "C"}',
            "candidate": '{"temperature": 46, "unit": "F"}',
        }
    ]


def test_html_is_self_contained_and_names_the_same(compared: Path) -> None:
    done = _run(*CLI, "compare", "base.log", "cand.log", "--html", "report.html", cwd=compared)
    assert done.returncode == 1
    page = (compared / "report.html").read_text(encoding="utf-8")
    parser = _Text()
    parser.feed(page)
    assert "script" not in parser.tags and "svg" in parser.tags and "rect" in parser.tags
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in page
    text = " ".join("".join(parser.parts).split())
    assert f"sample {SAMPLE}: diverged at call 3" in text
    assert text.count("diverged at call") == 1
    assert PATH in text and '\\"temperature\\": 46' in text


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def test_html_in_headless_chromium(compared: Path) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip("no Chromium installed (apt-get install chromium)")
    _run(*CLI, "compare", "base.log", "cand.log", "--html", "page.html", cwd=compared)
    done = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--dump-dom",
            (compared / "page.html").as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    parser = _Text()
    parser.feed(done.stdout)
    text = " ".join("".join(parser.parts).split())
    assert f"sample {SAMPLE}: diverged at call 3" in text
    assert PATH in text
    assert "Summary: 3 samples" in text
