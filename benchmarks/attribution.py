"""P16: ``replay-actor compare`` of two 50,000-call logs, and what the run log costs on
the hot paths (P1L, P12L, P14L; docs/attribution.md).

P16 times ``python -m replay_actor compare BASE CAND --json`` as a whole process (start
to exit, as a user waits for it) on two logs of 50,000 calls each: 10,000 samples of five
calls (a conversation growing by two messages per call, each sample its ``scope``), with
their request sidecars; the candidate's every 20th sample diverges at a call from 1 to 5.
Its peak RSS (the process's own ``VmHWM``, said on its stderr: a child's ``ru_maxrss``
would carry the benchmark process's own high-water mark across exec) is compared with the
two logs' size (the log files; their sidecars are reported beside).

P1L, P12L and P14L are P1, P12 and P14's "ours" side twice, interleaved: without a run
log and with one (``log = FILE`` in the manifest, ``serve --log``). The ratio is the
logging overhead; the target is ≤ 1.05.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Final

import msgspec

from replay_actor import open_provider, openai_client, request_hash
from replay_actor._request import canonical_request
from replay_actor.attribution.log import LogLine
from replay_actor.files.sidecar import sidecar_line
from replay_actor.vendors.openai import chat as vendor_openai

from .frontdoor import _start, _stop
from .timing import Config, Row, Stats, interleave, paired_ratio, per_call
from .workload import cache_dir, fixture, realistic_request

__all__ = ["make_logs", "run_compare", "run_logging"]

MODEL = "gpt-4.1-mini"
SAMPLES = 10_000
CALLS = 5


def _request(sample: int, call: int, *, diverge_at: int) -> dict[str, Any]:
    """Call ``call`` of a sample; from call ``diverge_at`` on (0: never) it differs."""
    changed = bool(diverge_at) and call >= diverge_at
    task = f"Task {sample}: find the answer." + (" (changed)" if diverge_at == 1 else "")
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an agent with tools."},
        {"role": "user", "content": task},
    ]
    for turn in range(1, call):
        messages.append({"role": "assistant", "content": f"step {turn} of task {sample}"})
        output = f"tool output {turn} for {sample}"
        if changed:
            output += " (changed)"
        messages.append({"role": "user", "content": output})
    return {"messages": messages, "scope": {"sample": sample}}


def _write_log(path: Path, *, candidate: bool) -> None:
    encode = msgspec.json.Encoder().encode
    lines: list[bytes] = []
    requests: list[bytes] = []
    seq = 0
    for sample in range(SAMPLES):
        diverge_at = (sample // 20) % CALLS + 1 if candidate and sample % 20 == 0 else 0
        for call in range(1, CALLS + 1):
            request = _request(sample, call, diverge_at=diverge_at)
            digest = request_hash(request)
            seq += 1
            outcome = "miss" if diverge_at and call >= diverge_at else "served"
            line = LogLine(
                seq,
                1_733_000_000.0 + seq / 1000,
                outcome,
                4242,
                "replay",
                vendor="openai",
                path="/v1/chat/completions",
                scope={"sample": sample},
                request_hash=digest,
                line=seq if outcome == "served" else None,
            )
            lines.append(encode(line) + b"\n")
            requests.append(sidecar_line(digest, canonical_request(request)))
    path.write_bytes(b"".join(lines))
    Path(str(path) + ".requests.jsonl").write_bytes(b"".join(requests))


def make_logs() -> tuple[Path, Path]:
    """The two 50,000-call logs (cached: made once per cache directory)."""
    folder = cache_dir() / "p16"
    folder.mkdir(parents=True, exist_ok=True)
    base, cand = folder / "base.log", folder / "cand.log"
    for path, candidate in ((base, False), (cand, True)):
        if not path.exists() or not Path(str(path) + ".requests.jsonl").exists():
            _write_log(path, candidate=candidate)
    return base, cand


#: ``compare`` run as ``python -m replay_actor`` runs it, then its own peak RSS (the
#: kernel's ``VmHWM`` of this process's memory since exec) on stderr. A child's
#: ``ru_maxrss`` would not do: exec keeps the forking parent's high-water mark, and the
#: benchmark process is hundreds of MB by the time P16 runs.
_MEASURED_COMPARE: Final = """\
import re, sys
from replay_actor.cli import main
try:
    status = main(sys.argv[1:])
finally:
    with open("/proc/self/status") as f:
        hwm = re.search(r"VmHWM:\\s+(\\d+) kB", f.read())
    sys.stderr.write(f"VmHWM {hwm.group(1) if hwm else 0}\\n")
sys.exit(status)
"""


def _compare_once(base: Path, cand: Path) -> tuple[float, int]:
    """Seconds and peak RSS (bytes) of one ``compare`` process."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _MEASURED_COMPARE, "compare", str(base), str(cand), "--json"],
        capture_output=True,
        check=False,
    )
    elapsed = time.perf_counter() - start
    if done.returncode != 1:
        raise AssertionError(f"compare exited {done.returncode}, expected 1 (some diverged)")
    summary = json.loads(done.stdout)["summary"]
    if summary["diverged"] != SAMPLES // 20 or summary["identical"] != SAMPLES - SAMPLES // 20:
        raise AssertionError(f"compare found {summary}")
    peak = re.search(rb"VmHWM (\d+)", done.stderr)
    if peak is None:
        raise AssertionError(f"compare did not say its peak RSS: {done.stderr[-500:]!r}")
    return elapsed, int(peak.group(1)) * 1024


def run_compare(cfg: Config) -> list[Row]:
    base, cand = make_logs()
    reps = cfg.rounds(5, 2)
    times: list[float] = []
    peak = 0
    for _ in range(reps):
        elapsed, rss = _compare_once(base, cand)
        times.append(elapsed)
        peak = max(peak, rss)
    logs = base.stat().st_size + cand.stat().st_size
    sidecars = sum(Path(str(p) + ".requests.jsonl").stat().st_size for p in (base, cand))
    seconds = Stats.of(times)
    return [
        Row(
            id="P16",
            what="replay-actor compare of two 50,000-call logs (10,000 samples), whole process",
            unit="s",
            ours=seconds,
            reference=None,
            reference_name="the 5 s target",
            ratio=seconds.median / 5.0,
            ratio_means="ours / 5 s",
            op="<=",
            bound=1.0,
            extra={"peak_rss_bytes": peak, "logs_bytes": logs, "sidecars_bytes": sidecars},
        ),
        Row(
            id="P16m",
            what="compare's peak RSS against the two logs' size",
            unit="MB",
            ours=Stats.of([peak / 1e6]),
            reference=Stats.of([logs / 1e6]),
            reference_name="the two log files (their sidecars not counted)",
            ratio=peak / logs,
            ratio_means="peak RSS / logs' size",
            op="<=",
            bound=20.0,
            note=f"sidecars {sidecars / 1e6:.1f} MB beside",
        ),
    ]


# -- the logging overhead ----------------------------------------------------------------------


def _overhead_row(row_id: str, what: str, samples: dict[str, list[float]]) -> Row:
    mine = Stats.of(samples["logged"])
    base = Stats.of(samples["plain"])
    paired = paired_ratio(samples["logged"], samples["plain"])
    return Row(
        id=row_id,
        what=what,
        unit="us",
        ours=mine,
        reference=base,
        reference_name="the same without a run log",
        ratio=mine.median / base.median,
        ratio_means="logged / not logged",
        op="<=",
        bound=1.05,
        extra={"paired_median_ratio": paired},
    )


def _p1l(cfg: Config, folder: Path) -> Row:
    req = realistic_request()
    path = str(fixture(100_000))
    calls, reps = cfg.pick(300, 100), cfg.rounds(21, 5)
    plain = open_provider({"provider": {"kind": "replay", "fixture": path, "timeout": 120.0}})
    log = str(folder / "p1l.log")
    logged = open_provider(
        {"provider": {"kind": "replay", "fixture": path, "timeout": 120.0, "log": log}}
    )
    try:
        samples = interleave(
            {
                "plain": per_call(lambda: plain.complete(req), calls),
                "logged": per_call(lambda: logged.complete(req), calls),
            },
            reps=reps,
            warmup=2,
        )
    finally:
        plain.release()
        logged.release()
    return _overhead_row("P1L", "P1's complete() with a run log (100k entries)", samples)


def _p12l(cfg: Config, folder: Path) -> Row:
    kwargs: dict[str, Any] = dict(vendor_openai.to_body(realistic_request(), MODEL))
    path = str(fixture(100))
    calls, reps = cfg.pick(200, 50), cfg.rounds(21, 5)
    plain = openai_client({"provider": {"kind": "replay", "fixture": path}})
    log = str(folder / "p12l.log")
    logged = openai_client({"provider": {"kind": "replay", "fixture": path, "log": log}})
    try:
        samples = interleave(
            {
                "plain": per_call(lambda: plain.chat.completions.create(**kwargs), calls),
                "logged": per_call(lambda: logged.chat.completions.create(**kwargs), calls),
            },
            reps=reps,
            warmup=2,
        )
    finally:
        plain.close()
        logged.close()
    return _overhead_row("P12L", "P12's openai_client call with a run log", samples)


def _p14l(cfg: Config, folder: Path) -> Row:
    import httpx2

    payload = json.dumps(vendor_openai.to_body(realistic_request(), MODEL)).encode()
    manifest = folder / "p14l.toml"
    manifest.write_text(f'[provider]\nkind = "replay"\nfixture = "{fixture(100)}"\n')
    calls, reps = cfg.pick(300, 50), cfg.rounds(21, 5)
    serve = [sys.executable, "-m", "replay_actor", "serve", str(manifest)]
    plain, plain_ready = _start(serve)
    logged = None
    try:
        logged, logged_ready = _start([*serve, "--log", str(folder / "p14l.log")])
        sides = {}
        with httpx2.Client(timeout=60) as client:
            for name, ready in (("plain", plain_ready), ("logged", logged_ready)):
                info = json.loads(ready)
                url = info["openai_base_url"] + "/chat/completions"
                headers = {
                    "content-type": "application/json",
                    "authorization": f"Bearer {info['token']}",
                }

                def post(url: str = url, headers: dict[str, str] = headers) -> None:
                    client.post(url, content=payload, headers=headers).raise_for_status()

                sides[name] = per_call(post, calls)
            samples = interleave(sides, reps=reps, warmup=2)
    finally:
        _stop(plain)
        if logged is not None:
            _stop(logged)
    return _overhead_row("P14L", "P14's POST to serve with --log", samples)


def run_logging(cfg: Config) -> list[Row]:
    folder = cache_dir() / "logging"
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.log*"):
        old.unlink()
    try:
        return [_p1l(cfg, folder), _p12l(cfg, folder), _p14l(cfg, folder)]
    finally:
        for old in folder.glob("*.log*"):
            old.unlink()
