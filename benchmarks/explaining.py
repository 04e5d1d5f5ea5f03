"""E1: ``explain`` of a miss against a 10,000-entry request sidecar.

The sidecar holds 10,000 realistic requests (system prompt, 20 messages, 5 tools,
~17 KB each) that differ only in their last message, the hardest case for the ranking:
every entry shares the first 20 messages with the missing request, so all 10,000 tie on
the first criterion and each one's differing paths must be counted. The missing request
changes the last message and one parameter.

The target is absolute (an author waits for it): well under a second, read as at most
half of one. Shown beside it for scale: reading the file and decoding every line into
Python objects with msgspec, which explain avoids (it decodes raw slices, compares bytes,
and decodes only where they differ).
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

import msgspec

from replay_actor.authoring.nearest import find_nearest
from replay_actor.files.sidecar import sidecar_line

from .timing import Config, Row, Stats, interleave
from .workload import cache_dir, realistic_request

__all__ = ["ENTRIES", "run_explain", "sidecar"]

ENTRIES = 10_000


def sidecar(entries: int = ENTRIES) -> Path:
    """A sidecar of ``entries`` realistic requests (cached between runs)."""
    from replay_actor._request import canonical_request, request_hash

    path = cache_dir() / f"sidecar-{entries}.requests.jsonl"
    if path.exists():
        return path
    base = realistic_request()
    lines = []
    for i in range(entries):
        request = copy.deepcopy(base)
        request["messages"][-1]["content"] = f"[interaction {i}] " + base["messages"][-1]["content"]
        lines.append(sidecar_line(request_hash(request), canonical_request(request)))
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(b"".join(lines))
    tmp.replace(path)
    return path


def missing_request() -> dict[str, object]:
    request = realistic_request()
    request["messages"][-1]["content"] = "[interaction 4242] a question never recorded"
    request["params"]["temperature"] = 0.2
    return request


def run_explain(cfg: Config) -> list[Row]:
    path = sidecar()
    size = path.stat().st_size
    request = missing_request()
    decode = msgspec.json.decode

    def ours() -> float:
        start = time.perf_counter()
        nearest = find_nearest(path, request)
        elapsed = time.perf_counter() - start
        assert nearest is not None and len(nearest.differences) == 2, nearest
        return elapsed

    def floor() -> float:
        start = time.perf_counter()
        with open(path, "rb") as handle:
            data = handle.read()
        for line in data.splitlines():
            decode(line)
        return time.perf_counter() - start

    samples = interleave({"ours": ours, "floor": floor}, reps=cfg.rounds(7, 2), warmup=1)
    mine = Stats.of(samples["ours"])
    base = Stats.of(samples["floor"])
    return [
        Row(
            id="E1",
            what=(
                f"explain a miss, {ENTRIES:,}-entry sidecar ({size / 1e6:.0f} MB):"
                f" {mine.median * 1e3:.0f} ms (target: well under 1 s)"
            ),
            unit="s",
            ours=mine,
            reference=base,
            reference_name="read + msgspec.json.decode per line (for scale)",
            ratio=mine.median / 1.0,
            ratio_means="seconds per explain / 1 s",
            op="<=",
            bound=0.5,
        )
    ]
