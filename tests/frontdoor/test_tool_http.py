"""A tool's HTTP(S) exchanges under ``replay-actor run`` (docs/tools.md): recorded through
the front door's proxy from a real HTTPS API on 127.0.0.2 (its own test CA, trusted by
``run`` through ``SSL_CERT_FILE``), then replayed sealed with the API gone, byte for byte;
a changed request is a miss with its ``add`` hint; credentials reach the tool and
nothing else; an event stream left open replays open; a vendor's own host is the front
door; a response over the fixture's ceiling is refused, never cut.

The clients are the ones applications use, unchanged: httpx2, requests, urllib and curl,
each reading the proxy and trust variables ``run`` sets."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from replay_actor import request_hash
from tests.support.frontdoor_util import (
    CLI,
    neutral_hash,
    quiet_env,
    record_manifest,
    replay_manifest,
    run_cli,
    summary,
    write_fixture,
)
from tests.support.tool_server import SearchAPI, TestAuthority

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(240)]

PY = sys.executable
#: A live table that is never asked: these runs' only calls are tools'.
NO_MODEL = "http://127.0.0.1:9/v1"
SECRET = "planted-secret-0d2c41f7a9"

CLIENTS = textwrap.dedent(
    """
    import json, sys, urllib.request
    import httpx2, requests
    url, plain_url = sys.argv[1], sys.argv[2]
    out = {}
    with httpx2.Client(timeout=30) as client:
        got = client.get(url + "/search", params={"q": "paris"})
        out["search"] = [got.status_code, got.text, got.headers.get("x-tool-edition")]
        got = client.post(url + "/summarise", json={"text": "Paris is sunny and warm today."})
        out["summarise"] = [got.status_code, got.text]
        with client.stream("GET", url + "/events") as got:
            out["events"] = [got.status_code, got.headers["content-type"], got.read().decode()]
        got = client.get(url + "/binary")
        out["binary"] = [got.status_code, got.content.hex()]
        got = client.get(url + "/status/404")
        out["status"] = [got.status_code, got.text]
        # Plain HTTP through the proxy, a request in absolute form.
        got = client.get(plain_url + "/search", params={"q": "bergen"})
        out["plain"] = [got.status_code, got.json()["results"]]
    got = requests.get(url + "/search", params={"q": "rome"}, timeout=30)
    out["requests"] = [got.status_code, got.text]
    with urllib.request.urlopen(url + "/search?q=oslo", timeout=30) as got:
        out["urllib"] = [got.status, got.read().decode()]
    print(json.dumps(out))
    """
)


def _record(
    folder: Path, api: SearchAPI, authority: TestAuthority, plain: SearchAPI
) -> tuple[Path, dict[str, Any]]:
    api.answers.update(paris=["Paris: sunny, 21C"], rome=["Rome: rain"], oslo=["Oslo: snow"])
    plain.answers["bergen"] = ["Bergen: rain, always"]
    manifest = record_manifest(folder, NO_MODEL)
    env = authority.environment(quiet_env())
    recorded = run_cli(manifest, [PY, "-c", CLIENTS, api.url, plain.url], env=env)
    assert recorded.returncode == 0, recorded.stderr
    assert summary(recorded.stderr).startswith("replay-actor: 8 served, 0 missed")
    assert "(8 recorded); not sealed" in summary(recorded.stderr)
    return folder / "recorded.jsonl", json.loads(recorded.stdout)


def test_tool_exchanges_recorded_then_replayed_sealed_with_the_tool_gone(
    tmp_path: Path, search_api: SearchAPI, tool_authority: TestAuthority
) -> None:
    with SearchAPI(None) as plain:
        fixture, live = _record(tmp_path, search_api, tool_authority, plain)
    search_api.close()
    assert live["search"] == [
        200,
        '{"results": ["Paris: sunny, 21C"], "query": "paris", "edition": 1}',
        "1",
    ]
    assert live["events"][1].startswith("text/event-stream")
    assert live["events"][2].count("event: tick") == 3
    assert live["binary"] == [200, (bytes(range(256)) * 4).hex()]
    assert live["status"][0] == 404  # a tool's own 404 is its answer, recorded
    assert live["plain"] == [200, ["Bergen: rain, always"]]
    manifest = replay_manifest(tmp_path, fixture, inspection=False)
    env = tool_authority.environment(quiet_env())
    urls = [search_api.url, plain.url]
    replays = [run_cli(manifest, [PY, "-c", CLIENTS, *urls], env=env) for _ in range(2)]
    for replay in replays:
        assert replay.returncode == 0, replay.stderr
        assert json.loads(replay.stdout) == live  # the very bytes, keys in the tool's order
        assert summary(replay.stderr).startswith("replay-actor: 8 served, 0 missed, 0 exhausted")
        assert summary(replay.stderr).endswith("; sealed (namespace)")


def test_a_changed_request_is_a_miss_with_the_add_hint(
    tmp_path: Path, search_api: SearchAPI, tool_authority: TestAuthority
) -> None:
    search_api.answers["paris"] = ["Paris: sunny, 21C"]
    code = textwrap.dedent(
        """
        import sys, httpx2
        got = httpx2.get(sys.argv[1] + "/search", params={"q": sys.argv[2]}, timeout=30)
        print(got.status_code, got.text)
        """
    )
    env = tool_authority.environment(quiet_env())
    manifest = record_manifest(tmp_path, NO_MODEL)
    assert run_cli(manifest, [PY, "-c", code, search_api.url, "paris"], env=env).returncode == 0
    search_api.close()
    fixture = tmp_path / "recorded.jsonl"
    replay = replay_manifest(tmp_path, fixture, inspection=False)
    missed = run_cli(replay, [PY, "-c", code, search_api.url, "rome"], env=env)
    assert missed.returncode == 4, missed.stderr  # the child exited 0: the miss is counted
    status, _, body = missed.stdout.strip().partition(" ")
    error = json.loads(body)["error"]
    assert status == "422" and error["type"] == "replay_miss"
    headline, _, hint = error["message"].partition("; to answer it: ")
    digest = headline.rpartition("request_hash: ")[2].rstrip(")")
    # The add command is in the error itself, naming the fixture the run replays.
    assert hint == f'replay-actor add {fixture} {digest} --content "THE ANSWER"'
    assert digest == request_hash(
        {
            "kind": "http",
            "method": "GET",
            "scheme": "https",
            "host": "127.0.0.2",
            "port": search_api.port,
            "path": "/search",
            "query": [["q", "rome"]],
        }
    )
    lines = missed.stderr.splitlines()
    assert (
        f"replay-actor: miss: no replay fixture matches this request (request_hash: {digest})"
        in lines
    )
    assert any(line.endswith("differs at: query[0][1]") for line in lines)
    assert any(
        line.startswith("  or:   replay-actor add ") and "--response RESPONSE.json" in line
        for line in lines
    )
    assert summary(missed.stderr).startswith("replay-actor: 0 served, 1 missed")
    # The authoring loop: explain, then answer it with a whole http response.
    explained = subprocess.run(
        [*CLI, "explain", str(fixture), digest],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert explained.returncode == 3
    assert 'query[0][1]: "paris" → "rome"' in explained.stdout
    answer = tmp_path / "rome.json"
    answer.write_text(
        json.dumps(
            {
                "status": 200,
                "headers": [["content-type", "application/json"]],
                "text": '{"results": ["Rome: rain"]}',
            }
        )
    )
    added = subprocess.run(
        [*CLI, "add", str(fixture), digest, "--response", str(answer)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert added.returncode == 0, added.stderr
    again = run_cli(replay, [PY, "-c", code, search_api.url, "rome"], env=env)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == '200 {"results": ["Rome: rain"]}'


CREDENTIALS = textwrap.dedent(
    """
    import sys, httpx2
    url, secret = sys.argv[1], sys.argv[2]
    with httpx2.Client(timeout=30, cookies={"session": secret}) as client:
        got = client.get(
            url + "/search",
            params={"q": "paris", "api_key": secret},
            headers={"Authorization": f"Bearer {secret}", "X-Api-Key": secret},
        )
        print(got.status_code, got.text)
        got = client.post(url + "/summarise", json={"text": "Paris today", "api_key": secret})
        print(got.status_code, got.text)
        got = client.post(url + "/summarise", data={"text": "x", "client_secret": secret})
        print(got.status_code)
    """
)


def _everything_written(folder: Path) -> str:
    return "\n".join(
        path.read_text(errors="replace") for path in sorted(folder.rglob("*")) if path.is_file()
    )


def test_credentials_reach_the_tool_and_nothing_else(
    tmp_path: Path, search_api: SearchAPI, tool_authority: TestAuthority
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    search_api.answers["paris"] = ["Paris: sunny, 21C"]
    manifest = record_manifest(work, NO_MODEL)
    env = tool_authority.environment(quiet_env())
    log = ("--log", str(work / "run.log"))
    recorded = run_cli(
        manifest, [PY, "-c", CREDENTIALS, search_api.url, SECRET], env=env, flags=log
    )
    assert recorded.returncode == 0, recorded.stderr
    # Forwarded: the tool got every credential the client sent.
    got = search_api.received
    assert got[0].headers["authorization"] == f"Bearer {SECRET}"
    assert got[0].headers["x-api-key"] == SECRET and SECRET in got[0].headers["cookie"]
    assert f"api_key={SECRET}" in got[0].path
    assert SECRET.encode() in got[1].body and SECRET.encode() in got[2].body
    # Recorded: none of them, anywhere (fixture, request sidecar, run log), nor said.
    assert SECRET not in _everything_written(work)
    assert SECRET not in recorded.stderr
    # Replayed with other credentials (a rotated key): the same requests, served.
    search_api.close()
    replay = work / "replay.toml"
    replay.write_text(
        '[provider]\nkind = "replay"\nfixture = "recorded.jsonl"\n'
        'inspection = "misses.jsonl"\nlog = "replay.log"\n'
    )
    replayed = run_cli(replay, [PY, "-c", CREDENTIALS, search_api.url, "another-secret"], env=env)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.stdout
    # A miss is said, logged and explained without them either.
    missed = run_cli(
        replay, [PY, "-c", CREDENTIALS.replace("paris", "rome"), search_api.url, SECRET], env=env
    )
    assert missed.returncode == 4
    assert SECRET not in missed.stderr and SECRET not in missed.stdout
    assert SECRET not in _everything_written(work)


def test_an_event_stream_the_client_left_open_replays_open(
    tmp_path: Path, search_api: SearchAPI, tool_authority: TestAuthority
) -> None:
    code = textwrap.dedent(
        """
        import json, sys, threading, httpx2
        out = {}
        with httpx2.Client(timeout=httpx2.Timeout(30, read=2.0)) as client:
            with client.stream("GET", sys.argv[1] + "/forever") as got:
                lines = got.iter_lines()
                out["first"] = [next(lines), next(lines), next(lines)]
                try:
                    out["then"] = next(lines)  # nothing more comes, and the stream stays
                except httpx2.ReadTimeout:
                    out["then"] = "still open"
        print(json.dumps(out))
        """
    )
    env = tool_authority.environment(quiet_env())
    recorded = run_cli(
        record_manifest(tmp_path, NO_MODEL), [PY, "-c", code, search_api.url], env=env
    )
    assert recorded.returncode == 0, recorded.stderr
    search_api.close()
    out = json.loads(recorded.stdout)
    assert out == {"first": ["event: hello", 'data: {"first": true}', ""], "then": "still open"}
    stored = json.loads((tmp_path / "recorded.jsonl").read_text())["response"]
    assert stored["open"] is True and stored["text"] == 'event: hello\ndata: {"first": true}\n\n'
    replay = replay_manifest(tmp_path, tmp_path / "recorded.jsonl", inspection=False)
    replayed = run_cli(replay, [PY, "-c", code, search_api.url], env=env)
    assert replayed.returncode == 0, replayed.stderr
    assert json.loads(replayed.stdout) == out


def test_a_vendor_host_is_answered_as_the_vendor_from_the_fixture(tmp_path: Path) -> None:
    # A client with a hard-coded https://api.openai.com/v1: through the proxy and the
    # tunnel, its call is the front door's, so it hashes as any chat call does.
    question = [{"role": "user", "content": "What is the capital of France?"}]
    fixture = write_fixture(
        tmp_path / "fixture.jsonl", {neutral_hash(question): {"content": "Paris"}}
    )
    code = textwrap.dedent(
        """
        import openai
        client = openai.OpenAI(base_url="https://api.openai.com/v1")
        answer = client.chat.completions.create(
            model="gpt-4.1-mini",
            messages=[{"role": "user", "content": "What is the capital of France?"}],
        )
        print(answer.choices[0].message.content)
        """
    )
    done = run_cli(replay_manifest(tmp_path, fixture), [PY, "-c", code], env=quiet_env())
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Paris"
    assert summary(done.stderr).startswith("replay-actor: 1 served, 0 missed")


def test_the_headers_the_manifest_names_are_hashed(
    tmp_path: Path, search_api: SearchAPI, tool_authority: TestAuthority
) -> None:
    code = textwrap.dedent(
        """
        import sys, httpx2
        language = {"accept-language": sys.argv[2]}
        got = httpx2.get(sys.argv[1] + "/search?q=paris", headers=language, timeout=30)
        print(got.status_code)
        """
    )
    env = tool_authority.environment(quiet_env())
    manifest = record_manifest(tmp_path, NO_MODEL)
    manifest.write_text(
        manifest.read_text().replace(
            "[provider.live]", 'http_headers = ["content-type", "Accept-Language"]\n[provider.live]'
        )
    )
    assert run_cli(manifest, [PY, "-c", code, search_api.url, "fr"], env=env).returncode == 0
    search_api.close()
    sidecar = (tmp_path / "recorded.jsonl.requests.jsonl").read_text()
    assert '"headers":{"accept-language":"fr"}' in sidecar
    replay = replay_manifest(tmp_path, tmp_path / "recorded.jsonl", inspection=False)
    replay.write_text(replay.read_text() + 'http_headers = ["accept-language"]\n')
    assert run_cli(replay, [PY, "-c", code, search_api.url, "fr"], env=env).stdout.strip() == "200"
    assert run_cli(replay, [PY, "-c", code, search_api.url, "de"], env=env).stdout.strip() == "422"
    replay.write_text(replay.read_text().replace('http_headers = ["accept-language"]\n', ""))
    # By default only content-type is hashed: the recorded request had another header set.
    assert run_cli(replay, [PY, "-c", code, search_api.url, "fr"], env=env).stdout.strip() == "422"


def test_an_answer_over_the_fixtures_ceiling_is_refused_never_cut(
    tmp_path: Path, search_api: SearchAPI, tool_authority: TestAuthority
) -> None:
    code = textwrap.dedent(
        """
        import sys, httpx2
        got = httpx2.get(sys.argv[1] + "/binary", timeout=30)
        print(got.status_code, got.json()["error"]["type"], got.json()["error"]["message"])
        """
    )
    manifest = record_manifest(tmp_path, NO_MODEL)
    manifest.write_text(
        manifest.read_text().replace(
            "[provider.live]", "[provider.ceilings]\nmax_response_bytes = 1000\n[provider.live]"
        )
    )
    done = run_cli(
        manifest, [PY, "-c", code, search_api.url], env=tool_authority.environment(quiet_env())
    )
    assert done.returncode == 4, done.stderr
    assert done.stdout.startswith("500 replay_error ")
    assert "response_too_large" in done.stdout
    assert (tmp_path / "recorded.jsonl").read_text() == ""
    assert ", 1 failed; fixture " in summary(done.stderr)


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_records_and_replays_through_the_proxy(
    tmp_path: Path, search_api: SearchAPI, tool_authority: TestAuthority
) -> None:
    search_api.answers["paris"] = ["Paris: sunny, 21C"]
    command = ["curl", "-sS", "--fail-with-body", f"{search_api.url}/search?q=paris"]
    env = tool_authority.environment(quiet_env())
    recorded = run_cli(record_manifest(tmp_path, NO_MODEL), command, env=env)
    assert recorded.returncode == 0, recorded.stderr
    search_api.close()
    replay = replay_manifest(tmp_path, tmp_path / "recorded.jsonl", inspection=False)
    replayed = run_cli(replay, command, env=env)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.stdout
    assert json.loads(replayed.stdout)["results"] == ["Paris: sunny, 21C"]
