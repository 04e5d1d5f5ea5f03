"""No frame a ``FixtureError`` passes through keeps the file's bytes in its locals.

Reporters print the locals of every frame of a traceback (pytest ``--showlocals``,
``traceback.TracebackException(capture_locals=True)``, Sentry); the rejection's promise
(reason and line only; docs/fixture-format.md) covers them too.
"""

from __future__ import annotations

import traceback
from pathlib import Path

import pytest

from replay_actor import Ceilings, FixtureError, entry_line, load_fixture, request_hash
from replay_actor.fixture import parse_fixture

pytestmark = pytest.mark.timeout(60)

SECRET = "PLANTED-SECRET-7f3a9c"
GOOD = entry_line(request_hash({"messages": [{"role": "user", "content": "x"}]}), response={})


def shown(exc: BaseException) -> str:
    """Everything a reporter printing frame locals would show, from the raise up to
    (not including) this test's own frames."""
    tb = exc.__traceback__
    assert tb is not None
    tb = tb.tb_next  # skip the test function's frame: its locals are the test's own
    report = traceback.TracebackException(type(exc), exc, tb, capture_locals=True)
    return "".join(report.format())


def rejected_file(tmp_path: Path) -> Path:
    path = tmp_path / "f.jsonl"
    secret_line = b'{"schema_version":1,"request_hash":"sha256:' + b"0" * 64 + b'",'
    secret_line += b'"response":{"content":"' + SECRET.encode() + b'"},"extra":1}'
    path.write_bytes(GOOD + b"\n" + secret_line + b"\n")
    return path


def test_load_fixture_frames_hold_no_file_bytes(tmp_path: Path) -> None:
    with pytest.raises(FixtureError) as info:
        load_fixture(rejected_file(tmp_path))
    assert (info.value.reason, info.value.line) == ("unknown_key", 2)
    text = shown(info.value)
    assert "load_fixture" in text and "parse_fixture" in text  # the frames are there
    assert SECRET not in text


def test_a_file_too_large_leaves_no_bytes_in_the_reading_frame(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(GOOD + b"\n" + SECRET.encode() * 100 + b"\n")
    with pytest.raises(FixtureError) as info:
        load_fixture(path, ceilings=Ceilings(max_file_bytes=len(GOOD) + 100))
    assert info.value.reason == "file_too_large"
    text = shown(info.value)
    assert "read_fixture_bytes" in text
    assert SECRET not in text


def test_parse_fixture_frame_holds_no_file_bytes(tmp_path: Path) -> None:
    data = rejected_file(tmp_path).read_bytes()
    with pytest.raises(FixtureError) as info:
        parse_fixture(data, Ceilings())
    assert "parse_fixture" in shown(info.value)
    assert SECRET not in shown(info.value)
