"""P19: recording at scale.

An evaluation of 10,000 new calls (64 concurrent) recorded under ``replay-actor run``
with a record manifest whose fixture already holds 100,000 entries, against the same
client sent straight to the vendor. The vendor is a loopback server (uvicorn, a bare
ASGI app) that answers each chat completion after 50 ms with a ~1.5 KB answer made
from the request's bytes, so the same request always gets the same answer.

Each side is timed whole, as a user waits for it: ``python -m benchmarks.recording
client`` straight, and ``replay-actor run MANIFEST -- python -m benchmarks.recording
client`` (start-up, the fixture's load, every call, the final compaction and the
summary). The sides alternate; each ``run`` records onto a fresh copy of the fixture.
The client also reports the time its 10,000 calls took, without its start-up, which is
shown beside (the steady state, where recording itself costs).

Also measured: the peak RSS of ``run`` (``wait4``'s ``ru_maxrss``, taken by a small parent
process, ``_PEAK``: the larger of ``run``
and its child, the client, so an upper bound on ``run``'s), against 2 x the fixture's
size + 200 MB; and the final fixture's ``fixture_set_hash`` against recording the same
requests one at a time (sequential ``complete`` calls through the in-process transport,
with a vendor that answers at once: the same answers, since they depend on the request
only).

``python -m benchmarks.recording vendor DELAY`` is the vendor; ``... client N C`` the
evaluation (``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` from the environment, as ``run``
sets them).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any, Final

from .timing import Config, Row, Stats
from .workload import cache_dir, fixture

__all__ = ["run_recording"]

MODEL: Final = "gpt-4.1-mini"
#: The vendor's answer to each call: about this many bytes of content.
_ANSWER_CHARS: Final = 1400
_SYSTEM: Final = (
    "You are a careful grader. Read the question and the candidate's answer, then say "
    "whether the answer is correct, with one sentence of reasoning. " * 3
)


def body(index: int) -> bytes:
    """The evaluation's ``index``-th chat completion body."""
    question = f"Sample {index}: what is {index} + {index * 7 % 13}? Show the sum. " * 4
    return json.dumps(
        {
            "model": MODEL,
            "messages": [
                {"role": "system", "content": _SYSTEM},
                {"role": "user", "content": question},
            ],
            "temperature": 0,
        },
        separators=(",", ":"),
    ).encode()


# -- the vendor ----------------------------------------------------------------------------

Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def _answer(request: bytes) -> bytes:
    digest = hashlib.sha256(request).hexdigest()
    content = (f"answer {digest[:16]}: " + digest * 30)[:_ANSWER_CHARS]
    return json.dumps(
        {
            "id": "chatcmpl-" + digest[:24],
            "object": "chat.completion",
            "created": 0,
            "model": MODEL,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 120, "completion_tokens": 350, "total_tokens": 470},
        },
        separators=(",", ":"),
    ).encode()


App = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]


def _vendor_app(delay: float) -> App:
    async def app(scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        chunks = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        answer = _answer(b"".join(chunks))
        if delay:
            await asyncio.sleep(delay)
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(answer)).encode()),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": answer})

    return app


def _serve_vendor(delay: float) -> None:
    from .frontdoor import serve_app

    serve_app(_vendor_app(delay), "/v1")


# -- the evaluation ------------------------------------------------------------------------


async def _evaluate(calls: int, concurrency: int) -> float:
    import httpx2

    base = os.environ["OPENAI_BASE_URL"].rstrip("/")
    headers = {
        "authorization": f"Bearer {os.environ['OPENAI_API_KEY']}",
        "content-type": "application/json",
    }
    limits = httpx2.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    queue = iter(range(calls))
    failures = 0
    async with httpx2.AsyncClient(timeout=120, limits=limits, trust_env=False) as client:

        async def worker() -> None:
            nonlocal failures
            for index in queue:
                answer = await client.post(
                    base + "/chat/completions", content=body(index), headers=headers
                )
                failures += answer.status_code != 200

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - start
    if failures:
        raise SystemExit(f"{failures} calls failed")
    return elapsed


def _client(calls: int, concurrency: int) -> None:
    print(f"{asyncio.run(_evaluate(calls, concurrency)):.6f}", flush=True)


# -- the measurement -----------------------------------------------------------------------


def _start_vendor(delay: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.recording", "vendor", str(delay)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url:
        proc.wait(30)
        raise RuntimeError("the vendor did not start")
    return proc, url


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()  # ours, by its PID
        proc.communicate()


#: Runs a command and writes its peak RSS (``wait4``'s ``ru_maxrss``, kilobytes) to the
#: file named first. Linux keeps the larger of a process's own high-water mark and that
#: of the memory it ran in before ``exec``, which for a child spawned by this benchmark
#: is this benchmark's, grown to ~1 GB by the sections before P19 in a full run: spawned
#: by this small process instead, a command's peak is its own.
_PEAK: Final = (
    "import os,sys;"
    "pid=os.posix_spawn(sys.argv[2],sys.argv[2:],os.environ);"
    "_,status,usage=os.wait4(pid,0);"
    "open(sys.argv[1],'w').write(str(usage.ru_maxrss));"
    "sys.exit(os.waitstatus_to_exitcode(status))"
)


def _timed_rss(argv: list[str], env: dict[str, str]) -> tuple[float, float, int, str]:
    """``_timed``, with the command's peak RSS in bytes (``_PEAK``; both sides start
    through it, so both pay its start)."""
    start = time.perf_counter()
    out_path = cache_dir() / "p19-out.txt"
    err_path = cache_dir() / "p19-err.txt"
    peak_path = cache_dir() / "p19-peak.txt"
    peak_path.unlink(missing_ok=True)
    wrapped = [sys.executable, "-S", "-c", _PEAK, str(peak_path), *argv]
    with out_path.open("wb") as out, err_path.open("wb") as err:
        proc = subprocess.Popen(wrapped, env=env, stdout=out, stderr=err)
        proc.wait()
    elapsed = time.perf_counter() - start
    text = err_path.read_text(errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[2:5]} exited {proc.returncode}: {text[-2000:]}")
    own = float(out_path.read_text().split()[-1])
    return elapsed, own, int(peak_path.read_text()) * 1024, text


def _manifest(path: Path, fixture_path: Path, vendor: str) -> Path:
    path.write_text(
        "[provider]\n"
        'kind = "record"\n'
        f'fixture = "{fixture_path}"\n'
        "[provider.live]\n"
        'adapter = "openai"\n'
        f'model = "{MODEL}"\n'
        f'base_url = "{vendor}"\n'
    )
    return path


def _one_at_a_time(base: Path, calls: int, folder: Path) -> str:
    """The set hash of the fixture the same requests make recorded one at a time."""
    import httpx2

    from replay_actor import ProviderTransport, load_fixture, open_provider

    vendor, url = _start_vendor(0.0)
    try:
        target = folder / "one-at-a-time.jsonl"
        shutil.copyfile(base, target)
        manifest = _manifest(folder / "one-at-a-time.toml", target, url)
        with open_provider(str(manifest)) as provider:
            transport = ProviderTransport(provider, "openai", release_on_close=False)
            with httpx2.Client(transport=transport, base_url="http://replay.invalid/v1") as client:
                for index in range(calls):
                    client.post("/chat/completions", content=body(index)).raise_for_status()
        return load_fixture(target).fixture_set_hash
    finally:
        _stop(vendor)


def run_recording(cfg: Config) -> list[Row]:
    from replay_actor import load_fixture

    calls = cfg.pick(10_000, 1_000)
    concurrency = 64
    base = fixture(cfg.pick(100_000, 10_000))
    size = base.stat().st_size
    folder = cache_dir() / "p19"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    client = [sys.executable, "-m", "benchmarks.recording", "client", str(calls), str(concurrency)]
    vendor, url = _start_vendor(0.05)
    straight_env = {**os.environ, "OPENAI_BASE_URL": url, "OPENAI_API_KEY": "sk-straight"}
    walls: dict[str, list[float]] = {"run": [], "straight": []}
    owns: dict[str, list[float]] = {"run": [], "straight": []}
    peak = 0
    final_hash = ""
    target = folder / "recorded.jsonl"
    try:
        for rep in range(cfg.rounds(3, 1)):
            for side in ("straight", "run") if rep % 2 == 0 else ("run", "straight"):
                if side == "straight":
                    wall, own, _, _ = _timed_rss(client, straight_env)
                else:
                    for leftover in folder.glob("recorded.jsonl*"):
                        leftover.unlink()
                    shutil.copyfile(base, target)
                    manifest = _manifest(folder / "record.toml", target, url)
                    argv = [
                        sys.executable, "-m", "replay_actor", "run", str(manifest), "--", *client
                    ]  # fmt: skip
                    wall, own, rss, err = _timed_rss(argv, dict(os.environ))
                    peak = max(peak, rss)
                    if f"({calls} recorded)" not in err:
                        raise RuntimeError(f"the run did not record every call: {err[-500:]}")
                    final_hash = load_fixture(target).fixture_set_hash
                walls[side].append(wall)
                owns[side].append(own)
    finally:
        _stop(vendor)
    expected = _one_at_a_time(base, calls, folder)
    shutil.rmtree(folder, ignore_errors=True)
    mine, floor = Stats.of(walls["run"]), Stats.of(walls["straight"])
    own_run, own_straight = Stats.of(owns["run"]), Stats.of(owns["straight"])
    bound = 2 * size + 200e6
    return [
        Row(
            id="P19",
            what=(
                f"{calls:,} new calls ({concurrency} concurrent, vendor 50 ms) recorded under "
                f"run onto {cfg.pick(100_000, 10_000):,} entries, whole run; the calls alone: "
                f"{own_run.median:.2f} s vs {own_straight.median:.2f} s straight "
                f"({own_run.median / own_straight.median:.3f})"
            ),
            unit="s",
            ours=mine,
            reference=floor,
            reference_name="the same client straight to the vendor, whole process",
            ratio=mine.median / floor.median,
            ratio_means="run / straight",
            op="<=",
            bound=1.1,
            extra={"calls_alone_ratio": own_run.median / own_straight.median},
        ),
        Row(
            id="P19m",
            what=(
                f"P19: peak RSS of run (and its child) vs 2 x the fixture "
                f"({size / 1e6:.0f} MB) + 200 MB"
            ),
            unit="MB",
            ours=Stats.of([peak / 1e6]),
            reference=Stats.of([bound / 1e6]),
            reference_name="2 x fixture size + 200 MB",
            ratio=peak / bound,
            ratio_means="peak / bound",
            op="<=",
            bound=1.0,
        ),
        Row(
            id="P19h",
            what="P19: the recorded fixture's set hash is the one-at-a-time recording's",
            unit="MB",
            ours=None,
            reference=None,
            reference_name="recorded one call at a time",
            ratio=1.0 if final_hash == expected else 0.0,
            ratio_means="1 when equal",
            op=">=",
            bound=1.0,
        ),
    ]


if __name__ == "__main__":
    if sys.argv[1:2] == ["vendor"]:
        _serve_vendor(float(sys.argv[2]))
    elif sys.argv[1:2] == ["client"]:
        _client(int(sys.argv[2]), int(sys.argv[3]))
