"""Run logs written line by line in the writer's own format (``LogLine``, the sidecar's
``sidecar_line``), for tests of ``compare`` that need exact control over the order in
which concurrent samples' calls reach a log."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from replay_actor._request import canonical_request, request_hash
from replay_actor.attribution.log import LogLine
from replay_actor.files.sidecar import sidecar_line

__all__ = ["Call", "conversation", "interleave", "write_log"]

#: One call: its request, its outcome, and (optionally) its eval row.
Call = tuple[dict[str, Any], str, dict[str, Any] | None]

SYSTEM = {"role": "system", "content": "Answer with the number only."}


def conversation(
    question: str,
    answers: Sequence[str] = (),
    *,
    scope: dict[str, Any] | None = None,
    outcome: str = "served",
    row: dict[str, Any] | None = None,
) -> list[Call]:
    """A sample: its first request asks ``question``; each later call adds the previous
    answer and a follow-up. Every call gets ``outcome``."""
    messages: list[dict[str, Any]] = [SYSTEM, {"role": "user", "content": question}]
    calls: list[Call] = []
    for turn in range(len(answers) + 1):
        request: dict[str, Any] = {"messages": [dict(m) for m in messages]}
        if scope is not None:
            request["scope"] = scope
        calls.append((request, outcome, row))
        if turn < len(answers):
            messages.append({"role": "assistant", "content": answers[turn]})
            messages.append({"role": "user", "content": f"And then? ({turn + 1})"})
    return calls


def interleave(samples: Sequence[Sequence[Call]], seed: int) -> list[Call]:
    """The samples' calls merged in a random order that keeps each sample's own order
    (what concurrent samples do to a log)."""
    rng = random.Random(seed)
    queues = [list(sample) for sample in samples if sample]
    out: list[Call] = []
    while queues:
        queue = rng.choice(queues)
        out.append(queue.pop(0))
        if not queue:
            queues.remove(queue)
    return out


def write_log(path: Path, calls: Sequence[Call], *, sidecar: bool = True) -> Path:
    """``calls`` as a run log (and its request sidecar), in this order."""
    encode = msgspec.json.Encoder().encode
    lines, requests, seen = [], [], set()
    for seq, (request, outcome, row) in enumerate(calls, 1):
        digest = request_hash(request)
        line = LogLine(
            seq,
            1_700_000_000.0 + seq,
            outcome,
            4242,
            "replay",
            scope=request.get("scope"),
            request_hash=digest,
            line=seq if outcome == "served" else None,
            row=row,
        )
        lines.append(encode(line) + b"\n")
        if digest not in seen:
            seen.add(digest)
            requests.append(sidecar_line(digest, canonical_request(request)))
    path.write_bytes(b"".join(lines))
    if sidecar:
        Path(f"{path}.requests.jsonl").write_bytes(b"".join(requests))
    return path
