"""P21: a frozen tool call (docs/tools.md).

An ``httpx2`` client's HTTPS ``GET`` of a search and JSON ``POST`` of a summary to a tool
host, replayed: the client runs under ``replay-actor run`` of a replay manifest, sealed
(the default namespace), so each call goes through the front door's proxy: a ``CONNECT``
tunnel whose TLS the run's authority terminates (once per connection), the exchange
read into an ``http`` request, hashed, answered by the cursor actor. The floor: the same
client, the same two calls to a bare server of the front door's own library (uvicorn on
h11, TLS with a certificate of the benchmark's own CA, a bare ASGI app returning the
same bytes) on 127.0.0.2. TLS on both sides, one connection kept alive on both.

Each side is its own client process, timing ``calls`` GET + POST pairs after a warm-up
and printing seconds per pair; the sides alternate, round by round.

``python -m benchmarks.tools bare CERT KEY`` is the floor server (it prints its URL);
``python -m benchmarks.tools client URL CALLS`` is the client.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from .frontdoor import Receive, Send, bare_app, serve_app
from .timing import Config, Row, Stats, interleave, paired_ratio
from .workload import cache_dir

__all__ = ["run_tools"]

HOST = "127.0.0.2"
#: The search's answer and the summary's: JSON of a realistic size (~2 KB, ~200 B).
SEARCH = json.dumps(
    {
        "query": "weather in Paris",
        "results": [
            {
                "title": f"Paris forecast {n}",
                "url": f"https://weather.example/{n}",
                "snippet": "x" * 120,
            }
            for n in range(10)
        ],
    }
).encode()
SUMMARY = json.dumps({"summary": "Sunny in Paris, 21C, a light wind from the west."}).encode()
POSTED = {"text": "Summarise: " + "Paris is sunny. " * 20, "max_words": 20}
_BARE = {"/search": bare_app(SEARCH), "/summarise": bare_app(SUMMARY)}


def _authority(folder: Path) -> tuple[Path, Path, Path]:
    """A CA of the benchmark's own and a certificate for 127.0.0.2: (ca, cert, key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "benchmark CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOST)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(HOST))]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = (folder / "tools-ca.pem", folder / "tools-cert.pem", folder / "tools-key.pem")
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


def _fixture(folder: Path, port: int) -> Path:
    from replay_actor import request_hash

    origin = {"kind": "http", "scheme": "https", "host": HOST, "port": port}
    search = {**origin, "method": "GET", "path": "/search", "query": [["q", "weather in Paris"]]}
    summary = {
        **origin,
        "method": "POST",
        "path": "/summarise",
        "headers": {"content-type": "application/json"},
        "json": POSTED,
    }
    lines = []
    for request, body in ((search, SEARCH), (summary, SUMMARY)):
        response = {
            "status": 200,
            "headers": [["content-type", "application/json"]],
            "text": body.decode(),
        }
        entry = {"schema_version": 1, "request_hash": request_hash(request), "response": response}
        lines.append(json.dumps(entry) + "\n")
    path = folder / "tools.jsonl"
    path.write_text("".join(lines))
    return path


def _client_env(**more: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
    }
    return {**env, **more}


def _time_client(argv: list[str], env: dict[str, str]) -> float:
    done = subprocess.run(argv, check=False, capture_output=True, text=True, env=env, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"the tool client failed: {done.stderr[-2000:]}")
    return float(json.loads(done.stdout.splitlines()[0])["seconds_per_pair"])


def run_tools(cfg: Config) -> list[Row]:
    folder = cache_dir()
    ca, cert, key = _authority(folder)
    floor = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.tools", "bare", str(cert), str(key)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert floor.stdout is not None
        url = floor.stdout.readline().strip()
        if not url:
            raise RuntimeError("the floor server did not start")
        port = int(url.rpartition(":")[2])
        manifest = folder / "tools.toml"
        manifest.write_text(f'[provider]\nkind = "replay"\nfixture = "{_fixture(folder, port)}"\n')
        calls = str(cfg.pick(300, 30))
        client = [sys.executable, "-m", "benchmarks.tools", "client", url, calls]
        ours = [sys.executable, "-m", "replay_actor", "run", str(manifest), "--", *client]
        env = _client_env(SSL_CERT_FILE=str(ca))  # run's roots, and the floor client's
        samples = interleave(
            {"ours": lambda: _time_client(ours, env), "floor": lambda: _time_client(client, env)},
            reps=cfg.pick(9, 3),
            warmup=1,
        )
    finally:
        floor.send_signal(signal.SIGTERM)
        try:
            floor.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            floor.kill()  # ours, by its PID
            floor.communicate()
    mine = Stats.of(samples["ours"])
    base = Stats.of(samples["floor"])
    return [
        Row(
            id="P21",
            what="httpx2 HTTPS GET + JSON POST to a tool host through the sealed proxy, replayed",
            unit="us",
            ours=mine,
            reference=base,
            reference_name="the same client, TLS to uvicorn + a bare ASGI app, the same bytes",
            ratio=mine.median / base.median,
            ratio_means="ours / floor (per GET + POST pair)",
            op="<=",
            bound=1.5,
            extra={"paired_median_ratio": paired_ratio(samples["ours"], samples["floor"])},
        )
    ]


# -- the client and the floor server, each in a process of its own -----------------------------


def _client(url: str, calls: int) -> None:
    import httpx2

    with httpx2.Client(timeout=30) as client:  # trust_env: the proxy and SSL_CERT_FILE

        def pair() -> None:
            got = client.get(url + "/search", params={"q": "weather in Paris"})
            if got.content != SEARCH:
                raise AssertionError(f"GET answered {got.status_code}: {got.text[:200]}")
            got = client.post(url + "/summarise", json=POSTED)
            if got.content != SUMMARY:
                raise AssertionError(f"POST answered {got.status_code}: {got.text[:200]}")

        for _ in range(max(10, calls // 10)):
            pair()
        start = time.perf_counter_ns()
        for _ in range(calls):
            pair()
        seconds = (time.perf_counter_ns() - start) / 1e9 / calls
    print(json.dumps({"seconds_per_pair": seconds}))


async def _bare(scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
    """The floor: each path's bytes, as P14's bare app answers."""
    await _BARE["/search" if scope.get("path") == "/search" else "/summarise"](scope, receive, send)


def _serve_bare(cert: str, key: str) -> None:
    serve_app(_bare, host=HOST, tls=(cert, key))


if __name__ == "__main__" and sys.argv[1:2] == ["bare"]:
    _serve_bare(sys.argv[2], sys.argv[3])
elif __name__ == "__main__" and sys.argv[1:2] == ["client"]:
    _client(sys.argv[2], int(sys.argv[3]))
