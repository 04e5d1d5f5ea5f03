"""Embedding texts and vectors, shared by every embedding shape (docs/embeddings.md): the
texts of an ``input`` (a string or an array of strings: OpenAI's and Ollama's), reading
the stored vectors of a neutral response, float32 little-endian base64 both ways, and a
live answer's vectors checked.

A vector is stored as JSON numbers. One recorded from base64 holds each float32 exactly
(a float32 is exactly a double), so packing it again as float32 gives the recorded bytes:
OpenAI's ``encoding_format: "base64"`` and ``"float"`` are both served from one entry.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
import sys
from array import array
from typing import Any, Final

from .._errors import RequestError
from .._response import Response, Unexpressible
from ._common import MalformedResponse

__all__ = ["float32_base64", "from_base64", "live_vector", "read_texts", "stored_vectors"]

#: OpenAI's base64 vectors are little-endian float32; ``array`` holds the machine's order.
_SWAP: Final = sys.byteorder == "big"


def read_texts(value: Any, where: str = "input") -> list[str]:
    """A string or an array of strings as the texts to embed; ``RequestError`` else."""
    if type(value) is str:
        return [value]
    if type(value) is not list or not value:
        raise RequestError(f"{where} must be a string or a non-empty array of strings")
    for i, item in enumerate(value):
        if type(item) is not str:
            raise RequestError(
                f"{where}[{i}] must be a string (token arrays cannot be replayed or recorded)"
            )
    return list(value)


def stored_vectors(response: Response, texts: int, *, raw: bool = False) -> list[Any]:
    """The stored vectors, one per text; ``Unexpressible`` when the entry holds none or
    a different number (an entry recorded for another request shape). Vectors carried
    raw (``array("f")``, ``_response.RAW_VECTORS``) stay so with ``raw`` (for
    ``float32_base64``), else become lists of their float32 values, exactly."""
    vectors: list[Any] | None = response.embeddings
    if vectors is None:
        raise Unexpressible("the stored response holds no embeddings")
    if len(vectors) != texts:
        raise Unexpressible(
            f"the stored response holds {len(vectors)} embeddings for {texts} input texts"
        )
    if not raw and vectors and type(vectors[0]) is array:
        return [vector.tolist() for vector in vectors]
    return vectors


def float32_base64(vector: list[float] | array[float]) -> str:
    """``vector`` as little-endian float32 bytes in base64 (OpenAI's ``base64``);
    ``Unexpressible`` for a value float32 cannot hold. A vector carried raw is its
    bytes already (no packing)."""
    if type(vector) is array:
        if _SWAP:
            vector = array("f", vector)
            vector.byteswap()
        return base64.b64encode(vector).decode("ascii")
    try:
        packed = struct.pack(f"<{len(vector)}f", *vector)
    except (OverflowError, struct.error):
        packed = b""
    else:
        return base64.b64encode(packed).decode("ascii")
    raise Unexpressible("a stored embedding value is out of float32 range")


def from_base64(text: str) -> list[float]:
    """A base64 float32 vector as numbers; ``MalformedResponse`` if it is not one."""
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raw = b"\x00"  # not base64: reported below, outside the except block
    if len(raw) % 4:
        raise MalformedResponse("an embedding is not base64 float32")
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


def live_vector(value: Any) -> list[float]:
    """A live answer's vector (numbers, or base64 float32), checked."""
    if isinstance(value, str):
        return from_base64(value)
    if not isinstance(value, list) or not all(
        type(x) in (int, float) and math.isfinite(x) for x in value
    ):
        raise MalformedResponse("an embedding is not an array of numbers")
    return [float(x) for x in value]
