"""P6: fixture load throughput vs raw ``msgspec.json.decode`` of every line.

Both sides read the same 100k-line file from disk each time (reading included) and are
measured interleaved. The reference does no validation at all: it is the floor for
"parse each line once".
"""

from __future__ import annotations

import time
from pathlib import Path

import msgspec

from replay_actor import load_fixture

from .timing import Config, Row, Stats, interleave
from .workload import fixture

__all__ = ["load_seconds", "raw_decode_seconds", "run_loading"]


def load_seconds(path: Path) -> float:
    """Seconds to load a 100,000-entry fixture (our side of P6 and P6b)."""
    start = time.perf_counter()
    loaded = load_fixture(path)
    elapsed = time.perf_counter() - start
    assert len(loaded) == 100_000
    return elapsed


def raw_decode_seconds(path: Path) -> float:
    """Seconds to read a file and ``msgspec.json.decode`` each line that is not blank
    (the floor of P6, P6b and P6c): a blank line costs nothing (only a line that fails
    to decode is looked at), so the floor of a file with blank lines is not slowed."""
    decode = msgspec.json.decode
    error = msgspec.DecodeError
    start = time.perf_counter()
    with open(path, "rb") as f:
        data = f.read()
    for line in data.splitlines():
        try:
            decode(line)
        except error:
            if line.strip():
                raise
    return time.perf_counter() - start


def run_loading(cfg: Config) -> list[Row]:
    path = fixture(100_000)
    size = path.stat().st_size

    def ours() -> float:
        return load_seconds(path)

    def raw() -> float:
        return raw_decode_seconds(path)

    samples = interleave({"ours": ours, "raw": raw}, reps=cfg.rounds(7, 2), warmup=1)
    mine = Stats.of(samples["ours"])
    floor = Stats.of(samples["raw"])
    return [
        Row(
            id="P6",
            what=(
                f"fixture load, 100k lines ({size / 1e6:.1f} MB):"
                f" {size / 1e6 / mine.median:.0f} MB/s"
                f" vs {size / 1e6 / floor.median:.0f} MB/s"
            ),
            unit="s",
            ours=mine,
            reference=floor,
            reference_name="read + msgspec.json.decode per line",
            ratio=floor.median / mine.median,
            ratio_means="throughput share (raw time / ours)",
            op=">=",
            bound=0.5,
        )
    ]
