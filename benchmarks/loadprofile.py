"""Where a front-door request's CPU goes under P20a's load (docs/benchmarks.md, "P20").

``python -m benchmarks.loadprofile [--seconds 5] [--json FILE]``: starts P20's two
servers (``load._Servers``), measures ``wrk -t2 -c64`` against each (interleaved, no
profiler attached) and the front door's CPU time a request (``psutil``, its own process),
then runs the same ``wrk`` once more while ``py-spy`` samples the front door, and sorts
its samples by the innermost frame that names a part of the request path. The table is
the CPU time a request of each part: its share of the samples times the CPU a request.
Without ``py-spy`` on ``PATH`` (or beside the interpreter) only the rates and the CPU a
request are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Final

import psutil

from .load import _Servers, _wrk

__all__ = ["PARTS", "main", "parts_of"]

#: The parts of the request path, in priority order: a sample belongs to the first part
#: that any frame of its stack matches (the parts nest: the event loop is under all).
PARTS: Final = (
    ("hash the request", re.compile(r"request_hash|replay_actor/_request\.py")),
    ("the answer (vendor shape, JSON encode)", re.compile(r"response_body|^answer ")),
    ("the actor round trip (caller side)", re.compile(r"replay_actor/replay/")),
    ("read the body (route, JSON, vendor read)", re.compile(r"replay_actor/(serving|vendors)/")),
    ("the front door's ASGI app", re.compile(r"replay_actor/frontdoor/")),
    ("HTTP (uvicorn, parser)", re.compile(r"uvicorn/|h11/|httptools")),
    ("asyncio in a callback (futures, transports)", re.compile(r"asyncio/")),
)
_OTHER: Final = "other in a callback"
_LOOP: Final = "the event loop itself (epoll, scheduling)"


#: The event loop's frame that runs one callback: the frames below it are the request's.
_CALLBACK: Final = re.compile(r"^Handle\._run \(.*asyncio/events\.py")
#: The first frame of a thread other than the main one (the event loop's). The serving
#: process's other threads wait (the reaper of its children sleeps in ``epoll``), and
#: py-spy may still sample a waiting thread: counted, such samples were a sixth of the
#: total, all of them put down to the event loop.
_OTHER_THREAD: Final = re.compile(r"^Thread\._bootstrap \(.*threading\.py")


def _frames(line: str) -> tuple[list[str], int]:
    """A sample's frames below the event loop's callback frame (none: the loop's own)."""
    stack, _, count = line.rpartition(" ")
    frames = stack.split(";")
    for at in range(len(frames) - 1, -1, -1):
        if _CALLBACK.search(frames[at]):
            return frames[at + 1 :], int(count)
    return [], int(count)


def parts_of(raw: str) -> dict[str, int]:
    """Samples a part, from py-spy's raw (collapsed) output: the main thread's only."""
    counts: Counter[str] = Counter()
    for line in raw.splitlines():
        if not line.strip() or _OTHER_THREAD.search(line):
            continue
        frames, count = _frames(line)
        counts[_part(frames)] += count
    return dict(counts)


def _part(frames: list[str]) -> str:
    if not frames:
        return _LOOP
    for name, pattern in PARTS:
        if any(pattern.search(frame) for frame in frames):
            return name
    return _OTHER


def _spy() -> str | None:
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


def _profile(spy: str, servers: _Servers, seconds: int) -> dict[str, int]:
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "raw.txt"
        argv = [spy, "record", "-r", "250", "-f", "raw", "-o", str(out)]
        recorder = subprocess.Popen(
            [*argv, "-d", str(seconds + 1), "--pid", str(servers.door.pid)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            _wrk(servers.ours, servers.script, 64, seconds)
        finally:
            recorder.wait(timeout=seconds + 60)
        raw = out.read_text()
        if os.environ.get("LOADPROFILE_RAW"):
            Path(os.environ["LOADPROFILE_RAW"]).write_text(raw)
        return parts_of(raw)


def _cpu(processes: list[psutil.Process]) -> float:
    total = 0.0
    for process in processes:
        times = process.cpu_times()
        total += times.user + times.system
    return total


def _cpu_per_request(
    server: subprocess.Popen[str], base: str, script: Path, seconds: int
) -> tuple[float, float, float]:
    """Requests a second, and the CPU microseconds a request of the server's process and
    of its children (the front door's: the zygote and the cursor actor)."""
    process = psutil.Process(server.pid)
    children = process.children(recursive=True)
    before = _cpu([process]), _cpu(children)
    argv = ["wrk", "-t2", "-c64", f"-d{seconds}s", "-s", str(script), base + "/chat/completions"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60, check=True)
    after = _cpu([process]), _cpu(children)
    total = re.search(r"(\d+) requests in", done.stdout)
    rate = re.search(r"Requests/sec:\s+([\d.]+)", done.stdout)
    if total is None or rate is None:
        raise RuntimeError(f"wrk printed no count: {done.stdout!r}")
    count = int(total.group(1))
    mine = (after[0] - before[0]) / count * 1e6
    theirs = (after[1] - before[1]) / count * 1e6
    return float(rate.group(1)), mine, theirs


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.loadprofile")
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    servers = _Servers()
    try:
        _wrk(servers.ours, servers.script, 64, 1)  # warm both
        _wrk(servers.floor, servers.script, 64, 1)
        assert servers.bare is not None
        bare, bare_cpu, _ = _cpu_per_request(
            servers.bare, servers.floor, servers.script, args.seconds
        )
        ours, cpu, actor = _cpu_per_request(
            servers.door, servers.ours, servers.script, args.seconds
        )
        spy = _spy()
        parts = _profile(spy, servers, args.seconds) if spy else {}
    finally:
        servers.close()
    result: dict[str, object] = {
        "bare_rate": bare,
        "ours_rate": ours,
        "ratio": ours / bare,
        "cpu_us_per_request": cpu,
        "bare_cpu_us_per_request": bare_cpu,
        "children_cpu_us_per_request": actor,
        "samples": parts,
        "load_average": os.getloadavg(),
    }
    _print(result, parts, cpu)
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return result


def _print(result: dict[str, object], parts: dict[str, int], cpu: float) -> None:
    print(
        f"wrk -t2 -c64: ours {result['ours_rate']:.0f}/s, bare {result['bare_rate']:.0f}/s,"
        f" ratio {result['ratio']:.2f}; CPU a request: front door {cpu:.0f} us,"
        f" its children (the actor) {result['children_cpu_us_per_request']:.0f} us;"
        f" the bare app {result['bare_cpu_us_per_request']:.0f} us"
    )
    total = sum(parts.values())
    for name, count in sorted(parts.items(), key=lambda item: -item[1]):
        print(f"  {name:45s} {count / total:6.1%}  {cpu * count / total:6.0f} us")


if __name__ == "__main__":
    main()
