"""Incidental traffic (docs/front-door.md, "Incidental traffic"): a request for a host
the manifest ignores is refused at once and counted as ``ignored``, which does not fail
the run; the run log writes it as ``ignored`` and ``compare`` leaves it out; a blocked
host is named with the way out.

Hosts such as ``ignored.example`` only ever reach the front door's proxy (the child's
proxy variables point there), never a resolver."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest

from replay_actor.frontdoor.ignore import IgnoredHosts, host_of, split_authority
from replay_actor.serving import Outcomes
from tests.support.frontdoor_util import (
    CLI,
    neutral_hash,
    run_cli,
    serving,
    summary,
    write_fixture,
)

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(180)]

HI = [{"role": "user", "content": "hi"}]
PY = sys.executable
IGNORE = ["ignored.example", "*.hub.example", "port.example:8080"]

CHILD = textwrap.dedent(
    """
    import json, sys
    import httpx, openai
    out = {"content": openai.OpenAI().chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "hi"}]
    ).choices[0].message.content}
    with httpx.Client(timeout=20) as client:  # trust_env: the run's proxy variables
        for url in sys.argv[1:]:
            try:
                answer = client.get(url)
                out[url] = [answer.status_code, answer.json()["error"]]
            except httpx.ProxyError as exc:
                out[url] = ["refused", str(exc)]
    print(json.dumps(out))
    """
)


def _manifest(folder: Path, *, ignore: list[str] | None = IGNORE) -> Path:
    fixture = write_fixture(folder / "fixture.jsonl", {neutral_hash(HI): {"content": "hello"}})
    path = folder / "replay.toml"
    lines = ["[provider]", 'kind = "replay"', f"fixture = {json.dumps(str(fixture))}"]
    if ignore is not None:
        lines.append(f"ignore = {json.dumps(ignore)}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_ignored_hosts_are_refused_counted_and_do_not_fail_the_run(tmp_path: Path) -> None:
    urls = [
        "http://files.hub.example/model.bin",  # a name below *.hub.example
        "http://hub.example/",  # the domain itself
        "https://ignored.example/beacon",  # CONNECT ignored.example:443
        "http://port.example:8080/x",
    ]
    log = tmp_path / "run.log"
    done = run_cli(_manifest(tmp_path), [PY, "-c", CHILD, *urls], flags=("--log", str(log)))
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["content"] == "hello"
    for url in urls[:2] + urls[3:]:
        status, error = out[url]
        assert status == 403 and error["type"] == "replay_ignored"
        assert "provider.ignore" in error["message"]
    assert out[urls[2]][0] == "refused"
    line = summary(done.stderr)
    assert line.startswith("replay-actor: 1 served, 0 missed, 0 exhausted, 0 blocked, 4 ignored;")
    assert "blocked a request" not in done.stderr  # nothing named: they are expected
    logged = [json.loads(x) for x in log.read_text().splitlines()]
    ignored = sorted(x["path"] for x in logged if x["outcome"] == "ignored")
    assert ignored == ["files.hub.example", "hub.example", "ignored.example", "port.example"]


def test_a_host_not_ignored_is_a_tools_miss_named_with_the_way_out(tmp_path: Path) -> None:
    # Under a replay manifest another host's request is a tool's exchange (docs/tools.md):
    # one the fixture lacks is a miss, whose lines also name provider.ignore.
    urls = [
        "http://blocked.example/x",
        "http://port.example:9090/x",  # ignored on 8080 only
        "http://files.hub.example/x",
    ]
    done = run_cli(_manifest(tmp_path), [PY, "-c", CHILD, *urls])
    assert done.returncode == 4  # a miss fails the run
    out = json.loads(done.stdout)
    status, error = out[urls[0]]
    assert status == 422 and error["type"] == "replay_miss"
    assert out[urls[1]][1]["type"] == "replay_miss"
    assert out[urls[2]][1]["type"] == "replay_ignored"
    assert summary(done.stderr).startswith(
        "replay-actor: 1 served, 2 missed, 0 exhausted, 0 blocked, 1 ignored;"
    )
    assert (
        '  or, if it is incidental (telemetry, an update check, a download): add "'
        'blocked.example" to provider.ignore in the manifest '
        "(docs/front-door.md, 'Incidental traffic')"
    ) in done.stderr.splitlines()


def test_a_refused_request_names_the_way_out() -> None:
    from replay_actor.frontdoor.proxy import blocked_advice

    assert blocked_advice("blocked.example:443") == (
        'if it is incidental (telemetry, an update check, a download), add "blocked.example" '
        "to provider.ignore in the manifest; if the application needs its answers, record "
        "them (docs/front-door.md, 'Incidental traffic')"
    )


def test_without_ignore_the_summary_line_is_unchanged(tmp_path: Path) -> None:
    done = run_cli(_manifest(tmp_path, ignore=None), [PY, "-c", CHILD])
    assert done.returncode == 0, done.stderr
    assert summary(done.stderr).startswith(
        "replay-actor: 1 served, 0 missed, 0 exhausted, 0 blocked;"
    )


def test_compare_leaves_ignored_requests_out(tmp_path: Path) -> None:
    base, cand = tmp_path / "base.log", tmp_path / "cand.log"
    manifest = _manifest(tmp_path)
    beacon = ["https://ignored.example/beacon", "http://files.hub.example/x"]
    assert run_cli(manifest, [PY, "-c", CHILD, *beacon], flags=("--log", str(base))).returncode == 0
    assert run_cli(manifest, [PY, "-c", CHILD], flags=("--log", str(cand))).returncode == 0
    done = subprocess.run(
        [*CLI, "compare", str(base), str(cand), "--json"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(done.stdout)
    assert document["baseline"]["calls"] == document["candidate"]["calls"] == 1
    assert document["baseline"]["ignored"] == 2 and document["candidate"]["ignored"] == 0
    text = subprocess.run(
        [*CLI, "compare", str(base), str(cand)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert "(1 calls, 2 ignored requests, skipped lines 0" in text
    # Neither a sample nor a miss: a blocked beacon would have been both.
    assert "samples: 1: 1 identical, 0 diverged, 0 missed" in text


def test_serve_answers_an_ignored_host_it_is_asked_to_proxy(tmp_path: Path) -> None:
    with (
        serving(_manifest(tmp_path)) as (_, info),
        httpx.Client(proxy=info["url"], timeout=20) as client,
    ):
        ignored = client.get("http://files.hub.example/x")
        blocked = client.get("http://other.example/x")
    assert ignored.status_code == 403 and ignored.json()["error"]["type"] == "replay_ignored"
    assert ignored.headers["x-should-retry"] == "false"
    assert blocked.json()["error"]["type"] == "replay_blocked"


# -- the patterns ------------------------------------------------------------------------------


def test_patterns_match_hosts_domains_and_ports() -> None:
    hosts = IgnoredHosts(
        ["r.promptfoo.app", "*.huggingface.co", "only.example:8443", "[::1]", "10.0.0.1"],
        Outcomes(),
    )
    assert hosts
    for authority in (
        "r.promptfoo.app:443",
        "R.PROMPTFOO.APP.",
        "huggingface.co:443",
        "cdn-lfs.huggingface.co",
        "a.b.huggingface.co:80",
        "only.example:8443",
        "[::1]:443",
        "10.0.0.1:9",
    ):
        assert hosts.matches(authority), authority
    for authority in (
        "x.r.promptfoo.app",
        "promptfoo.app",
        "huggingface.com",
        "nothuggingface.co",
        "only.example:443",
        "only.example",
        "[::2]:443",
        "10.0.0.10",
    ):
        assert not hosts.matches(authority), authority
    assert not IgnoredHosts([], Outcomes()).matches("anything")
    assert split_authority("Host.Example.:443") == ("host.example", "443")
    assert split_authority("[::1]") == ("[::1]", None)
    assert host_of("api.promptfoo.dev:443") == "api.promptfoo.dev"


def test_an_ignored_answer_is_counted_and_logged() -> None:
    outcomes = Outcomes()
    logged: list[str] = []
    hosts = IgnoredHosts(["x.example"], outcomes, logged.append)
    sent: list[dict[str, Any]] = []

    async def send(message: Any) -> None:
        sent.append(message)

    asyncio.run(hosts.answer(send, "x.example:443"))
    assert outcomes["ignored"] == 1 and outcomes.failed_closed == 0
    assert logged == ["x.example"]
    assert sent[0]["status"] == 403
    assert json.loads(sent[1]["body"])["error"]["type"] == "replay_ignored"
