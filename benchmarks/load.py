"""P20: the front door under load, as an evaluation loads it.

- **P20a**: Debian's ``wrk`` (``-t2 -c64 -d5s``) POSTing the realistic request as an
  OpenAI chat body, with the token, to ``replay-actor serve`` (a replay manifest on the
  100-entry fixture, its own process), against the same ``wrk`` on the bare uvicorn app
  of P14 returning the front door's answer bytes (asserted equal first). The ratio is
  requests a second, ours / bare; any answer that is not 2xx, and any socket error, is
  counted and fails the row. The two servers are measured one after the other, in turn
  (rotating), after a warm-up of each.
- **P20b**: 64 ``asyncio`` tasks sharing one ``openai.AsyncOpenAI`` client, each making
  the same ``chat.completions.create`` of the realistic request in turn, to each server;
  calls a second, ours / bare.
- The plot (run 0 of the idle pass): P20a's requests a second at 1, 8, 64 and 256
  connections, both servers (``docs/benchmarks-load.png``).

``wrk`` is found on ``PATH``; without it the section reports why and measures P20b only.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Final

import httpx2

from replay_actor.vendors.openai import chat as vendor_openai

from .frontdoor import MODEL, _start, _stop
from .timing import Config, Row, Stats, interleave
from .workload import cache_dir, fixture, realistic_request

__all__ = ["PLOT", "plot_load", "run_load"]

ROOT: Final = Path(__file__).resolve().parent.parent
PLOT: Final = ROOT / "docs" / "benchmarks-load.png"
#: The connections of the plot; P20a is the 64 point.
CONNECTIONS: Final = (1, 8, 64, 256)
_TASKS: Final = 64

_SCRIPT: Final = """\
local f = assert(io.open("{body}", "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer {token}"
"""


class _Servers:
    """The front door and the bare app, each its own process, answering alike."""

    def __init__(self) -> None:
        req = realistic_request()
        self.body = json.dumps(vendor_openai.to_body(req, MODEL)).encode()
        manifest = cache_dir() / "frontdoor.toml"
        manifest.write_text(f'[provider]\nkind = "replay"\nfixture = "{fixture(100)}"\n')
        self.door, ready = _start([sys.executable, "-m", "replay_actor", "serve", str(manifest)])
        self.bare: subprocess.Popen[str] | None = None
        info = json.loads(ready)
        self.token = info["token"]
        self.ours = info["openai_base_url"]
        headers = {"content-type": "application/json", "authorization": f"Bearer {self.token}"}
        with httpx2.Client(timeout=60, headers=headers) as client:
            answer = client.post(self.ours + "/chat/completions", content=self.body)
            answer.raise_for_status()
            canned = cache_dir() / "frontdoor-answer.json"
            canned.write_bytes(answer.content)
            bare = [sys.executable, "-m", "benchmarks.frontdoor", "bare", str(canned)]
            self.bare, url = _start(bare)
            self.floor = url.strip() + "/v1"
            again = client.post(self.floor + "/chat/completions", content=self.body)
            if again.content != answer.content:
                raise AssertionError("the two servers do not answer alike")
        self.script = cache_dir() / "p20-post.lua"
        body_file = cache_dir() / "p20-body.json"
        body_file.write_bytes(self.body)
        self.script.write_text(_SCRIPT.format(body=body_file, token=self.token))

    def close(self) -> None:
        _stop(self.door)
        if self.bare is not None:
            _stop(self.bare)


def _wrk(base: str, script: Path, connections: int, seconds: float) -> dict[str, float]:
    """One ``wrk`` run: requests a second, and the answers that were not 2xx (or failed)."""
    threads = min(2, connections)
    done = subprocess.run(
        [
            "wrk",
            f"-t{threads}",
            f"-c{connections}",
            f"-d{max(1, round(seconds))}s",
            "-s",
            str(script),
            base + "/chat/completions",
        ],
        capture_output=True,
        text=True,
        timeout=seconds + 60,
        check=True,
    )
    out = done.stdout
    rate = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if rate is None:
        raise RuntimeError(f"wrk printed no rate: {out!r}")
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    failed = int(bad.group(1)) if bad else 0
    if errors:
        failed += sum(int(n) for n in errors.groups())
    return {"rate": float(rate.group(1)), "failed": float(failed)}


def _sdk_rate(base: str, token: str, body: bytes, calls: int) -> float:
    """Seconds per call of 64 tasks on one ``AsyncOpenAI`` client (calls / s = 1 / it)."""
    from openai import AsyncOpenAI

    kwargs = json.loads(body)

    async def run() -> float:
        async with AsyncOpenAI(base_url=base, api_key=token, max_retries=0) as client:

            async def task(count: int) -> None:
                for _ in range(count):
                    await client.chat.completions.create(**kwargs)

            await task(1)  # the connection pool's first connections, not timed
            start = time.perf_counter()
            await asyncio.gather(*(task(calls // _TASKS) for _ in range(_TASKS)))
            return (time.perf_counter() - start) / (calls // _TASKS * _TASKS)

    return asyncio.run(run())


def run_load(cfg: Config) -> tuple[list[Row], dict[str, Any]]:
    """P20a (if ``wrk`` is there), P20b, and the plot's points (run 0)."""
    servers = _Servers()
    points: dict[str, Any] = {}
    rows: list[Row] = []
    seconds = cfg.pickf(5.0, 1.0)
    try:
        if shutil.which("wrk") is not None:
            failed = {"ours": 0.0, "bare": 0.0}

            def side(base: str, name: str) -> float:
                got = _wrk(base, servers.script, 64, seconds)
                failed[name] += got["failed"]
                return got["rate"]

            samples = interleave(
                {
                    "ours": lambda: side(servers.ours, "ours"),
                    "bare": lambda: side(servers.floor, "bare"),
                },
                reps=cfg.rounds(1, 1),
                warmup=1,
            )
            rows.append(_wrk_row(samples, failed))
            if cfg.run == 0 and not cfg.quick:
                points = _sweep(servers, seconds)
        calls = cfg.pick(1280, 256)
        sdk = interleave(
            {
                "ours": lambda: _sdk_rate(servers.ours, servers.token, servers.body, calls),
                "bare": lambda: _sdk_rate(servers.floor, "x", servers.body, calls),
            },
            reps=cfg.rounds(3, 1),
            warmup=1,
        )
    finally:
        servers.close()
    mine, base = Stats.of(sdk["ours"]), Stats.of(sdk["bare"])
    rows.append(
        Row(
            id="P20b",
            what=f"{_TASKS} asyncio tasks on one openai AsyncOpenAI client, realistic chat body",
            unit="us",
            ours=mine,
            reference=base,
            reference_name="the same clients against the bare uvicorn app of P14",
            ratio=base.median / mine.median,
            ratio_means="throughput, ours / bare",
            op=">=",
            bound=0.9,
        )
    )
    return rows, points


def _wrk_row(samples: dict[str, list[float]], failed: dict[str, float]) -> Row:
    ours, bare = Stats.of(samples["ours"]), Stats.of(samples["bare"])
    bad = int(failed["ours"])
    return Row(
        id="P20a",
        what=(
            "wrk -t2 -c64 POSTing the realistic chat body to replay-actor serve, 5 s"
            f" (requests/s; answers not 2xx or failed: {bad})"
        ),
        unit="calls/s",
        ours=ours,
        reference=bare,
        reference_name="the same wrk against uvicorn + a bare ASGI app returning the same bytes",
        # No answer may fail: a failed one makes the row miss, whatever the rate.
        ratio=ours.median / bare.median if bad == 0 else 0.0,
        ratio_means="throughput, ours / bare",
        op=">=",
        bound=0.6,
        extra={"failed": failed},
    )


def _sweep(servers: _Servers, seconds: float) -> dict[str, Any]:
    """Requests a second at every connection count, both servers, for the plot."""
    points: dict[str, Any] = {"connections": list(CONNECTIONS), "ours": [], "bare": []}
    for connections in CONNECTIONS:
        for name, base in (("ours", servers.ours), ("bare", servers.floor)):
            points[name].append(_wrk(base, servers.script, connections, seconds)["rate"])
    return points


def plot_load(path: Path, points: dict[str, Any]) -> None:
    """Requests a second against connections, both servers (log x)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=110)
    connections = points["connections"]
    ax.plot(connections, points["bare"], "s-", color="gray", label="bare uvicorn app (floor)")
    ax.plot(connections, points["ours"], "o-", label="replay-actor serve")
    ax.plot(
        connections,
        [0.6 * rate for rate in points["bare"]],
        ":",
        color="gray",
        label="P20a target (0.6 x floor)",
    )
    ax.set_xscale("log")
    ax.set_xticks(connections, [str(c) for c in connections])
    ax.set_xlabel("wrk connections (-t2; 1 connection: -t1)")
    ax.set_ylabel("requests a second")
    ax.set_title("The front door under load: realistic chat body, loopback")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
