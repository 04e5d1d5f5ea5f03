"""The core of the replay path: config, opcodes, framing and reply decoding. No I/O.

Runs in: the caller (every handle and driver: ``SyncLink``, ``AsyncLink``, the batch
pipeline, the Ray backend), the zygote (decodes the config) and the actor.

This module is to the drivers what h11 is to httpx: it says what bytes mean, and the
drivers only move bytes. Every message is one frame (a 4-byte big-endian length, then
the payload, ``frame``) whose first byte is the opcode; ``split_frames`` is the one
place a byte stream is cut into frames (the sync channel, the event loop's link, the
pipeline and the actor all use it), and ``decode_reply`` the one place a reply to
``COMPLETE`` becomes the response dict or the ``ReplayError`` the caller raises (the
lifecycle errors come from ``state.HandleState``, which owns their messages).

On the bootstrap channel the acquirer's first frame is the ``ActorConfig`` (JSON) and
the actor answers once with ``READY``, ``FIXTURE_REJECTED`` or ``FAILED``. After that,
on every channel, each request gets exactly one reply, in order; the table is
docs/architecture.md, "Wire protocol".
"""

from __future__ import annotations

import struct
import sys
from array import array
from typing import Annotated, Any, Final

import msgspec

from ..._errors import ReplayError, ReplayMiss, SequenceExhausted
from ...fixture import EXHAUSTED as _EXHAUSTED
from ...fixture import Outcome
from .state import UNEXPECTED, HandleState

__all__ = [
    "COMPLETE",
    "COMPLETE_VECTORS",
    "EXHAUSTED",
    "FAILED",
    "FIXTURE_REJECTED",
    "GOODBYE",
    "INSPECT",
    "JSON",
    "MISS",
    "READY",
    "RELEASE",
    "RELEASED",
    "RESPONSE",
    "SNAPSHOT",
    "VECTORS",
    "MAX_REQUEST",
    "MAX_UNREAD",
    "COMPLETE_REPLIES",
    "ActorConfig",
    "complete_frame",
    "complete_request",
    "decode_reply",
    "decode_failure",
    "decode_json",
    "decode_rejection",
    "failed",
    "fixture_rejected",
    "frame",
    "json_reply",
    "outcome_reply",
    "ready",
    "split_frames",
    "payload_size",
    "vectors_frame",
    "vectors_reply",
]

# -- bootstrap replies (actor -> acquirer, once) ------------------------------------------
READY: Final = b"OK"  #: + the listener's address
FIXTURE_REJECTED: Final = b"FE"  #: + JSON ``[reason, line]``
FAILED: Final = b"ER"  #: + a message (a dead owner, an unusable inspection path)

# -- requests (handle -> actor) ------------------------------------------------------------
COMPLETE: Final = b"C"  #: + ``sha256:…``
#: + ``sha256:…``: ``COMPLETE``, with a response's embeddings carried as raw float32
COMPLETE_VECTORS: Final = b"V"
SNAPSHOT: Final = b"S"
INSPECT: Final = b"I"
RELEASE: Final = b"Q"  #: on the bootstrap channel this ends the acquisition

# -- replies (actor -> handle) ---------------------------------------------------------------
RESPONSE: Final = b"R"  #: + the response's canonical JSON bytes
#: + a 4-byte length, the response's JSON with each vector as its length, then every
#: vector's float32 little-endian bytes (``vectors_reply``)
VECTORS: Final = b"W"
MISS: Final = b"M"
EXHAUSTED: Final = b"X"
JSON: Final = b"J"  #: + a JSON document (snapshot, inspection)
RELEASED: Final = b"K"
GOODBYE: Final = b"Z"  #: unsolicited: the acquisition was released by its acquirer

# -- limits the actor enforces per peer (docs/architecture.md, "Wire protocol") ------------
#: The largest request frame's payload; a longer length prefix drops that peer alone.
MAX_REQUEST: Final = 4096
#: Replies a peer has not read, in bytes, beyond which that peer alone is dropped.
MAX_UNREAD: Final = 64 * 1024 * 1024

#: The replies that may answer a ``COMPLETE`` or ``COMPLETE_VECTORS``; anything else
#: breaks the connection.
COMPLETE_REPLIES: Final = frozenset({RESPONSE, VECTORS, MISS, EXHAUSTED})
_R: Final = RESPONSE[0]
_W: Final = VECTORS[0]
_M: Final = MISS[0]
_X: Final = EXHAUSTED[0]
_Z: Final = GOODBYE[0]

_encode: Final = msgspec.json.Encoder().encode
_decode: Final = msgspec.json.decode
#: The wire's float32 are little-endian; ``array`` writes the machine's order.
_SWAP: Final = sys.byteorder == "big"
#: A ``VECTORS`` head's ``embeddings``: each vector's length.
_LENGTHS: Final = list[Annotated[int, msgspec.Meta(ge=0)]]


class ActorConfig(msgspec.Struct, forbid_unknown_fields=True):
    """What the acquirer sends first over the bootstrap channel (through the zygote)."""

    fixture: str
    owner_pid: int
    owner_create_time: float
    private: bool
    ceilings: dict[str, int]
    inspection_path: str | None
    owner_watch: str = "pidfd"
    inspection_served: bool = False  # also log each hit (for ``replay-actor coverage``)


_size_at: Final = struct.Struct(">I").unpack_from


def frame(payload: bytes) -> bytes:
    """``payload`` as it goes on the wire: a 4-byte big-endian length, then the payload."""
    return len(payload).to_bytes(4, "big") + payload


def split_frames(
    data: bytes | bytearray, pos: int = 0, limit: int = 2**32 - 1, end: int | None = None
) -> tuple[list[tuple[int, int]], int, bool]:
    """Cut ``data[pos:end]`` into whole frames: ``(spans, rest, too_large)``.

    ``spans`` holds each whole frame's payload as ``(start, stop)`` offsets into ``data``,
    in order; ``rest`` is where the unfinished tail begins (keep it for the next read).
    A length prefix over ``limit`` is judged as soon as its 4 bytes are in: the split
    stops before that frame and ``too_large`` is True (the actor drops such a peer
    without buffering the frame). ``end`` (default: all of ``data``) is where the bytes
    received so far end, for a buffer kept larger than what it holds.
    """
    if end is None:
        end = len(data)
    if end - pos >= 4:
        size = _size_at(data, pos)[0]
        if pos + 4 + size == end and size <= limit:  # the common case: one whole frame
            return [(pos + 4, end)], end, False
    spans: list[tuple[int, int]] = []
    while end - pos >= 4:
        size = _size_at(data, pos)[0]  # (no slice made: a frame's header read in place)
        if size > limit:
            return spans, pos, True
        stop = pos + 4 + size
        if stop > end:
            break
        spans.append((pos + 4, stop))
        pos = stop
    return spans, pos, False


def payload_size(header: bytes | bytearray | memoryview) -> int:
    """The payload length a frame's 4-byte header announces."""
    return int.from_bytes(header[:4], "big")


def decode_reply(
    reply: bytes | bytearray | memoryview, shown: str | None, state: HandleState
) -> dict[str, Any] | ReplayError:
    """What a reply to ``COMPLETE`` (or ``COMPLETE_VECTORS``) means for the caller: the
    response (a fresh dict), or the ``ReplayError`` to raise, never raised here.

    ``shown`` is the request hash the error may name (None in private mode). A goodbye
    ends the handle (``ProviderClosed``); any other frame breaks it (``ActorLost``):
    every later reply would be off by one.
    """
    kind = reply[0] if len(reply) else -1
    if kind == _R:
        response: dict[str, Any] = _decode(memoryview(reply)[1:])
        return response
    if kind == _M:
        return ReplayMiss(shown)
    if kind == _X:
        return SequenceExhausted(shown)
    if kind == _Z:
        return state.end()
    # A ``VECTORS`` reply whose lengths match its bytes, or else an unexpected frame.
    vectors = _vectors_response(reply) if kind == _W else None
    return state.lose(UNEXPECTED) if vectors is None else vectors


def _vectors_response(reply: bytes | bytearray | memoryview) -> dict[str, Any] | None:
    """The response a ``VECTORS`` reply carries, its ``embeddings`` as ``array('f')``
    (the float32 values, exact); None for a reply that is not one."""
    view = memoryview(reply)
    size = int.from_bytes(view[1:5], "big")
    raw = view[5 + size :]
    try:
        response: dict[str, Any] = _decode(view[5 : 5 + size], type=dict[str, Any])
        lengths = msgspec.convert(response.get("embeddings"), _LENGTHS)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if len(view) < 5 + size or 4 * sum(lengths) != len(raw):
        return None
    vectors = []
    at = 0
    for length in lengths:
        vector = array("f")
        vector.frombytes(raw[at : at + 4 * length])
        if _SWAP:
            vector.byteswap()
        vectors.append(vector)
        at += 4 * length
    response["embeddings"] = vectors
    return response


def vectors_reply(response: bytes) -> bytes:
    """The reply payload to a ``COMPLETE_VECTORS`` for a stored response (its canonical
    JSON bytes): ``VECTORS`` when its embeddings are a list of vectors of numbers that
    float32 holds exactly (how one recorded from base64 is stored), so the caller copies
    them instead of parsing 24,576 numbers for 16 vectors of 1,536; else ``RESPONSE``, as
    a ``COMPLETE`` is answered."""
    plain = RESPONSE + response
    if response.find(b'"embeddings":[[') < 0:
        return plain
    value = _decode(response)
    try:
        checked = msgspec.convert(value["embeddings"], list[list[float]])
        vectors = [array("f", vector) for vector in checked]
    except (msgspec.ValidationError, OverflowError, TypeError, KeyError):
        return plain  # not vectors of numbers: the usual reply, and the usual reading
    if any(vector.tolist() != exact for vector, exact in zip(vectors, checked, strict=True)):
        return plain  # a value float32 does not hold exactly: kept as stored
    if _SWAP:
        for vector in vectors:
            vector.byteswap()
    value["embeddings"] = [len(vector) for vector in vectors]
    head = _encode(value)
    return b"".join([VECTORS, len(head).to_bytes(4, "big"), head, *map(bytes, vectors)])


def complete_request(request_hash: str) -> bytes:
    """The message asking for the next answer to ``request_hash``."""
    return COMPLETE + request_hash.encode("ascii")


#: A request hash is ``sha256:`` and 64 hex digits: every ``COMPLETE`` frame has this head.
_COMPLETE_HEAD: Final = (1 + 71).to_bytes(4, "big") + COMPLETE


def complete_frame(request_hash: str) -> bytes:
    """``frame(complete_request(request_hash))``, in one step (the hot path's)."""
    encoded = request_hash.encode("ascii")
    if len(encoded) != 71:
        return frame(COMPLETE + encoded)
    return _COMPLETE_HEAD + encoded


def vectors_frame(request_hash: str) -> bytes:
    """The ``COMPLETE_VECTORS`` frame for ``request_hash``."""
    return frame(COMPLETE_VECTORS + request_hash.encode("ascii"))


def outcome_reply(outcome: bytes | Outcome) -> bytes:
    """The reply frame for what ``fixture.Cursors.take`` returned."""
    if type(outcome) is bytes:
        return RESPONSE + outcome
    return EXHAUSTED if outcome is _EXHAUSTED else MISS


def json_reply(value: Any) -> bytes:
    """A ``JSON`` reply frame carrying ``value``."""
    return JSON + _encode(value)


def decode_json(reply: bytes) -> Any:
    """The document of a ``JSON`` reply frame."""
    return _decode(memoryview(reply)[1:])


def decode_rejection(reply: bytes) -> tuple[str, int | None]:
    """``(reason, line)`` of a ``FIXTURE_REJECTED`` bootstrap reply."""
    reason, line = _decode(reply[len(FIXTURE_REJECTED) :])
    return reason, line


def ready(address: bytes) -> bytes:
    """The bootstrap reply of an actor listening on ``address``."""
    return READY + address


def fixture_rejected(reason: str, line: int | None) -> bytes:
    """The bootstrap reply of an actor whose fixture was rejected (reason and line only)."""
    return FIXTURE_REJECTED + _encode([reason, line])


def failed(kind: str, message: str) -> bytes:
    """The bootstrap reply of an actor that cannot serve: what failed (``owner``,
    ``inspection``) and a message for the caller."""
    return FAILED + _encode([kind, message])


def decode_failure(reply: bytes) -> tuple[str, str]:
    """``(kind, message)`` of a ``FAILED`` bootstrap reply."""
    kind, message = _decode(reply[len(FAILED) :])
    return kind, message
