"""P3: replay-actor vs VCR.py playback of recorded chat interactions.

VCR.py runs in its own child (``python -m benchmarks.vcr_peer CASSETTE``) so that a
size whose playback outgrows its time budget can be stopped (by PID) and reported as
not reached, instead of stalling the run. The child loads the cassette once
(``record_mode="none"``, ``match_on=["method", "uri", "body"]``,
``allow_playback_repeats=True`` so the same interaction can be timed repeatedly), then
answers each ``go`` line on stdin with the seconds one ``requests.post`` of the realistic
request took: the last interaction of the cassette, the worst case for VCR.py's scan.
Nothing listens at the cassette's address; playback never touches the network.

The parent interleaves: one VCR.py call, then one batch of ``complete()`` calls on a
replay-actor fixture of the same size, per round.
"""

from __future__ import annotations

import select
import sys
import time
from typing import Any

from replay_actor import acquire

from .procs import start_worker, stop
from .timing import Config, Row, Stats, per_call
from .workload import CHAT_URL, cassette, fixture, realistic_request, request_body

__all__ = ["run_vcr"]

_SIZES = (100, 1_000, 10_000)


def _child_main(path: str) -> None:
    """The VCR.py side, in its own process (see the module docstring)."""
    import requests
    import vcr

    body = request_body()
    headers = {"Content-Type": "application/json"}
    player = vcr.VCR(record_mode="none", match_on=["method", "uri", "body"])
    start = time.perf_counter()
    with player.use_cassette(path, allow_playback_repeats=True), requests.Session() as session:
        print(f"ready {time.perf_counter() - start:.6f}", flush=True)
        for line in sys.stdin:
            if line.strip() != "go":
                break
            start = time.perf_counter()
            response = session.post(CHAT_URL, data=body, headers=headers)
            elapsed = time.perf_counter() - start
            if response.status_code != 200 or b"frozen" not in response.content:
                print("bad", flush=True)
                break
            print(f"{elapsed:.9f}", flush=True)


class _Player:
    """The parent's view of one VCR.py child, every read bounded by a deadline."""

    def __init__(self, path: str) -> None:
        self.popen = start_worker("benchmarks.vcr_peer", path)

    def _line(self, deadline: float) -> str | None:
        out = self.popen.stdout
        assert out is not None
        remaining = deadline - time.perf_counter()
        if remaining <= 0 or not select.select([out], [], [], remaining)[0]:
            return None
        return out.readline().decode().strip() or None

    def ready(self, deadline: float) -> float | None:
        line = self._line(deadline)
        if line is None or not line.startswith("ready "):
            return None
        return float(line.split()[1])

    def call(self, deadline: float) -> float | None:
        stdin = self.popen.stdin
        assert stdin is not None
        stdin.write(b"go\n")
        stdin.flush()
        line = self._line(deadline)
        if line is None or line == "bad":
            return None
        return float(line)

    def close(self) -> None:
        for stream in (self.popen.stdin, self.popen.stdout):
            if stream is not None:
                stream.close()
        stop(self.popen)


def run_vcr(cfg: Config) -> tuple[list[Row], dict[str, Any]]:
    """P3 at 1,000 interactions, and the VCR.py side of the plot at every size reached."""
    # The plot's sweep once (run 0); P3's own size, 1,000 interactions, in every run.
    sizes = _SIZES[:2] if cfg.quick else _SIZES if cfg.run == 0 else (1_000,)
    reps = cfg.rounds(5, 2)
    budget = {100: 30.0, 1_000: cfg.pickf(60.0, 20.0), 10_000: 120.0}
    req = realistic_request()
    points: dict[str, Any] = {}
    rows: list[Row] = []
    for size in sizes:
        path = str(cassette(size))
        fixture_path = fixture(size)
        deadline = time.perf_counter() + budget[size]
        vcr_times: list[float] = []
        ours_times: list[float] = []
        load: float | None = None
        player = _Player(path)
        try:
            with acquire(fixture_path) as provider:
                ours_batch = per_call(lambda: provider.complete(req), 200)
                ours_batch()  # warm-up
                load = player.ready(deadline)
                # Warm VCR.py up too where a call is cheap; at 10k one call is the budget.
                if load is not None and size <= 1_000:
                    player.call(deadline)
                while load is not None and len(vcr_times) < reps:
                    if time.perf_counter() >= deadline:
                        break
                    vcr_call = player.call(deadline)
                    if vcr_call is None:
                        break
                    vcr_times.append(vcr_call)
                    ours_times.append(ours_batch())
        finally:
            player.close()
        reached = bool(vcr_times)
        points[str(size)] = {
            "interactions": size,
            "reached": reached,
            "cassette_bytes": cassette(size).stat().st_size,
            "cassette_load_s": load,
            "vcr": Stats.of(vcr_times) if reached else None,
            "ours": Stats.of(ours_times) if reached else None,
            "budget_s": budget[size],
        }
        if size == 1_000:
            rows.append(_row(vcr_times, ours_times))
    return rows, points


def _row(vcr_times: list[float], ours_times: list[float]) -> Row:
    if not vcr_times:
        return Row(
            id="P3",
            what="vs VCR.py playback, last of 1,000 interactions",
            unit="us",
            ours=None,
            reference=None,
            reference_name="VCR.py (not reached within its budget)",
            ratio=None,
            ratio_means="speed-up (VCR.py / ours)",
            op=">=",
            bound=500.0,
        )
    ours = Stats.of(ours_times)
    peer = Stats.of(vcr_times)
    return Row(
        id="P3",
        what="vs VCR.py playback (requests), last of 1,000 interactions",
        unit="us",
        ours=ours,
        reference=peer,
        reference_name="VCR.py, record_mode none, method+uri+body",
        ratio=peer.median / ours.median,
        ratio_means="speed-up (VCR.py / ours)",
        op=">=",
        bound=500.0,
    )


if __name__ == "__main__":
    _child_main(sys.argv[1])
