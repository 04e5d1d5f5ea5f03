"""A corpus of fixture files, in the style of msgspec's JSONTestSuite test.

``corpus/accept/*.jsonl`` must load; ``corpus/reject/<reason>__<name>.jsonl`` must be
rejected with that reason, at the last non-blank line of the file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from replay_actor import FixtureError, load_fixture
from replay_actor._errors import FIXTURE_REASONS

CORPUS = Path(__file__).parent / "corpus"
ACCEPT = sorted((CORPUS / "accept").glob("*.jsonl"))
REJECT = sorted((CORPUS / "reject").glob("*.jsonl"))


@pytest.mark.parametrize("path", ACCEPT, ids=[path.stem for path in ACCEPT])
def test_accept(path: Path) -> None:
    fixture = load_fixture(path)
    assert fixture.snapshot()["entries"] == len(fixture)


@pytest.mark.parametrize("path", REJECT, ids=[path.stem for path in REJECT])
def test_reject(path: Path) -> None:
    reason = path.stem.split("__")[0]
    assert reason in FIXTURE_REASONS
    lines = path.read_bytes().split(b"\n")
    last = max(number for number, text in enumerate(lines, 1) if text.strip())
    with pytest.raises(FixtureError) as info:
        load_fixture(path)
    assert (info.value.reason, info.value.line) == (reason, last)


def test_corpus_is_not_empty() -> None:
    assert len(ACCEPT) >= 4 and len(REJECT) >= 15
