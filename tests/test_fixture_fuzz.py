"""Fuzzing the loader: any bytes either load or raise FixtureError with a known reason."""

from __future__ import annotations

import json

import msgspec
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from replay_actor import Ceilings, FixtureError, entry_line
from replay_actor._errors import FIXTURE_REASONS
from replay_actor.fixture import FixtureSet, parse_fixture
from replay_actor.fixture._parse import _bulk_table, _Parser

H = "sha256:" + "b" * 64
VALID = [
    entry_line(H, response={"content": "hi", "usage": {"t": 3}, "x": [1, 2.5, None]}),
    entry_line("sha256:" + "c" * 64, responses=[{"a": "\U0001f600"}, {"b": True}]),
    b'{"request_hash":"sha256:' + b"d" * 64 + b'","response":{"k":-0},"schema_version":1}',
]
CEILINGS = [Ceilings(), Ceilings(max_depth=3, max_response_bytes=40, max_entries=2)]
ALPHABET = b'{}[]",:0123456789-.eE\\u \t\r\nabf\xff\xf0\x9f'


def check(data: bytes, ceilings: Ceilings) -> None:
    error: FixtureError | None = None
    try:
        fixture = parse_fixture(data, ceilings)
    except FixtureError as exc:
        error = exc
    if error is not None:
        assert error.reason in FIXTURE_REASONS
        assert error.line is not None and 1 <= error.line <= data.count(b"\n") + 1
        assert error.__context__ is None
    else:
        assert fixture.snapshot()["entries"] == len(fixture)
        for request_hash in fixture.request_hashes():
            stored = fixture.stored(request_hash)
            for item in (stored,) if isinstance(stored, bytes) else stored or ():
                msgspec.json.decode(item)
    found: list[tuple[str, int]] = []

    def keep(reason: str, number: int) -> bool:
        found.append((reason, number))
        return True

    _Parser(ceilings).run(data, keep)
    assert all(reason in FIXTURE_REASONS for reason, _ in found)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300), st.sampled_from(CEILINGS))
def test_arbitrary_bytes(data: bytes, ceilings: Ceilings) -> None:
    check(data, ceilings)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(st.sampled_from(VALID), min_size=1, max_size=4))
    data = bytearray(b"\n".join(lines))
    for _ in range(draw(st.integers(0, 4))):
        index = draw(st.integers(0, len(data)))
        op = draw(st.integers(0, 2))
        if op == 0 and index < len(data):
            del data[index]
        elif op == 1 and index < len(data):
            data[index] = draw(st.sampled_from(ALPHABET))
        else:
            data.insert(index, draw(st.sampled_from(ALPHABET)))
    return bytes(data)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(), st.sampled_from(CEILINGS))
def test_mutated_valid_lines(data: bytes, ceilings: Ceilings) -> None:
    check(data, ceilings)


# -- the bulk pass agrees with the line-by-line pass ---------------------------------------

_KEYS = st.sampled_from(["a", "b", 'q"', "\\", "\u00e9", "k"])
_TEXT = st.text(alphabet='ab"\\\u00e9\U0001f600 ', max_size=6)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=8,
)


@st.composite
def spaced_files(draw: st.DrawFn) -> bytes:
    """A fixture in ``json.dumps``' layout; some quotes written ``\\u0022``, and maybe a
    key repeated in one response (with escaped quotes beside it)."""
    count = draw(st.integers(1, 5))
    lines = []
    for i in range(count):
        response = draw(st.dictionaries(_KEYS, _JSON, max_size=4))
        entry = {"schema_version": 1, "request_hash": f"sha256:{i:064x}", "response": response}
        line = json.dumps(entry)
        if draw(st.booleans()):
            line = line.replace('\\"', "\\u0022")
        if response and draw(st.integers(0, 3)) == 0:
            key = json.dumps(draw(st.sampled_from(sorted(response))))
            value = draw(st.sampled_from(['"\\u0022\\u0022"', "1", '"x"', "[]"]))
            line = line.replace('"response": {', f'"response": {{{key}: {value}, ', 1)
        lines.append(line.encode())
    return b"\n".join(lines) + b"\n"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spaced_files())
def test_the_bulk_pass_agrees_with_the_line_by_line_pass(data: bytes) -> None:
    """Whatever the bulk pass accepts, the exact pass accepts with the same responses;
    a file the exact pass rejects (a repeated key) the bulk pass never accepts."""
    parser = _Parser(Ceilings())
    rejections: list[tuple[str, int]] = []

    def keep(reason: str, line: int) -> bool:
        rejections.append((reason, line))
        return True

    valid = parser.run(data, keep)
    bulk = _bulk_table(data, Ceilings())
    event("bulk: " + ("declined" if bulk is None else "accepted"))
    event("exact: " + (rejections[0][0] if rejections else "valid"))
    if bulk is None:
        return
    assert valid and not rejections
    table, responses = bulk
    assert sorted(table) == sorted(parser.table)
    exact = FixtureSet(parser.table, Ceilings())
    for request_hash, index in table.items():
        assert responses[~index] == exact.stored(request_hash)
