"""The front door (docs/front-door.md): ``replay-actor serve`` and ``run`` as real processes, asked
over real sockets: the ready line, the token, routing, the scope header, the body
bound, slow clients, exactly-once under 1,000 concurrent requests, the child's
environment (a planted key never reaches it), exit status and fate-sharing."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx2
import openai
import psutil
import pytest

from replay_actor import openai_client
from replay_actor.frontdoor import MAX_BODY_BYTES
from replay_actor.frontdoor.environment import child_environment
from tests.support.chat_server import ChatServer
from tests.support.frontdoor_util import (
    CLI,
    live_manifest,
    misses,
    neutral_hash,
    replay_manifest,
    run_cli,
    serving,
    write_fixture,
)
from tests.support.procs import wait_gone

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(120)]

HI = [{"role": "user", "content": "hi"}]
BODY = {"model": "gpt-test", "messages": HI}


def chat_url(info: dict[str, str]) -> str:
    return info["openai_base_url"] + "/chat/completions"


def content(response: httpx2.Response) -> str:
    text: str = response.json()["choices"][0]["message"]["content"]
    return text


@pytest.fixture
def greeting(tmp_path: Path) -> Path:
    """A manifest whose fixture answers "hi" with a three-element sequence."""
    fixture = write_fixture(
        tmp_path / "fixture.jsonl",
        {neutral_hash(HI): [{"content": "one"}, {"content": "two"}, {"content": "three"}]},
    )
    return replay_manifest(tmp_path, fixture)


def test_ready_line_names_every_base_url_and_serve_exits_0_on_sigterm(greeting: Path) -> None:
    with serving(greeting) as (proc, info):
        assert set(info) == {
            "url",
            "openai_base_url",
            "anthropic_base_url",
            "gemini_base_url",
            "cohere_base_url",
            "token",
        }
        assert info["url"].startswith("http://127.0.0.1:")
        assert info["openai_base_url"] == info["url"] + "/v1"
        assert info["anthropic_base_url"] == info["gemini_base_url"] == info["url"]
        assert info["cohere_base_url"] == info["url"]
        assert len(info["token"]) >= 32
        # The vendor SDK joins its own path to the base URL.
        client = openai.OpenAI(base_url=info["openai_base_url"], api_key=info["token"])
        answer = client.chat.completions.create(model="gpt-test", messages=HI)  # type: ignore[arg-type]
        assert answer.choices[0].message.content == "one"
        client.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def test_sigint_ends_serve_with_0_and_the_actor_with_it(greeting: Path) -> None:
    with serving(greeting) as (proc, _info):
        descendants = psutil.Process(proc.pid).children(recursive=True)
        assert descendants  # the cursor actor (and the zygote it came from)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        for child in descendants:
            assert wait_gone(child.pid)


def test_each_start_has_its_own_token(greeting: Path) -> None:
    with serving(greeting) as (_p1, first), serving(greeting) as (_p2, second):
        assert first["token"] != second["token"]
        assert first["url"] != second["url"]


def test_the_token_in_any_of_the_three_headers_and_401_without_it(greeting: Path) -> None:
    with serving(greeting) as (_proc, info), httpx2.Client(timeout=30) as http:
        token = info["token"]
        refused = [
            {},
            {"authorization": "Bearer wrong"},
            {"x-api-key": token[:-1]},
            {"x-goog-api-key": token + "x"},
            {"authorization": token},  # no scheme
            {"authorization": "Basic " + token},
        ]
        for headers in refused:
            answer = http.post(chat_url(info), json=BODY, headers=headers)
            assert answer.status_code == 401
            assert answer.headers["x-should-retry"] == "false"
            assert answer.json()["error"]["type"] == "unauthorized"
        # Not one element was consumed by the refused requests: the first is still next.
        accepted = [
            {"authorization": "Bearer " + token},
            {"x-api-key": token},
            {"x-goog-api-key": token},
        ]
        got = [
            content(http.post(chat_url(info), json=BODY, headers=headers)) for headers in accepted
        ]
        assert got == ["one", "two", "three"]
        # An Anthropic path gets Anthropic's envelope.
        answer = http.post(info["anthropic_base_url"] + "/v1/messages", json={})
        assert answer.status_code == 401
        assert answer.json()["type"] == "error"


def test_curl_with_each_header_form(greeting: Path) -> None:
    with serving(greeting) as (_proc, info):
        token = info["token"]
        seen = []
        for header in (f"Authorization: Bearer {token}", f"x-api-key: {token}",
                       f"x-goog-api-key: {token}", "x-api-key: nope"):  # fmt: skip
            out = subprocess.run(
                ["curl", "-sS", "-w", "\n%{http_code}", "-H", header, "-H",
                 "content-type: application/json", "-d", json.dumps(BODY), chat_url(info)],
                capture_output=True, text=True, timeout=30, check=True,
            )  # fmt: skip
            body, _, status = out.stdout.rpartition("\n")
            seen.append((status, json.loads(body)))
        assert [s for s, _ in seen] == ["200", "200", "200", "401"]
        assert [b["choices"][0]["message"]["content"] for _, b in seen[:3]] == [
            "one",
            "two",
            "three",
        ]


def test_misses_and_unknown_paths_are_vendor_errors_never_retried(tmp_path: Path) -> None:
    fixture = write_fixture(tmp_path / "f.jsonl", {neutral_hash(HI): {"content": "x"}})
    manifest = replay_manifest(tmp_path, fixture)
    with serving(manifest) as (_proc, info):
        client = openai.OpenAI(base_url=info["openai_base_url"], api_key=info["token"])
        with pytest.raises(openai.UnprocessableEntityError) as caught:
            client.chat.completions.create(
                model="gpt-test", messages=[{"role": "user", "content": "other"}]
            )
        digest = neutral_hash([{"role": "user", "content": "other"}])
        assert caught.value.message == (
            f"Error code: 422 - no replay fixture matches this request (request_hash: {digest}); "
            f'to answer it: replay-actor add {fixture} {digest} --content "THE ANSWER"'
        )
        client.close()
        with httpx2.Client(timeout=30, headers={"x-api-key": info["token"]}) as http:
            answer = http.get(info["url"] + "/v1/models")
            assert answer.status_code == 404
            assert answer.headers["x-should-retry"] == "false"
            assert "GET /v1/models" in answer.json()["error"]["message"]
    # The SDK (max_retries 2 by default) asked once: one miss in the record.
    assert [event["event"] for event in misses(tmp_path)] == ["miss"]


def test_private_mode_puts_no_hash_in_any_answer(tmp_path: Path) -> None:
    fixture = write_fixture(tmp_path / "f.jsonl", {neutral_hash(HI): [{"content": "x"}]})
    manifest = replay_manifest(tmp_path, fixture, private=True)
    with serving(manifest) as (_proc, info), httpx2.Client(timeout=30) as http:
        headers = {"x-api-key": info["token"]}
        answers = [
            http.post(chat_url(info), json=BODY, headers=headers),
            http.post(chat_url(info), json=BODY, headers=headers),  # exhausted
            http.post(chat_url(info), json={**BODY, "messages": [HI[0], HI[0]]}, headers=headers),
            http.post(
                info["url"] + "/v1/messages",
                json={
                    "model": "c",
                    "max_tokens": 5,
                    "messages": [{"role": "user", "content": "q"}],
                },
                headers=headers,
            ),
        ]
        assert [a.status_code for a in answers] == [200, 422, 422, 422]
        for answer in answers:
            raw = answer.content + json.dumps(dict(answer.headers)).encode()
            assert b"sha256" not in raw
        exhausted = answers[1].json()["error"]["message"]
        assert exhausted.startswith("replay sequence exhausted for this request; to answer it: ")
    # The owner-only record has them.
    assert [e["event"] for e in misses(tmp_path)] == ["exhausted", "miss", "miss"]


SCOPED = neutral_hash(HI, scope={"epoch": 2})


@pytest.fixture
def scoped(tmp_path: Path) -> Path:
    fixture = write_fixture(
        tmp_path / "f.jsonl",
        {
            SCOPED: {"content": "epoch two"},
            neutral_hash(HI): {"content": "unscoped"},
            neutral_hash(HI, scope={"rollout": "été"}): {"content": "utf-8 scope"},
        },
    )
    return replay_manifest(tmp_path, fixture)


def test_the_scope_header_sets_the_requests_scope(scoped: Path) -> None:
    with serving(scoped) as (_proc, info), httpx2.Client(timeout=30) as http:
        auth = {"x-api-key": info["token"]}
        hit = http.post(
            chat_url(info), json=BODY, headers={**auth, "X-Replay-Scope": '{"epoch": 2}'}
        )
        assert content(hit) == "epoch two"
        assert content(http.post(chat_url(info), json=BODY, headers=auth)) == "unscoped"
        utf8 = {
            b"x-api-key": info["token"].encode(),
            b"x-replay-scope": '{"rollout": "été"}'.encode(),
        }
        assert content(http.post(chat_url(info), json=BODY, headers=utf8)) == "utf-8 scope"
        other = http.post(
            chat_url(info), json=BODY, headers={**auth, "x-replay-scope": '{"epoch": 3}'}
        )
        assert other.status_code == 422  # a miss
        for bad in ("[1]", "{not json", '"epoch"', "null"):
            answer = http.post(chat_url(info), json=BODY, headers={**auth, "x-replay-scope": bad})
            assert answer.status_code == 400
            assert answer.headers["x-should-retry"] == "false"
            assert "x-replay-scope" in answer.json()["error"]["message"]
        # A scope the request model refuses (a float beyond JSON's exact range) is a 400 too.
        answer = http.post(
            chat_url(info), json=BODY, headers={**auth, "x-replay-scope": '{"n": 1e400}'}
        )
        assert answer.status_code == 400


def test_the_in_process_transports_honour_the_scope_header(scoped: Path) -> None:
    client = openai_client(scoped, default_headers={"x-replay-scope": '{"epoch": 2}'})
    try:
        answer = client.chat.completions.create(model="gpt-test", messages=HI)  # type: ignore[arg-type]
        assert answer.choices[0].message.content == "epoch two"
        with pytest.raises(openai.BadRequestError, match="x-replay-scope"):
            client.chat.completions.create(
                model="gpt-test",
                messages=HI,  # type: ignore[arg-type]
                extra_headers={"x-replay-scope": "[]"},
            )
    finally:
        client.close()


def _raw(info: dict[str, str]) -> socket.socket:
    host, _, port = info["url"].removeprefix("http://").rpartition(":")
    return socket.create_connection((host, int(port)), timeout=30)


def _status(sock: socket.socket) -> int:
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return int(data.split(b" ", 2)[1])


def test_an_oversized_body_is_refused_at_the_bound(greeting: Path) -> None:
    with serving(greeting) as (_proc, info):
        head = (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nx-api-key: {info['token']}\r\n"
            "content-type: application/json\r\n"
        )
        # Declared too large: refused before a byte of the body is read.
        with _raw(info) as sock:
            sock.sendall(f"{head}content-length: {MAX_BODY_BYTES + 1}\r\n\r\n".encode())
            assert _status(sock) == 413
        # Chunked, growing past the bound: refused once it does.
        with _raw(info) as sock:
            sock.sendall(f"{head}transfer-encoding: chunked\r\n\r\n".encode())
            chunk = b"x" * (1024 * 1024)
            for _ in range(MAX_BODY_BYTES // len(chunk)):
                sock.sendall(b"%x\r\n%b\r\n" % (len(chunk), chunk))
            sock.sendall(b"1\r\nx\r\n")
            assert _status(sock) == 413
        with httpx2.Client(timeout=30) as http:
            answer = http.post(chat_url(info), json=BODY, headers={"x-api-key": info["token"]})
            assert content(answer) == "one"  # nothing was consumed by the refused ones


def test_a_stalled_client_does_not_delay_the_others(greeting: Path) -> None:
    with serving(greeting) as (_proc, info):
        token = info["token"]
        stalled = []
        # Half the headers; the full headers and half the body; connected, nothing sent.
        for part in (
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n",
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
            + f"x-api-key: {token}\r\ncontent-length: 200\r\n\r\n".encode()
            + b'{"model": "m", "messages": [',
            b"",
        ):
            sock = _raw(info)
            sock.sendall(part)
            stalled.append(sock)
        try:
            with httpx2.Client(timeout=30) as http:
                got = [
                    content(http.post(chat_url(info), json=BODY, headers={"x-api-key": token}))
                    for _ in range(2)
                ]
            assert got == ["one", "two"]
        finally:
            for sock in stalled:
                sock.close()
        # The half-sent request, abandoned, was never asked of the provider.
        with httpx2.Client(timeout=30) as http:
            answer = http.post(chat_url(info), json=BODY, headers={"x-api-key": token})
            assert content(answer) == "three"


def test_a_thousand_concurrent_requests_each_get_one_element(tmp_path: Path) -> None:
    elements = [{"content": f"r{i}"} for i in range(1000)]
    fixture = write_fixture(tmp_path / "f.jsonl", {neutral_hash(HI): elements})
    manifest = replay_manifest(tmp_path, fixture)

    async def ask_all(info: dict[str, str]) -> list[httpx2.Response]:
        limits = httpx2.Limits(max_connections=1000, max_keepalive_connections=1000)
        async with httpx2.AsyncClient(timeout=60, limits=limits) as http:
            headers = {"authorization": "Bearer " + info["token"]}
            return await asyncio.gather(
                *(http.post(chat_url(info), json=BODY, headers=headers) for _ in range(1000))
            )

    # 1,000 client sockets here and as many in the server (which inherits the limit).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 4096 if hard == resource.RLIM_INFINITY else min(4096, hard)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    with serving(manifest) as (_proc, info):
        answers = asyncio.run(ask_all(info))
        assert all(a.status_code == 200 for a in answers)
        got = sorted(content(a) for a in answers)
        assert got == sorted(f"r{i}" for i in range(1000))
        with httpx2.Client(timeout=30) as http:
            extra = http.post(chat_url(info), json=BODY, headers={"x-api-key": info["token"]})
            assert extra.status_code == 422
            assert extra.json()["error"]["type"] == "replay_exhausted"


# -- run ---------------------------------------------------------------------------------

CHILD_CHAT = textwrap.dedent(
    """
    import json, os, sys
    import openai
    client = openai.OpenAI()
    answer = client.chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "hi"}]
    )
    print(json.dumps({"content": answer.choices[0].message.content, "env": dict(os.environ)}))
    """
)


def test_run_gives_the_child_the_front_door_and_exits_with_its_status(greeting: Path) -> None:
    done = run_cli(greeting, [sys.executable, "-c", CHILD_CHAT])
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["content"] == "one"
    env = out["env"]
    token = env["OPENAI_API_KEY"]
    assert env["ANTHROPIC_API_KEY"] == env["GEMINI_API_KEY"] == token
    url = env["ANTHROPIC_BASE_URL"]
    assert url.startswith("http://127.0.0.1:")
    assert env["OPENAI_BASE_URL"] == env["OPENAI_API_BASE"] == url + "/v1"
    assert env["GOOGLE_GEMINI_BASE_URL"] == url


def test_run_keeps_the_real_key_from_the_child(chat: ChatServer, tmp_path: Path) -> None:
    planted = "sk-planted-" + os.urandom(12).hex()
    manifest = live_manifest(tmp_path, chat.base_url("echo"), api_key_env="PLANTED_KEY")
    env = dict(os.environ)
    # The key under its own name, under the SDK's name, and under an unrelated one.
    env.update(PLANTED_KEY=planted, OPENAI_API_KEY=planted, SOMETHING_ELSE=planted)
    env["ANTHROPIC_AUTH_TOKEN"] = "real-anthropic-token"
    done = run_cli(manifest, [sys.executable, "-c", CHILD_CHAT], env=env)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["content"] == "1: hi"  # answered live, through the front door
    child_env = out["env"]
    assert not any(planted in value for value in child_env.values())
    assert "PLANTED_KEY" not in child_env and "SOMETHING_ELSE" not in child_env
    assert "ANTHROPIC_AUTH_TOKEN" not in child_env
    # The live endpoint got the real key (from run), the front door only the token.
    assert chat.received[0].headers["authorization"] == f"Bearer {planted}"
    assert planted not in done.stdout + done.stderr


def test_child_environment_removes_the_named_keys_and_their_values() -> None:
    info = {
        "url": "http://h",
        "openai_base_url": "http://h/v1",
        "anthropic_base_url": "http://h",
        "gemini_base_url": "http://h",
        "token": "tok",
    }
    env = child_environment({"K": "s3cret", "COPY": "s3cret", "PATH": "/bin"}, info, {"K"})
    assert env["PATH"] == "/bin"
    assert "K" not in env and "COPY" not in env
    assert env["OPENAI_API_KEY"] == "tok"


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("import sys; sys.exit(7)", 7),
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", 128 + 9),
        ("pass", 0),
    ],
)
def test_run_exits_with_the_childs_status(greeting: Path, code: str, status: int) -> None:
    assert run_cli(greeting, [sys.executable, "-c", code]).returncode == status


def test_run_without_a_command_or_with_a_missing_one(greeting: Path) -> None:
    assert run_cli(greeting, ["/nonexistent/command"]).returncode == 127
    done = subprocess.run(
        [*CLI, "run", str(greeting)], check=False, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "COMMAND" in done.stderr


WAITING_CHILD = textwrap.dedent(
    """
    import os, signal, sys, time
    def ended(sig, frame):
        open(sys.argv[1] + ".term", "w").close()
        sys.exit(42)
    signal.signal(signal.SIGTERM, ended)
    signal.signal(signal.SIGINT, ended)
    open(sys.argv[1] + ".tmp", "w").write(str(os.getpid()))
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    time.sleep(60)
    """
)


def _start_run(manifest: Path, marker: Path) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [*CLI, "run", str(manifest), "--", sys.executable, "-c", WAITING_CHILD, str(marker)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    return proc, int(marker.read_text())


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_run_is_forwarded_to_the_child(
    greeting: Path, tmp_path: Path, sig: signal.Signals
) -> None:
    proc, child = _start_run(greeting, tmp_path / "child.pid")
    proc.send_signal(sig)
    assert proc.wait(timeout=60) == 42
    proc.communicate()
    assert (tmp_path / "child.pid.term").exists()
    assert wait_gone(child)


def test_run_killed_leaves_no_actor_no_server_and_terminates_the_child(
    greeting: Path, tmp_path: Path
) -> None:
    proc, child = _start_run(greeting, tmp_path / "child.pid")
    descendants = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
    assert child in descendants and len(descendants) >= 2  # the child and the actor
    env = psutil.Process(child).environ()
    url = env["ANTHROPIC_BASE_URL"]
    proc.kill()
    proc.wait(timeout=30)
    proc.communicate()
    for pid in descendants:
        assert wait_gone(pid), pid
    # The child was sent SIGTERM by the parent-death signal (its handler left the mark).
    assert (tmp_path / "child.pid.term").exists()
    with pytest.raises(httpx2.ConnectError):
        httpx2.post(url + "/v1/messages", json={}, timeout=10)


def test_run_refuses_a_bad_manifest_before_starting_anything(tmp_path: Path) -> None:
    manifest = tmp_path / "bad.toml"
    manifest.write_text('[provider]\nkind = "nope"\n')
    done = run_cli(manifest, [sys.executable, "-c", "print('ran')"])
    assert done.returncode == 1
    assert "ran" not in done.stdout
    assert "kind" in done.stderr


def test_the_listening_socket_says_tcp_so_answers_are_not_held_by_nagle() -> None:
    # asyncio sets TCP_NODELAY on accepted connections only for proto IPPROTO_TCP; with
    # proto 0 every answer waited ~40 ms for the client's delayed ACK (found by P14).
    from replay_actor.frontdoor.server import _bind

    sock = _bind("127.0.0.1", 0)
    try:
        assert sock.proto == socket.IPPROTO_TCP
    finally:
        sock.close()


def test_a_bug_in_serving_is_a_500_never_retried_and_counted(tmp_path: Path) -> None:
    # A serving that raises (a bug) must still fail the run: the 500 the app answers
    # with is counted as failed, so a child that swallows it cannot exit 0 under run.
    from replay_actor import open_provider
    from replay_actor.frontdoor.app import FrontDoorApp
    from replay_actor.serving import AsyncServing, Outcomes

    class Broken(AsyncServing):
        async def serve(self, *args: object, **kwargs: object) -> Any:
            raise RuntimeError("a planted bug")

    outcomes = Outcomes()
    fixture = write_fixture(tmp_path / "f.jsonl", {})
    serving = Broken(open_provider({"provider": {"kind": "replay", "fixture": str(fixture)}}))
    serving.outcomes = outcomes
    app = FrontDoorApp(serving, "token")
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(dict(message))

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/chat/completions",
        "headers": [(b"authorization", b"Bearer token")],
    }
    try:
        asyncio.run(app(scope, receive, send))
    finally:
        serving.provider.release()
    start, body = sent
    assert start["status"] == 500
    assert (b"x-should-retry", b"false") in start["headers"]
    assert json.loads(body["body"])["error"]["message"] == "internal error (RuntimeError)"
    assert outcomes["failed"] == 1 and outcomes.failed_closed == 1


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("no_leaks")
def test_only_the_serving_process_tunes_its_collector(greeting: Path) -> None:
    """``serve`` and ``run`` freeze what they loaded and collect young objects rarely
    (docs/front-door.md, "Under load"); a library caller's front door leaves its
    process's collector as it was."""
    code = textwrap.dedent(
        f"""
        import asyncio, gc, json
        from replay_actor import open_provider, read_manifest
        from replay_actor.frontdoor import FrontDoor
        from replay_actor.frontdoor.server import tune_collector
        before = gc.get_threshold()

        async def main():
            door = FrontDoor(open_provider(read_manifest({str(greeting)!r})))
            await door.start()
            await door.wait_closed()

        asyncio.run(main())
        untouched = gc.get_threshold() == before and gc.get_freeze_count() == 0
        tune_collector()
        print(json.dumps([untouched, gc.get_threshold()[0], gc.get_freeze_count() > 0]))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=50, check=True
    )
    assert json.loads(done.stdout) == [True, 50_000, True]
