"""P11: a slow peer (another connection holding half a frame) must not delay a caller.

One acquisition of the 1k-entry fixture; the caller times each ``complete()`` of the
realistic request on its own. Two sides, interleaved in rotated rounds: *clean* (no
other peer) and *slow* (before every 50th call a new raw same-user connection to the
actor sends the header and half the body of a request frame, then nothing, until the
round ends). The target is on the caller's p99 latency: p99(slow) - p99(clean) ≤ 1 ms.
The old blocking actor waited up to 2 s on each such peer before dropping it.
"""

from __future__ import annotations

import socket
import time
from typing import Final

from replay_actor import ReplayProvider, acquire, request_hash

from .timing import Config, Row, Stats, percentile
from .workload import fixture, realistic_request

__all__ = ["run_slow_peer"]

#: A new slow peer joins every this many calls: 2 % of the calls follow a fresh one,
#: so a stall per slow peer (as the old blocking actor had, 2 s each) shows in the p99.
_SLOW_EVERY: Final = 50


def _latencies(
    provider: ReplayProvider, request: object, calls: int, *, slow_every: int = 0
) -> list[float]:
    """Per-call seconds of ``calls`` calls; with ``slow_every``, a new slow peer joins
    before every ``slow_every``-th call and holds its half frame to the end."""
    samples = []
    complete = provider.complete
    half = _half_frame(request)
    slow: list[socket.socket] = []
    try:
        for i in range(calls):
            if slow_every and i % slow_every == 0:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                slow.append(sock)
                sock.connect(provider._address)
                sock.sendall(half)
            start = time.perf_counter()
            complete(request)  # type: ignore[arg-type]
            samples.append(time.perf_counter() - start)
    finally:
        for sock in slow:
            sock.close()
    return samples


def _half_frame(request: object) -> bytes:
    payload = b"C" + request_hash(request).encode("ascii")  # type: ignore[arg-type]
    whole = len(payload).to_bytes(4, "big") + payload
    return whole[: 4 + len(payload) // 2]


def run_slow_peer(cfg: Config) -> list[Row]:
    """P11: the caller's p99 with and without a peer holding half a frame."""
    request = realistic_request()
    calls = cfg.pick(400, 100)
    reps = cfg.rounds(10, 3)
    clean: list[float] = []
    slow: list[float] = []
    with acquire(str(fixture(1_000))) as provider:

        def clean_side(keep: bool) -> None:
            found = _latencies(provider, request, calls)
            if keep:
                clean.extend(found)

        def slow_side(keep: bool) -> None:
            found = _latencies(provider, request, calls, slow_every=_SLOW_EVERY)
            if keep:
                slow.extend(found)

        sides = [clean_side, slow_side]
        for side in sides:
            side(False)  # warm-up
        for rep in range(reps):
            shift = rep % 2
            for side in sides[shift:] + sides[:shift]:
                side(True)
    p99_slow, p99_clean = percentile(slow, 99), percentile(clean, 99)
    delay_ms = (p99_slow - p99_clean) * 1e3
    return [
        Row(
            id="P11",
            what=(
                f"peers holding half a frame: another caller's complete() ({len(slow)} calls;"
                f" p99 {p99_slow * 1e6:.0f} us vs {p99_clean * 1e6:.0f} us without it)"
            ),
            unit="us",
            ours=Stats.of(slow),
            reference=Stats.of(clean),
            reference_name="the same calls with no other peer",
            ratio=delay_ms,
            ratio_means="p99 delay in ms (absolute)",
            op="<=",
            bound=1.0,
            extra={"p99_slow_s": p99_slow, "p99_clean_s": p99_clean},
        )
    ]
