"""Embedding vectors carried raw: float32 from the actor to the caller, exactly.

A caller that takes vectors raw (``RAW_VECTORS``: the serving layer, for an embedding
request) asks ``COMPLETE_VECTORS``; the actor answers ``VECTORS`` with the float32
bytes of a response whose vectors float32 holds exactly, and as ``COMPLETE`` is
answered otherwise. Nothing changes for anyone else: the values, the cursors, the
counters and the inspection record are those of a ``COMPLETE``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
import struct
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replay_actor import SequenceExhausted, acquire, canonical_json, entry_line, request_hash
from replay_actor._response import RAW_VECTORS, read_response
from replay_actor.replay.core import protocol
from replay_actor.replay.core.state import HandleState
from replay_actor.serving import AsyncServing, Call, Exchange, Serving

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(120)]

MODEL = "text-embedding-3-small"


def exact_vector(rng: random.Random, size: int, top: int = 0) -> list[float]:
    """Numbers float32 holds exactly, as a vector recorded from base64 is stored (a
    model's are within [-1, 1]: ``top`` the largest power of ten)."""
    raw = [rng.uniform(-1.0, 1.0) * 10 ** rng.randint(-40, top) for _ in range(size)]
    # Zero, one, float32's largest or smallest; -0.0 where no fixture stores it (RFC 8785
    # writes it 0, so a fixture's vector never holds it).
    edges = [0.0, 1.0, 3.4028234663852886e38, -0.0] if top > 21 else [0.0, 1.0, 2**-149]
    raw[: len(edges)] = edges[:size]
    return list(struct.unpack(f"<{size}f", struct.pack(f"<{size}f", *raw)))


def same_bits(got: list[float], want: list[float]) -> bool:
    return struct.pack(f"<{len(got)}f", *got) == struct.pack(f"<{len(want)}f", *want)


@pytest.fixture
def raw() -> Iterator[None]:
    token = RAW_VECTORS.set(True)
    try:
        yield
    finally:
        RAW_VECTORS.reset(token)


# -- the protocol ---------------------------------------------------------------------------


def test_a_vectors_reply_round_trips_float32_exactly() -> None:
    rng = random.Random(7)
    vectors = [exact_vector(rng, size, top=38) for size in (1536, 1536, 7, 1)]
    response = {"embeddings": vectors, "usage": {"prompt_tokens": 9, "total_tokens": 9}}
    stored = canonical_json(response)
    payload = protocol.vectors_reply(stored)
    assert payload[:1] == protocol.VECTORS
    # Raw float32: a fraction of the JSON text's size.
    assert len(payload) < len(stored) / 3
    got = protocol.decode_reply(payload, None, HandleState("test"))
    assert isinstance(got, dict)
    assert got["usage"] == response["usage"]
    assert [type(v) for v in got["embeddings"]] == [array] * 4
    # The very values the JSON reading of the stored bytes gives, as numbers (RFC 8785
    # writes -0.0 as 0 and a whole float as digits, which read back as the same double).
    read = [[float(x) for x in vector] for vector in json.loads(stored)["embeddings"]]
    for carried, want in zip(got["embeddings"], read, strict=True):
        assert same_bits(carried.tolist(), want)
        assert carried.tolist() == want


@pytest.mark.parametrize(
    "embeddings",
    [
        [[0.1, 0.2]],  # doubles float32 does not hold exactly
        [[1e39]],  # beyond float32's range
        [[True, 0.5]],  # not numbers
        [["0.5"]],
        [0.5, 0.25],  # not vectors
        [],
        None,
    ],
)
def test_what_float32_cannot_hold_is_answered_as_stored(embeddings: Any) -> None:
    """Not vectors of float32-exact numbers: the usual reply, so the usual reading
    (its values, or its ``Unexpressible``) follows, whatever the stored text."""
    stored = canonical_json({"embeddings": embeddings, "content": None})
    assert protocol.vectors_reply(stored) == protocol.RESPONSE + stored


def test_a_vectors_reply_cut_short_breaks_the_handle() -> None:
    payload = protocol.vectors_reply(canonical_json({"embeddings": [[0.5, 0.25]]}))
    state = HandleState("test")
    got = protocol.decode_reply(payload[:-1], "sha256:" + "0" * 64, state)
    assert not isinstance(got, dict)
    assert state.broken


def _vectors_payload(head: dict[str, Any], raw: bytes) -> bytes:
    encoded = json.dumps(head).encode()
    return protocol.VECTORS + len(encoded).to_bytes(4, "big") + encoded + raw


@pytest.mark.parametrize(
    "payload",
    [
        _vectors_payload({"embeddings": [2]}, b"\0" * 12),  # bytes left over
        _vectors_payload({"embeddings": [3]}, b"\0" * 8),  # bytes missing
        _vectors_payload({"embeddings": [-1, 3]}, b"\0" * 8),  # a negative length
        _vectors_payload({"embeddings": ["2"]}, b"\0" * 8),  # not a length
        _vectors_payload({"embeddings": [1.5]}, b"\0" * 6),
        _vectors_payload({"embeddings": 2}, b"\0" * 8),  # not a list
        _vectors_payload({"usage": {}}, b""),  # no vectors
        protocol.VECTORS + (1000).to_bytes(4, "big") + b"{}",  # a head cut short
        protocol.VECTORS + (2).to_bytes(4, "big") + b"[]",  # not an object
        protocol.VECTORS + b"\0\0",  # no head at all
    ],
)
def test_a_malformed_vectors_reply_breaks_the_handle(payload: bytes) -> None:
    """Whatever a broken actor sends as ``VECTORS`` is never read as a response."""
    state = HandleState("test")
    got = protocol.decode_reply(payload, "sha256:" + "0" * 64, state)
    assert not isinstance(got, dict)
    assert state.broken


def test_read_response_keeps_raw_vectors() -> None:
    vectors = [array("f", [0.5, 0.25])]
    reading = read_response({"embeddings": vectors, "usage": {"prompt_tokens": 1}})
    kept: object = reading.embeddings
    assert kept is vectors
    assert reading.usage == {"prompt_tokens": 1}


# -- through an actor -------------------------------------------------------------------------


def _request(i: int) -> dict[str, Any]:
    return {"kind": "embedding", "model": MODEL, "texts": [f"text {i}", f"more {i}"]}


@pytest.fixture
def fixture_path(tmp_path: Path) -> Path:
    rng = random.Random(11)
    single = {"embeddings": [exact_vector(rng, 64), exact_vector(rng, 64)], "usage": {"t": 1}}
    steps = [{"embeddings": [exact_vector(rng, 8), exact_vector(rng, 8)]} for _ in range(2)]
    inexact = {"embeddings": [[0.1, 0.2], [0.3, 0.4]]}
    path = tmp_path / "embeddings.jsonl"
    path.write_bytes(
        b"\n".join(
            [
                entry_line(request_hash(_request(0)), response=single),
                entry_line(request_hash(_request(1)), responses=steps),
                entry_line(request_hash(_request(2)), response=inexact),
            ]
        )
        + b"\n"
    )
    (tmp_path / "expected.json").write_text(json.dumps([single, steps, inexact]))
    return path


def _as_lists(response: dict[str, Any]) -> dict[str, Any]:
    vectors = response["embeddings"]
    return {**response, "embeddings": [list(v) for v in vectors]}


@pytest.mark.usefixtures("raw")
def test_an_actor_carries_vectors_raw_with_the_same_semantics(
    fixture_path: Path, tmp_path: Path
) -> None:
    single, steps, inexact = json.loads((tmp_path / "expected.json").read_text())
    inspection = tmp_path / "inspection.jsonl"
    with acquire(fixture_path, inspection_path=inspection) as llm:
        for _ in range(3):  # the first converts, the later ones reuse the conversion
            got = llm.complete(_request(0))
            assert [type(v) for v in got["embeddings"]] == [array, array]
            assert _as_lists(got) == single
        assert _as_lists(llm.complete(_request(1))) == steps[0]
        assert _as_lists(asyncio.run(llm.acomplete(_request(1)))) == steps[1]
        with pytest.raises(SequenceExhausted):
            llm.complete(_request(1))
        for _ in range(2):  # the second is known not to convert
            plain = llm.complete(_request(2))  # not float32-exact: as stored, lists
            assert plain == inexact
            assert all(type(v) is list for v in plain["embeddings"])
        counters = llm.snapshot()
        assert (counters["served"], counters["exhausted"]) == (7, 1)
        assert llm.inspect()["unused_entries"] == 0


def test_without_the_wish_vectors_are_lists(fixture_path: Path, tmp_path: Path) -> None:
    single, _, _ = json.loads((tmp_path / "expected.json").read_text())
    with acquire(fixture_path) as llm:
        got = llm.complete(_request(0))
        assert got == single
        assert all(type(v) is list for v in got["embeddings"])


@pytest.mark.parametrize("encoding", ["base64", "float"])
def test_the_openai_answer_is_the_same_either_way(
    fixture_path: Path, tmp_path: Path, encoding: str
) -> None:
    """Through the serving layer (which asks for raw vectors) the OpenAI answer is byte
    for byte the one the JSON reading gives, sync and async."""
    single, _, _ = json.loads((tmp_path / "expected.json").read_text())
    body = json.dumps(
        {"model": MODEL, "input": _request(0)["texts"], "encoding_format": encoding}
    ).encode()
    with acquire(fixture_path) as llm:
        sync = Serving(llm, "openai", release_on_close=False)
        answers = [sync.serve("POST", "/v1/embeddings", body)]
        served = AsyncServing(llm, "openai", release_on_close=False)
        answers.append(asyncio.run(served.serve("POST", "/v1/embeddings", body)))
    for answer in answers:
        assert answer.status == 200
        data = json.loads(answer.body)["data"]
        for item, vector in zip(data, single["embeddings"], strict=True):
            if encoding == "float":
                assert item["embedding"] == vector
            else:
                raw = base64.b64decode(item["embedding"])
                assert raw == struct.pack(f"<{len(vector)}f", *vector)
    assert answers[0].body == answers[1].body
    # The answer the lists of the stored JSON give, byte for byte.
    call = Exchange("openai").prepare("POST", "/v1/embeddings", body)
    assert isinstance(call, Call)
    assert answers[0].body == call.answer(single).body


def _gemini_body() -> dict[str, Any]:
    texts = _request(0)["texts"]
    return {"requests": [{"content": {"parts": [{"text": text}]}} for text in texts]}


@pytest.mark.parametrize(
    ("api", "path", "body"),
    [
        ("gemini", f"/v1beta/models/{MODEL}:batchEmbedContents", _gemini_body()),
        ("ollama", "/api/embed", {"model": MODEL, "input": _request(0)["texts"]}),
    ],
)
def test_other_shapes_answer_raw_vectors_as_lists(
    fixture_path: Path, tmp_path: Path, api: str, path: str, body: dict[str, Any]
) -> None:
    """Every embedding shape answers from vectors carried raw as from the stored lists."""
    single, _, _ = json.loads((tmp_path / "expected.json").read_text())
    encoded = json.dumps(body).encode()
    call = Exchange(api).prepare("POST", path, encoded)
    assert isinstance(call, Call)
    assert call.request == _request(0)
    with acquire(fixture_path) as llm:
        answer = Serving(llm, api, release_on_close=False).serve("POST", path, encoded)
    assert answer.status == 200
    assert answer.body == call.answer(single).body
