"""P14: the front door, and P17: a sealed ``run``'s start-up.

P14: the front door. An ``httpx2`` client's POST of the realistic request as an OpenAI
chat body to ``replay-actor serve`` (token check, vendor mapping, one ``acomplete`` on
the cursor actor, vendor response), against the floor: the same client and the same
POST to a bare server of the same library (uvicorn, same settings) whose bare ASGI app
reads the body and returns the same response bytes. Both servers run as processes of
their own, so the client side is identical and only the server's work differs.

P17: ``replay-actor run MANIFEST -- python -c pass`` of a replay manifest, sealed in a
network namespace (the default), against the same command with ``--seal off``, timed
whole (start to exit, as a user or CI waits for it), the two sides interleaved.

``python -m benchmarks.frontdoor bare FILE`` is the floor server: it answers every
request with FILE's bytes and prints its URL when it listens.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import httpx2

from replay_actor.vendors.openai import chat as vendor_openai

from .timing import Config, Row, Stats, interleave, paired_ratio, per_call
from .workload import cache_dir, fixture, realistic_request

__all__ = ["bare_app", "run_frontdoor", "run_sealed_startup", "serve_app"]

MODEL = "gpt-4.1-mini"


def _start(argv: list[str]) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.wait(30)
        raise RuntimeError(f"{argv[2:4]} did not start")
    return proc, line


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()  # ours, by its PID
        proc.communicate()


def run_frontdoor(cfg: Config) -> list[Row]:
    req = realistic_request()
    body = vendor_openai.to_body(req, MODEL)
    payload = json.dumps(body).encode()
    manifest = cache_dir() / "frontdoor.toml"
    manifest.write_text(f'[provider]\nkind = "replay"\nfixture = "{fixture(100)}"\n')
    calls = cfg.pick(300, 50)
    reps = cfg.rounds(21, 5)
    door, ready = _start([sys.executable, "-m", "replay_actor", "serve", str(manifest)])
    info = json.loads(ready)
    headers = {"content-type": "application/json", "authorization": f"Bearer {info['token']}"}
    url = info["openai_base_url"] + "/chat/completions"
    bare = None
    try:
        with httpx2.Client(timeout=60) as client:
            answer = client.post(url, content=payload, headers=headers)
            answer.raise_for_status()
            canned = cache_dir() / "frontdoor-answer.json"
            canned.write_bytes(answer.content)
            bare, bare_url = _start(
                [sys.executable, "-m", "benchmarks.frontdoor", "bare", str(canned)]
            )
            bare_url = bare_url.strip()
            floor_answer = client.post(
                bare_url + "/v1/chat/completions", content=payload, headers=headers
            )
            if floor_answer.content != answer.content:
                raise AssertionError("the two servers do not answer alike")

            def ours() -> None:
                client.post(url, content=payload, headers=headers).raise_for_status()

            def floor() -> None:
                client.post(
                    bare_url + "/v1/chat/completions", content=payload, headers=headers
                ).raise_for_status()

            samples = interleave(
                {"ours": per_call(ours, calls), "floor": per_call(floor, calls)},
                reps=reps,
                warmup=2,
            )
    finally:
        _stop(door)
        if bare is not None:
            _stop(bare)
    mine = Stats.of(samples["ours"])
    base = Stats.of(samples["floor"])
    # Each round's two sides ran back to back: their ratio cancels most machine noise.
    paired = paired_ratio(samples["ours"], samples["floor"])
    return [
        Row(
            id="P14",
            what="httpx2 POST of the realistic chat body to replay-actor serve, replay",
            unit="us",
            ours=mine,
            reference=base,
            reference_name="same POST to uvicorn + a bare ASGI app returning the same bytes",
            ratio=mine.median / base.median,
            ratio_means="ours / floor",
            op="<=",
            bound=1.3,
            extra={"paired_median_ratio": paired},
        )
    ]


def _run_once(argv: list[str]) -> float:
    start = time.perf_counter_ns()
    done = subprocess.run(argv, check=False, capture_output=True, timeout=120)
    elapsed = (time.perf_counter_ns() - start) / 1e9
    if done.returncode != 0:
        raise RuntimeError(f"{argv[4:6]} failed: {done.stderr.decode(errors='replace')}")
    return elapsed


def run_sealed_startup(cfg: Config) -> list[Row]:
    manifest = cache_dir() / "sealed.toml"
    manifest.write_text(f'[provider]\nkind = "replay"\nfixture = "{fixture(100)}"\n')
    run = [sys.executable, "-m", "replay_actor", "run"]
    child = ["--", sys.executable, "-c", "pass"]
    sealed = [*run, "--seal", "namespace", str(manifest), *child]
    unsealed = [*run, "--seal", "off", str(manifest), *child]
    samples = interleave(
        {"sealed": lambda: _run_once(sealed), "unsealed": lambda: _run_once(unsealed)},
        reps=cfg.rounds(15, 3),
        warmup=1,
    )
    mine = Stats.of(samples["sealed"])
    base = Stats.of(samples["unsealed"])
    paired = paired_ratio(samples["sealed"], samples["unsealed"])
    return [
        Row(
            id="P17",
            what="replay-actor run of `python -c pass`, replay manifest, sealed (namespace)",
            unit="ms",
            ours=mine,
            reference=base,
            reference_name="the same run with --seal off",
            ratio=mine.median / base.median,
            ratio_means="sealed / unsealed",
            op="<=",
            bound=1.5,
            extra={"paired_median_ratio": paired},
        )
    ]


# -- the floor server ---------------------------------------------------------------------

Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def bare_app(
    answer: bytes,
) -> Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]:
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(answer)).encode()),
    ]

    async def app(scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        more = True
        while more:  # read the body, as any server that answers a POST must
            message = await receive()
            more = message.get("more_body", False)
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": answer})

    return app


def serve_app(
    app: Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]],
    path: str = "",
    *,
    host: str = "127.0.0.1",
    tls: tuple[str, str] | None = None,
) -> None:
    """Serve ``app`` with uvicorn on a free loopback port of ``host`` (the settings every
    floor and peer server of the benchmarks uses), over TLS with ``tls`` (certificate
    and key files); print its URL (+ ``path``) once it listens."""
    import asyncio
    import socket

    import uvicorn

    # IPPROTO_TCP, so that asyncio sets TCP_NODELAY on accepted connections (as uvicorn's
    # own binding does, through getaddrinfo).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind((host, 0))
    sock.listen(4096)
    config = uvicorn.Config(
        app,
        lifespan="off",
        access_log=False,
        log_level="warning",
        server_header=False,
        ssl_certfile=None if tls is None else tls[0],
        ssl_keyfile=None if tls is None else tls[1],
    )
    server = uvicorn.Server(config)
    scheme = "http" if tls is None else "https"
    print(f"{scheme}://{host}:{sock.getsockname()[1]}{path}", flush=True)
    asyncio.run(server.serve(sockets=[sock]))


def _serve_bare(path: str) -> None:
    serve_app(bare_app(Path(path).read_bytes()))


if __name__ == "__main__" and sys.argv[1:2] == ["bare"]:
    _serve_bare(sys.argv[2])
