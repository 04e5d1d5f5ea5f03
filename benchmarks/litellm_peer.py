"""P18: the front door against the peer a user would pick instead, the LiteLLM proxy
answering from its in-memory cache.

Both sides get the very same call: the openai SDK's ``chat.completions.create`` of the
realistic request (one ``OpenAI`` client each, same settings). Ours is ``replay-actor
serve`` of a replay manifest; the peer is the LiteLLM proxy started as its docs say
(``litellm --config config.yaml``, on 127.0.0.1) with ``cache: true`` and
``cache_params: {type: local, max_messages: null}`` (its in-memory cache, for requests
of any length: by default it skips those of more than 4 messages), in front of a loopback upstream
(``frontdoor.py``'s bare server, returning the same answer). The peer's first call is a
miss that goes upstream; the upstream is then stopped, so every timed call is a cache
hit (a miss would fail). The two sides are interleaved; the run is repeated ``runs``
times on the same servers (their start-up, tens of seconds for LiteLLM, is not timed).
Nothing leaves the machine: LiteLLM reads its bundled model price map
(``LITELLM_LOCAL_MODEL_COST_MAP``) and runs without telemetry.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from replay_actor.vendors.openai import chat as vendor_openai

from .frontdoor import MODEL, _start, _stop
from .timing import Config, Row, Stats, interleave, paired_ratio, per_call
from .workload import cache_dir, fixture, realistic_request

__all__ = ["run_litellm"]

_KEY = "sk-bench-local"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _litellm_config(path: Path, upstream: str) -> None:
    path.write_text(
        "model_list:\n"
        f"  - model_name: {MODEL}\n"
        "    litellm_params:\n"
        f"      model: openai/{MODEL}\n"
        f"      api_base: {upstream}/v1\n"
        f"      api_key: {_KEY}\n"
        "litellm_settings:\n"
        "  cache: true\n"
        "  cache_params:\n"
        "    type: local\n"
        # Its default (4) neither looks up nor stores a request of more messages:
        # the realistic request has 21. None lifts the limit (its documented value).
        "    max_messages: null\n"
        "  telemetry: false\n"
        "general_settings:\n"
        f"  master_key: {_KEY}\n"
    )


def _start_litellm(config: Path, port: int) -> subprocess.Popen[bytes]:
    exe = shutil.which("litellm", path=str(Path(sys.executable).parent)) or "litellm"
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_TELEMETRY="False")
    env.pop("DATABASE_URL", None)
    log = (cache_dir() / "litellm-proxy.log").open("wb")
    return subprocess.Popen(
        [exe, "--config", str(config), "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def _wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    import httpx2

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the LiteLLM proxy exited ({proc.returncode}): see its log")
        try:
            if httpx2.get(url + "/health/liveliness", timeout=2).status_code == 200:
                return
        except httpx2.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError("the LiteLLM proxy was not ready in time")


def _end(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()  # ours, by its PID
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(30)


def run_litellm(cfg: Config, runs: int = 5) -> list[Row]:
    from openai import OpenAI

    req = realistic_request()
    body = vendor_openai.to_body(req, MODEL)
    manifest = cache_dir() / "frontdoor.toml"
    manifest.write_text(f'[provider]\nkind = "replay"\nfixture = "{fixture(100)}"\n')
    # An SDK call is ~10 ms here and LiteLLM's ~45: 5 runs of 11 rounds of 20 calls a
    # side take about a minute.
    calls = cfg.pick(20, 5)
    reps = cfg.rounds(11, 3)
    door, ready = _start([sys.executable, "-m", "replay_actor", "serve", str(manifest)])
    upstream: subprocess.Popen[str] | None = None
    peer: subprocess.Popen[bytes] | None = None
    ratios: list[float] = []
    ours_all: list[float] = []
    peer_all: list[float] = []
    try:
        info = json.loads(ready)
        with OpenAI(base_url=info["openai_base_url"], api_key=info["token"]) as ours_client:
            answer = ours_client.chat.completions.with_raw_response.create(**body)
            canned = cache_dir() / "litellm-upstream-answer.json"
            canned.write_bytes(answer.http_response.content)
            upstream, upstream_url = _start(
                [sys.executable, "-m", "benchmarks.frontdoor", "bare", str(canned)]
            )
            config = cache_dir() / "litellm-config.yaml"
            _litellm_config(config, upstream_url.strip())
            port = _free_port()
            peer = _start_litellm(config, port)
            peer_url = f"http://127.0.0.1:{port}"
            _wait_ready(peer_url, peer, timeout=cfg.pickf(300.0, 300.0))
            with OpenAI(base_url=peer_url + "/v1", api_key=_KEY, max_retries=0) as peer_client:
                first = peer_client.chat.completions.create(**body)  # the miss: upstream
                time.sleep(1.0)  # LiteLLM writes its cache in a task after answering
                _stop(upstream)
                upstream = None  # from now on a miss would fail: every call is a hit
                again = peer_client.chat.completions.create(**body)
                theirs = answer.parse()
                if again.choices[0].message.content != theirs.choices[0].message.content:
                    raise AssertionError("the LiteLLM proxy answers otherwise")
                del first

                def ours() -> Any:
                    return ours_client.chat.completions.create(**body)

                def peer_call() -> Any:
                    return peer_client.chat.completions.create(**body)

                for _ in range(runs):
                    samples = interleave(
                        {"ours": per_call(ours, calls), "peer": per_call(peer_call, calls)},
                        reps=reps,
                        warmup=1,
                    )
                    ratios.append(paired_ratio(samples["ours"], samples["peer"]))
                    ours_all += samples["ours"]
                    peer_all += samples["peer"]
    finally:
        _stop(door)
        if upstream is not None:
            _stop(upstream)
        if peer is not None:
            _end(peer)
    ordered = sorted(ratios)
    return [
        Row(
            id="P18",
            what=(
                "openai SDK chat.completions.create of the realistic request: replay-actor"
                " serve vs the LiteLLM proxy answering from its in-memory cache (a hit)"
            ),
            unit="us",
            ours=Stats.of(ours_all),
            reference=Stats.of(peer_all),
            reference_name="same SDK call to `litellm --config` (cache: local), loopback",
            ratio=ordered[(len(ordered) - 1) // 2],
            ratio_means="ours / LiteLLM, median of per-round ratios",
            op="<=",
            bound=0.5,
            runs=ratios if len(ratios) > 1 else [],
        )
    ]
