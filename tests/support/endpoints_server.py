"""A real HTTP server speaking the vendors' wire formats for the endpoints beyond chat
(docs/embeddings.md, docs/ollama.md), for the record tests.

It binds 127.0.0.1 on a free port and answers by path, as the vendor does:

==================================  ====================================================
``…/v1/embeddings``                 OpenAI embeddings: one float32 vector per input, in
                                    base64 (little-endian) when asked, else numbers
``…/v1/completions``                a ``text_completion``: ``"echo: " + prompt``
``…/v1/responses/input_tokens``     ``{"object": "response.input_tokens", ...}``
``…/v1/messages/count_tokens``      Anthropic's ``{"input_tokens": N}``
``…:batchEmbedContents``            Gemini's ``{"embeddings": [{"values": [...]}]}``
``…:countTokens``                   Gemini's ``{"totalTokens": N}``
``/api/chat``, ``/api/generate``    Ollama's answers (``stream: false`` only: the
``/api/embed``                      adapter never streams)
==================================  ====================================================

Vectors are float32 values that have no short decimal spelling (each is a float32
rounding of a number derived from the text's sha256), so a test can tell a float32-exact
replay from a rounded one. Counts are the length of the request's JSON body.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.chat_server import JSONHandler, LoopbackServer

DIMENSIONS = 8


def vector(text: str, dimensions: int = DIMENSIONS) -> list[float]:
    """The deterministic float32 vector the server gives ``text``."""
    digest = hashlib.sha256(text.encode()).digest()
    raw = [(digest[i % 32] - 127.5) / 97.0 for i in range(dimensions)]
    return list(struct.unpack(f"<{dimensions}f", struct.pack(f"<{dimensions}f", *raw)))


def _count(body: Any) -> int:
    return len(json.dumps(body, sort_keys=True))


def _openai_embeddings(body: dict[str, Any]) -> dict[str, Any]:
    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
    dims = body.get("dimensions", DIMENSIONS)
    as_base64 = body.get("encoding_format") == "base64"
    data = []
    for i, text in enumerate(texts):
        values = vector(text, dims)
        packed = base64.b64encode(struct.pack(f"<{dims}f", *values)).decode()
        data.append(
            {"object": "embedding", "index": i, "embedding": packed if as_base64 else values}
        )
    data.reverse()  # the API's order is by index, not by position: read by index
    tokens = sum(len(t.split()) for t in texts)
    return {
        "object": "list",
        "data": data,
        "model": body["model"],
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def _ollama(path: str, body: dict[str, Any]) -> dict[str, Any]:
    head = {"model": body.get("model"), "created_at": "2026-01-01T00:00:00Z", "done": True}
    counts = {"prompt_eval_count": _count(body), "eval_count": 3}
    if path.endswith("/api/embed"):
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        return {"model": body.get("model"), "embeddings": [vector(t) for t in texts]}
    if path.endswith("/api/generate"):
        return {**head, "response": "echo: " + body["prompt"], "done_reason": "stop", **counts}
    last = body["messages"][-1]["content"]
    message = {"role": "assistant", "content": "echo: " + last}
    return {**head, "message": message, "done_reason": "stop", **counts}


def answer(path: str, body: dict[str, Any]) -> dict[str, Any] | None:
    """The vendor's answer to ``body`` posted at ``path`` (None: not served)."""
    if path.endswith("/v1/embeddings"):
        return _openai_embeddings(body)
    if path.endswith("/v1/completions"):
        text = "echo: " + body["prompt"]
        usage = {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}
        choice = {"text": text, "index": 0, "logprobs": None, "finish_reason": "stop"}
        return {
            "id": "cmpl-1",
            "object": "text_completion",
            "created": 7,
            "model": body["model"],
            "choices": [choice],
            "usage": usage,
        }
    if path.endswith("/v1/responses/input_tokens"):
        return {"object": "response.input_tokens", "input_tokens": _count(body)}
    if path.endswith("/v1/messages/count_tokens"):
        return {"input_tokens": _count(body)}
    if path.endswith(":batchEmbedContents"):
        return {
            "embeddings": [
                {"values": vector(r["content"]["parts"][0]["text"])} for r in body["requests"]
            ]
        }
    if path.endswith(":countTokens"):
        return {"totalTokens": _count(body)}
    if path.startswith("/api/"):
        return _ollama(path, body)
    return None


class _Handler(JSONHandler):
    def do_POST(self) -> None:
        got, _ = self._receive()
        made = answer(self.path.split("?")[0], got.body) if isinstance(got.body, dict) else None
        if made is None:
            self._send(404, b'{"error": "not served"}')
            return
        self._send(200, json.dumps(made).encode())


class EndpointsServer(LoopbackServer):
    """The server and its thread; use as a context manager (or ``close()``)."""

    handler = _Handler
    name = "endpoints-server"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
def endpoints_server() -> Iterator[EndpointsServer]:
    """A running server for one test, stopped (and its thread joined) afterwards."""
    server = EndpointsServer()
    try:
        yield server
    finally:
        server.close()
    assert not server.alive
