"""Recording under a vendor's rate limits: 429s with ``retry-after``, 500s and answers
that never come, on a share of the calls. A record run of thousands of calls completes,
records no failure, and its summary says how many retries it made.

The vendor is a loopback server (``FlakyServer``) that decides each attempt's fate with a
seeded generator and counts what it did; every attempt after a call's first is a retry,
so the retries the summary reports are exactly the attempts the vendor received less
the calls.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replay_actor import LiveProviderError, load_fixture, open_provider
from replay_actor.frontdoor.summary import summary_line
from replay_actor.serving import Outcomes
from tests.support.chat_server import JSONHandler, LoopbackServer, _completion

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(300)]


class _Handler(JSONHandler):
    def do_POST(self) -> None:
        got, _ = self._receive()
        server: FlakyServer = self.server.owner
        fate = server.fate()
        if fate == "429":
            header = {"retry-after-ms": "20"} if server.coin() else {"retry-after": "0"}
            self._send(429, b'{"error":{"code":"rate_limit_exceeded"}}', header)
        elif fate == "500":
            self._send(500, b'{"error":{"type":"server_error"}}')
        elif fate == "stall":
            server.stopping.wait(30)  # far past the client's deadline
            self._send(200, _completion("too late", None, "stop"))
        else:
            content = got.body["messages"][-1]["content"]
            self._send(200, _completion(f"ok: {content}", None, "stop"))


class FlakyServer(LoopbackServer):
    """Per attempt: 10 % 429 (``retry-after`` 0 s or ``retry-after-ms`` 20), 6 % 500,
    2 % no answer within 30 s; otherwise an answer that echoes the prompt."""

    handler = _Handler
    name = "flaky-server"

    def __init__(self) -> None:
        self._rng = random.Random(7)
        self._fates = threading.Lock()
        self.served: dict[str, int] = {"429": 0, "500": 0, "stall": 0, "ok": 0}
        #: Every attempt's fate, when set.
        self.forced: str | None = None
        super().__init__()

    def fate(self) -> str:
        with self._fates:
            if self.forced is not None:
                self.served[self.forced] += 1
                return self.forced
            draw = self._rng.random()
            fate = (
                "429" if draw < 0.10 else "500" if draw < 0.16 else "stall" if draw < 0.18 else "ok"
            )
            self.served[fate] += 1
            return fate

    def coin(self) -> bool:
        with self._fates:
            return self._rng.random() < 0.5

    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


@pytest.fixture
def flaky() -> Iterator[FlakyServer]:
    server = FlakyServer()
    try:
        yield server
    finally:
        server.close()


def _live(server: FlakyServer) -> dict[str, Any]:
    return {
        "adapter": "openai",
        "model": "m",
        "base_url": server.base_url(),
        "timeout": 2.0,
        "max_retries": 10,
        "retry_backoff": 0.01,
        "retry_max_wait": 0.2,
    }


CLIENT = textwrap.dedent(
    """
    import asyncio, os, sys
    import httpx2

    calls, concurrency = int(sys.argv[1]), int(sys.argv[2])

    async def main():
        url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
        headers = {"authorization": "Bearer " + os.environ["OPENAI_API_KEY"]}
        todo = iter(range(calls))
        bad = []
        async with httpx2.AsyncClient(timeout=120, trust_env=False) as client:
            async def worker():
                for i in todo:
                    body = {"model": "m", "messages": [{"role": "user", "content": f"q{i}"}]}
                    answer = await client.post(url, json=body, headers=headers)
                    if answer.status_code != 200:
                        bad.append(answer.status_code)
            await asyncio.gather(*(worker() for _ in range(concurrency)))
        print(len(bad))

    asyncio.run(main())
    """
)


def test_a_record_run_rides_out_rate_limits(flaky: FlakyServer, tmp_path: Path) -> None:
    calls = 2000
    manifest = tmp_path / "record.toml"
    table = "\n".join(f"{key} = {json.dumps(value)}" for key, value in _live(flaky).items())
    manifest.write_text(
        f'[provider]\nkind = "record"\nfixture = "f.jsonl"\n[provider.live]\n{table}\n'
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "replay_actor",
            "run",
            str(manifest),
            "--",
            sys.executable,
            "-c",
            CLIENT,
            str(calls),
            "32",
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "0"  # every call of the application succeeded
    attempts = sum(flaky.served.values())
    failed = attempts - flaky.served["ok"]
    retries = attempts - calls
    assert failed > 100  # the limits did bite
    summary = done.stderr.strip().splitlines()[-1]
    assert re.fullmatch(
        rf"replay-actor: {calls} served, 0 missed, 0 exhausted, 0 blocked; "
        rf"fixture sha256:[0-9a-f]{{64}} \({calls} recorded\); {retries} retries; not sealed",
        summary,
    ), summary
    # Timeouts the vendor did not cause (a slow answer on a loaded machine) are retries
    # too; every failure it served is one.
    assert retries >= failed
    loaded = load_fixture(tmp_path / "f.jsonl")
    assert (len(loaded), loaded.responses) == (calls, calls)
    contents = {
        r["content"] for h in loaded.request_hashes() for r in loaded.responses_for(h) or []
    }
    assert contents == {f"ok: q{i}" for i in range(calls)}  # no failure recorded


def test_the_retries_are_counted_in_process(flaky: FlakyServer, tmp_path: Path) -> None:
    manifest = {
        "provider": {"kind": "record", "fixture": str(tmp_path / "g.jsonl"), "live": _live(flaky)}
    }

    async def ask(provider: Any) -> None:
        await asyncio.gather(
            *(
                provider.acomplete({"messages": [{"role": "user", "content": f"a{i}"}]})
                for i in range(100)
            )
        )

    with open_provider(manifest) as rec:
        for i in range(100):
            rec.complete({"messages": [{"role": "user", "content": f"s{i}"}]})
        asyncio.run(ask(rec))
        snapshot = rec.snapshot()
    assert snapshot["retries"] == sum(flaky.served.values()) - 200
    assert snapshot["recorded"] == 200


def test_a_call_that_fails_after_its_retries_records_nothing(
    flaky: FlakyServer, tmp_path: Path
) -> None:
    flaky.forced = "500"
    table = {**_live(flaky), "max_retries": 1}
    manifest = {"provider": {"kind": "record", "fixture": str(tmp_path / "h.jsonl"), "live": table}}
    with open_provider(manifest) as rec, pytest.raises(LiveProviderError):
        rec.complete({"messages": [{"role": "user", "content": "x"}]})
    assert rec.snapshot()["retries"] == 1
    assert load_fixture(tmp_path / "h.jsonl").responses == 0


def test_the_summary_says_the_retries_only_when_there_were_some() -> None:
    outcomes = Outcomes()
    outcomes.add("served")
    snapshot = {"kind": "record", "fixture_set_hash": "sha256:" + "0" * 64, "recorded": 1}
    tail = "(1 recorded); not sealed"
    assert summary_line(outcomes, {**snapshot, "retries": 0}, "off").endswith(tail)
    assert summary_line(outcomes, {**snapshot, "retries": 1}, "off").endswith(
        "(1 recorded); 1 retry; not sealed"
    )
    live = {"kind": "live", "adapter": "openai", "model": "m", "retries": 12}
    assert summary_line(outcomes, live, "off").endswith("; live openai m; 12 retries; not sealed")
