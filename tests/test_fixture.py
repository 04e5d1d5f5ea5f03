"""The fixture loader (docs/fixture-format.md): every reason code, priorities, files, the set hash,
the snapshot, and the boundary (no byte of a rejected line crosses it)."""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import traceback
from pathlib import Path
from typing import Any

import msgspec
import pytest
import rfc8785

from replay_actor import Ceilings, FixtureError, entry_line, load_fixture
from replay_actor._errors import FIXTURE_REASONS
from replay_actor.fixture import iter_rejections, parse_fixture

H1 = "sha256:" + "1" * 64
H2 = "sha256:" + "2" * 64
H3 = "sha256:" + "3" * 64
SECRET = "SECRET-7f3a"


def line(**entry: Any) -> bytes:
    return msgspec.json.encode(entry)


def good(h: str = H1, content: str = "hi") -> bytes:
    return entry_line(h, response={"content": content})


def write(tmp_path: Path, *lines: bytes, end: bytes = b"\n") -> Path:
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"\n".join(lines) + end)
    return path


def rejected(data: bytes, ceilings: Ceilings | None = None) -> tuple[str, int | None]:
    with pytest.raises(FixtureError) as info:
        parse_fixture(data, ceilings or Ceilings())
    return info.value.reason, info.value.line


HEAD = b'{"schema_version":1,"request_hash":"' + H1.encode() + b'",'

# (reason, a line that breaks exactly that rule first, ceilings)
CASES: list[tuple[str, bytes, dict[str, int]]] = [
    ("line_too_long", good(content="x" * 300), {"max_line_bytes": 200}),
    ("invalid_utf8", HEAD + b'"response":{"a":"\xff"}}', {}),
    ("invalid_json", HEAD + b'"response":{"a":1,}}', {}),
    ("invalid_json", b"\xef\xbb\xbf" + good(), {}),
    ("invalid_json", HEAD + b'"response":{"a":NaN}}', {}),
    ("invalid_json", HEAD + b'"response":{"a":Infinity}}', {}),
    ("invalid_json", HEAD + b'"response":{"a":"\\ud800"}}', {}),
    ("invalid_json", HEAD + b'"response":{"a":"\\udc00x"}}', {}),
    ("invalid_json", good() + b" {}", {}),
    ("unsupported_number", HEAD + b'"response":{"a":9007199254740992}}', {}),
    ("unsupported_number", HEAD + b'"response":{"a":[-18446744073709551616]}}', {}),
    ("unsupported_number", HEAD + b'"response":{"a":1e400}}', {}),
    ("nesting_too_deep", HEAD + b'"response":{"a":[[1]]}}', {"max_depth": 3}),
    ("not_an_object", b"[1,2]", {}),
    ("not_an_object", b'"x"', {}),
    ("duplicate_key", HEAD + b'"response":{"a":1,"a":1}}', {}),
    ("duplicate_key", HEAD + b'"response":{"a":[{"b":1,"b":2}]}}', {}),
    ("duplicate_key", HEAD + b'"response":{},"response":{}}', {}),
    ("unknown_key", HEAD + b'"response":{},"extra":1}', {}),
    ("missing_schema_version", line(request_hash=H1, response={}), {}),
    ("unsupported_schema_version", line(schema_version=1.0, request_hash=H1, response={}), {}),
    ("unsupported_schema_version", line(schema_version="1", request_hash=H1, response={}), {}),
    ("unsupported_schema_version", line(schema_version=True, request_hash=H1, response={}), {}),
    ("missing_request_hash", line(schema_version=1, response={}), {}),
    ("invalid_request_hash", line(schema_version=1, request_hash=H1.upper(), response={}), {}),
    ("invalid_request_hash", line(schema_version=1, request_hash=H1[:-1], response={}), {}),
    ("invalid_request_hash", line(schema_version=1, request_hash=1, response={}), {}),
    ("missing_response", line(schema_version=1, request_hash=H1), {}),
    (
        "conflicting_response",
        line(schema_version=1, request_hash=H1, response={}, responses=[{}]),
        {},
    ),
    ("invalid_response", line(schema_version=1, request_hash=H1, response=[1]), {}),
    ("invalid_response", line(schema_version=1, request_hash=H1, responses=[{}, 2]), {}),
    ("invalid_responses", line(schema_version=1, request_hash=H1, responses=[]), {}),
    ("invalid_responses", line(schema_version=1, request_hash=H1, responses={}), {}),
    (
        "too_many_responses",
        line(schema_version=1, request_hash=H1, responses=[{}] * 3),
        {"max_sequence_length": 2},
    ),
    ("response_too_large", good(content="x" * 50), {"max_response_bytes": 30}),
    (
        "response_too_large",
        entry_line(H1, responses=[{}, {"c": "x" * 50}]),
        {"max_response_bytes": 30},
    ),
]


@pytest.mark.parametrize(("reason", "data", "limits"), CASES)
def test_each_reason(reason: str, data: bytes, limits: dict[str, int]) -> None:
    assert rejected(good(H2) + b"\n\n" + data + b"\n", Ceilings(**limits)) == (reason, 3)


def test_every_line_reason_is_covered() -> None:
    covered = {case[0] for case in CASES} | {"duplicate_request_hash", "too_many_entries"}
    file_level = {"file_missing", "file_unreadable", "not_regular_file", "file_too_large"}
    assert covered | file_level == set(FIXTURE_REASONS)


def test_duplicate_request_hash_at_the_later_line() -> None:
    data = b"\n".join([good(H1), good(H2), good(H1, "other")])
    assert rejected(data) == ("duplicate_request_hash", 3)


def test_a_rejected_line_still_claims_its_hash() -> None:
    data = b"\n".join([good(H1, "x" * 50), good(H1)])
    found = iter_rejections_bytes(data, Ceilings(max_response_bytes=30))
    assert found == [("response_too_large", 1), ("duplicate_request_hash", 2)]


def test_too_many_entries_at_the_first_entry_past() -> None:
    data = b"\n".join([good(H1), b"", good(H2), good(H3)])
    assert rejected(data, Ceilings(max_entries=2)) == ("too_many_entries", 4)
    assert len(parse_fixture(data, Ceilings(max_entries=3))) == 3


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        # line_too_long is judged before anything else on the line
        (b"\xff" * 100, ("line_too_long", 1)),
        (HEAD + b'"response":{"a":"\xff"},}', ("invalid_utf8", 1)),
        (HEAD + b'"response":{"a":9007199254740993,"a":1},}', ("invalid_json", 1)),
        (HEAD + b'"response":{"a":[[9007199254740993]],"a":1}}', ("unsupported_number", 1)),
        (HEAD + b'"response":{"a":[[[1]]],"a":1}}', ("nesting_too_deep", 1)),
        (b'[{"a":1,"a":2}]', ("not_an_object", 1)),
        (HEAD + b'"response":{"a":1,"a":2},"x":1}', ("duplicate_key", 1)),
        (line(x=1, request_hash="bad"), ("unknown_key", 1)),
        (line(request_hash="bad"), ("missing_schema_version", 1)),
        (line(schema_version=2), ("unsupported_schema_version", 1)),
        (line(schema_version=1, request_hash="bad"), ("invalid_request_hash", 1)),
        (
            line(schema_version=1, request_hash=H1, response=1, responses=[]),
            ("conflicting_response", 1),
        ),
        (line(schema_version=1, request_hash=H1, responses=[1]), ("invalid_response", 1)),
    ],
)
def test_priority_when_several_rules_break(data: bytes, expected: tuple[str, int]) -> None:
    limits = Ceilings(max_line_bytes=90 if data.startswith(b"\xff") else 1000, max_depth=4)
    assert rejected(data, limits) == expected


def test_blank_lines_counted_and_crlf_accepted(tmp_path: Path) -> None:
    path = write(tmp_path, b"", good(H1) + b"\r", b"  \t", b"\r", good(H2) + b"\r", b"[1]")
    with pytest.raises(FixtureError) as info:
        load_fixture(path)
    assert (info.value.reason, info.value.line) == ("not_an_object", 6)
    ok = write(tmp_path, b"", good(H1) + b"\r", b" ", good(H2), end=b"\r\n")
    assert len(load_fixture(ok)) == 2


def test_empty_file_is_an_empty_fixture(tmp_path: Path) -> None:
    assert len(load_fixture(write(tmp_path, end=b""))) == 0


def test_depth_exactly_at_max_accepted_one_deeper_rejected() -> None:
    at = HEAD + b'"response":{"a":[[1]]}}'  # depth 4
    assert len(parse_fixture(at, Ceilings(max_depth=4))) == 1
    assert rejected(at, Ceilings(max_depth=3)) == ("nesting_too_deep", 1)
    deep = HEAD + b'"response":{"a":' + b"[" * 20 + b"]" * 20 + b"}}"
    assert len(parse_fixture(deep, Ceilings(max_depth=22))) == 1
    assert rejected(deep, Ceilings(max_depth=21)) == ("nesting_too_deep", 1)


def test_very_deep_line_never_recursion_error() -> None:
    deep = HEAD + b'"response":{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}}"
    assert rejected(deep) == ("nesting_too_deep", 1)
    assert rejected(b"[" * 100_000) == ("invalid_json", 1)
    assert rejected(b"[" * 100_000, Ceilings(max_depth=200_000)) == ("invalid_json", 1)


def test_keys_and_strings_outside_the_bmp() -> None:
    response = {"\U0001f600": 1, "\uff61": [2, "\U0001f600"], "a": {"\U00010000": None}}
    fixture = parse_fixture(entry_line(H1, response=response), Ceilings())
    assert fixture.stored(H1) == rfc8785.dumps(response)  # type: ignore[arg-type]


def test_floats_are_stored_in_rfc8785_form() -> None:
    data = HEAD + b'"response":{"a":1.0,"b":1E21,"c":-0.0,"d":[1e-7]}}'
    assert parse_fixture(data, Ceilings()).stored(H1) == b'{"a":1,"b":1e+21,"c":0,"d":[1e-7]}'


def test_non_canonical_lines_are_stored_canonically() -> None:
    data = (
        b'{ "response" : {"b":2, "a":"\\u00e9\\/"}, "request_hash":"'
        + H1.encode()
        + b'", "schema_version":1}'
    )
    fixture = parse_fixture(data, Ceilings())
    assert fixture.stored(H1) == '{"a":"é/","b":2}'.encode()
    assert fixture.responses_for(H1) == [{"a": "é/", "b": 2}]


def test_sequences() -> None:
    data = entry_line(H1, responses=[{"n": 1}, {"n": 2}]) + b"\n" + good(H2)
    fixture = parse_fixture(data, Ceilings())
    assert fixture.stored(H1) == (b'{"n":1}', b'{"n":2}')
    assert fixture.responses_for(H1) == [{"n": 1}, {"n": 2}]
    assert fixture.responses_for(H3) is None and fixture.stored(H3) is None
    assert H1 in fixture and H3 not in fixture
    assert fixture.request_hashes() == [H1, H2]


# -- files -------------------------------------------------------------------------------


def test_file_missing(tmp_path: Path) -> None:
    for path in (tmp_path / "nope.jsonl", tmp_path / "nope" / "x.jsonl"):
        with pytest.raises(FixtureError) as info:
            load_fixture(path)
        assert (info.value.reason, info.value.line) == ("file_missing", None)
        assert str(info.value) == "fixture rejected: file_missing"


def test_not_regular_file_directory_fifo_device(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (tmp_path, fifo, Path("/dev/zero"), Path("/dev/null")):
        result: list[BaseException] = []
        worker = threading.Thread(target=_capture, args=(path, result), daemon=True)
        worker.start()
        worker.join(10)
        assert not worker.is_alive(), f"{path} blocked"
        assert isinstance(result[0], FixtureError) and result[0].reason == "not_regular_file"


def _capture(path: Path, out: list[BaseException]) -> None:
    try:
        load_fixture(path)
    except BaseException as exc:
        out.append(exc)


def test_file_unreadable() -> None:
    # /proc/self/mem is a regular file whose read fails (EIO at offset 0), even as root.
    with pytest.raises(FixtureError) as info:
        load_fixture("/proc/self/mem")
    assert (info.value.reason, info.value.line) == ("file_unreadable", None)


def test_file_too_large_never_reads_past_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sparse = tmp_path / "sparse.jsonl"
    with open(sparse, "wb") as handle:
        handle.truncate(2**40)  # a terabyte, on paper
    reads: list[int] = []
    real_read = os.read

    def counting_read(fd: int, n: int) -> bytes:
        reads.append(n)
        return real_read(fd, n)

    monkeypatch.setattr(os, "read", counting_read)
    with pytest.raises(FixtureError) as info:
        load_fixture(sparse, ceilings=Ceilings(max_file_bytes=1000))
    assert (info.value.reason, info.value.line) == ("file_too_large", None)
    assert sum(reads) <= 1001


def test_file_exactly_at_the_limit(tmp_path: Path) -> None:
    path = write(tmp_path, good(), end=b"")
    size = path.stat().st_size
    assert len(load_fixture(path, ceilings=Ceilings(max_file_bytes=size))) == 1
    with pytest.raises(FixtureError, match="file_too_large"):
        load_fixture(path, ceilings=Ceilings(max_file_bytes=size - 1))


def test_ceilings_validation() -> None:
    with pytest.raises(ValueError, match="1024"):
        Ceilings(max_sequence_length=1025)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError):
            Ceilings(max_depth=bad)  # type: ignore[arg-type]
    assert Ceilings.from_mapping({"max_entries": 5}).max_entries == 5
    assert Ceilings().as_dict() == {
        "max_file_bytes": 256 * 2**20,
        "max_line_bytes": 16 * 2**20,
        "max_response_bytes": 4 * 2**20,
        "max_entries": 1_000_000,
        "max_sequence_length": 1024,
        "max_depth": 64,
    }


# -- the set hash and the snapshot --------------------------------------------------------


def independent_set_hash(entries: list[dict[str, Any]]) -> str:
    ordered = sorted(entries, key=lambda entry: entry["request_hash"])
    return "sha256:" + hashlib.sha256(rfc8785.dumps(ordered)).hexdigest()


ENTRIES: list[dict[str, Any]] = [
    {"schema_version": 1, "request_hash": H2, "response": {"content": "b", "x": 1.5}},
    {"schema_version": 1, "request_hash": H1, "responses": [{"n": 1}, {"\U0001f600": 2}]},
    {"schema_version": 1, "request_hash": H3, "response": {}},
]


def test_fixture_set_hash_is_the_spec_formula(tmp_path: Path) -> None:
    data = b"\n".join(line(**entry) for entry in ENTRIES)
    fixture = load_fixture(write(tmp_path, data))
    assert fixture.fixture_set_hash == independent_set_hash(ENTRIES)
    assert parse_fixture(b"", Ceilings()).fixture_set_hash == independent_set_hash([])


def test_fixture_set_hash_invariant_and_sensitive() -> None:
    one = b"\n".join(line(**entry) for entry in ENTRIES)
    reordered = b"\n\n".join(
        b" " + msgspec.json.format(line(**entry), indent=0).replace(b"\n", b" ")
        for entry in reversed(ENTRIES)
    )
    first = parse_fixture(one, Ceilings()).fixture_set_hash
    assert parse_fixture(reordered + b"\r\n", Ceilings()).fixture_set_hash == first
    changed = [dict(ENTRIES[0], response={"content": "c", "x": 1.5}), *ENTRIES[1:]]
    other = b"\n".join(line(**entry) for entry in changed)
    assert parse_fixture(other, Ceilings()).fixture_set_hash != first


def test_snapshot_is_safe(tmp_path: Path) -> None:
    data = b"\n".join(line(**entry) for entry in ENTRIES)
    path = write(tmp_path, data)
    ceilings = Ceilings(max_entries=10)
    snapshot = load_fixture(path, ceilings=ceilings).snapshot()
    assert snapshot == {
        "format_version": 1,
        "fixture_set_hash": independent_set_hash(ENTRIES),
        "entries": 3,
        "single_entries": 2,
        "sequence_entries": 1,
        "responses": 4,
        "ceilings": ceilings.as_dict(),
    }
    text = msgspec.json.encode(snapshot).decode()
    for needle in (H1, H2, H3, "content", str(path), "\U0001f600"):
        assert needle not in text


# -- the boundary ------------------------------------------------------------------------

SECRET_B = SECRET.encode()
BAD_LINES: list[tuple[bytes, dict[str, int]]] = [
    (HEAD + b'"response":{"' + SECRET_B + b'":"\xff"}}', {}),
    (HEAD + b'"response":{"' + SECRET_B + b'":1,}}', {}),
    (b'{"' + SECRET_B + b'":1} ' + SECRET_B, {}),
    (HEAD + b'"response":{"' + SECRET_B + b'":9007199254740993}}', {}),
    (HEAD + b'"response":{"' + SECRET_B + b'":[[[1]]]}}', {"max_depth": 3}),
    (b'["' + SECRET_B + b'"]', {}),
    (HEAD + b'"response":{"' + SECRET_B + b'":1,"' + SECRET_B + b'":2}}', {}),
    (HEAD + b'"response":{},"' + SECRET_B + b'":1}', {}),
    (line(request_hash=SECRET, response={SECRET: SECRET}), {}),
    (line(schema_version=SECRET, request_hash=H1, response={}), {}),
    (line(schema_version=1, request_hash=SECRET, response={}), {}),
    (line(schema_version=1, request_hash=H1, response=SECRET), {}),
    (line(schema_version=1, request_hash=H1, responses=SECRET), {}),
    (
        line(schema_version=1, request_hash=H1, response={"c": SECRET * 10}),
        {"max_response_bytes": 20},
    ),
    (line(schema_version=1, request_hash=H1, response={"c": SECRET * 30}), {"max_line_bytes": 200}),
    (line(schema_version=1, request_hash=H2, response={"c": SECRET}), {}),  # duplicate hash
    (b"\xef\xbb\xbf" + line(schema_version=1, request_hash=H1, response={"c": SECRET}), {}),
    (HEAD + b'"response":{"' + SECRET_B + b'":"\\ud800"}}', {}),
]


@pytest.mark.parametrize(("bad", "limits"), BAD_LINES)
def test_no_byte_of_a_rejected_line_crosses(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, bad: bytes, limits: dict[str, int]
) -> None:
    caplog.set_level(logging.DEBUG)
    path = write(tmp_path, good(H2), bad)
    with pytest.raises(FixtureError) as info:
        load_fixture(path, ceilings=Ceilings(**limits))
    err = info.value
    assert err.line == 2
    assert str(err) == f"fixture rejected: {err.reason} at line 2"
    assert err.__cause__ is None and err.__context__ is None
    surfaces = [
        str(err),
        repr(err),
        repr(err.args),
        repr(vars(err)),
        "".join(traceback.format_exception(err)),
        caplog.text,
        repr(iter_rejections(path, ceilings=Ceilings(**limits))),
    ]
    for surface in surfaces:
        assert SECRET not in surface
        assert "7f3a" not in surface


def iter_rejections_bytes(data: bytes, ceilings: Ceilings) -> list[tuple[str, int | None]]:
    from replay_actor.fixture._parse import _Parser

    found: list[tuple[str, int | None]] = []

    def keep(reason: str, number: int) -> bool:
        found.append((reason, number))
        return True

    _Parser(ceilings).run(data, keep)
    return found


def test_iter_rejections_reports_every_line(tmp_path: Path) -> None:
    path = write(tmp_path, good(H1), b"[1]", b"", b"{", good(H1), good(H2))
    assert iter_rejections(path) == [
        ("not_an_object", 2),
        ("invalid_json", 4),
        ("duplicate_request_hash", 5),
    ]
    assert iter_rejections(tmp_path / "missing") == [("file_missing", None)]
    assert iter_rejections(write(tmp_path, good())) == []


def test_bad_hash_after_many_good_lines_is_reported_exactly() -> None:
    # The hot path checks hash patterns in bulk; the report must still be exact.
    lines = [good(f"sha256:{n:064x}") for n in range(50)]
    lines.insert(30, line(schema_version=1, request_hash="sha256:" + "G" * 64, response={}))
    assert rejected(b"\n".join(lines)) == ("invalid_request_hash", 31)
    found = iter_rejections_bytes(b"\n".join([*lines, b"[]"]), Ceilings())
    assert found == [("invalid_request_hash", 31), ("not_an_object", 52)]
