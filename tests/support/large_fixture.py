"""Large fixtures for the loader's fast paths and the holder: numbered requests, answers
with escapes and astral characters, and a file over the zygote's cache bound in either
layout (compact, or ``json.dumps``' default)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from replay_actor import entry_line, request_hash
from replay_actor.replay.forked.zygote import CACHE_ENTRY_BYTES


def ask(i: int) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": f"question {i}"}]}


def response(i: int, tag: str = "one") -> dict[str, Any]:
    # Keys out of order, escapes, an astral character, a quote and a backslash.
    return {
        "usage": {"total_tokens": i, "prompt_tokens": 3},
        "content": f'answer {i} {tag} caf\u00e9 \U0001f600 "quoted" back\\slash ' + "x" * 900,
        "finish_reason": "stop",
    }


def dumps_line(entry: dict[str, Any]) -> bytes:
    return json.dumps(entry).encode("ascii")  # the defaults: ", " and ": ", \\u escapes


def write_large(
    path: Path, tag: str = "one", layout: str = "compact", entries: int = 2_200
) -> None:
    """A fixture over the zygote's cache bound (2,200 entries: 2.3 MB), so a holder
    keeps it."""
    lines = []
    for i in range(entries):
        digest = request_hash(ask(i))
        if layout == "compact":
            line = entry_line(digest, response=response(i, tag))
        else:
            line = dumps_line(
                {"response": response(i, tag), "request_hash": digest, "schema_version": 1}
            )
        lines.append(line)
    path.write_bytes(b"\n".join(lines) + b"\n")
    assert path.stat().st_size > CACHE_ENTRY_BYTES
