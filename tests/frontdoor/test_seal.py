"""A sealed run (docs/front-door.md, "The seal" and "Nothing fails quietly"): under
``replay-actor run`` COMMAND reaches the front door and nothing else, a proxied request
for another host is answered from the fixture or missed (docs/tools.md), named and
counted (``serve``, which freezes no tools, refuses it), no real key reaches the child in
any form, every run ends with one summary line, and a call that failed closed makes
``run`` exit 4.

Every probe aims at 127.0.0.1: a listener of this test's own on the host's loopback
stands for "anything else"; names such as ``vendor.example`` only ever reach the front
door's proxy refusal, never a resolver."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import httpx2
import pytest

from replay_actor.adapters._secrets import holds_key_piece
from replay_actor.frontdoor.environment import (
    BASE_URL_VARIABLES,
    KEY_VARIABLES,
    REMOVED_VARIABLES,
    child_environment,
    foreign_key_warning,
)
from replay_actor.integrations.httpx_transport import HttpxProviderTransport
from replay_actor.integrations.transport import AsyncProviderTransport, ProviderTransport
from replay_actor.manifest import open_provider
from tests.support.chat_server import ChatServer
from tests.support.frontdoor_util import (
    live_manifest,
    neutral_hash,
    record_manifest,
    replay_manifest,
    run_cli,
    serving,
    summary,
    write_fixture,
)
from tests.support.unprivileged import (
    NOBODY,
    as_nobody,
    readable_by_all,
    readable_copy,
    system_python,
)

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(180)]

HI = [{"role": "user", "content": "hi"}]
PY = sys.executable


@pytest.fixture
def greeting(tmp_path: Path) -> Path:
    """A replay manifest answering "hi" once with "hello" (a second ask is exhausted)."""
    fixture = write_fixture(tmp_path / "fixture.jsonl", {neutral_hash(HI): [{"content": "hello"}]})
    return replay_manifest(tmp_path, fixture)


@pytest.fixture
def host_listener() -> Iterator[socket.socket]:
    """A service on the host's own 127.0.0.1: what a sealed child must not reach."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    sock.setblocking(False)
    yield sock
    sock.close()


def accepted(sock: socket.socket) -> int:
    count = 0
    while True:
        try:
            conn, _ = sock.accept()
        except BlockingIOError:
            return count
        conn.close()
        count += 1


def port_of(sock: socket.socket) -> str:
    return str(sock.getsockname()[1])


# -- the namespace seal ----------------------------------------------------------------------

PROBE = textwrap.dedent(
    """
    import json, socket, sys, time
    import openai
    out = {}
    answer = openai.OpenAI().chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "hi"}]
    )
    out["content"] = answer.choices[0].message.content
    start = time.monotonic()
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20).close()
        out["host"] = "connected"
    except OSError as exc:
        out["host"] = type(exc).__name__
    out["seconds"] = time.monotonic() - start
    print(json.dumps(out))
    """
)


def test_a_sealed_child_reaches_the_front_door_and_nothing_else(
    greeting: Path, host_listener: socket.socket
) -> None:
    done = run_cli(greeting, [PY, "-c", PROBE, port_of(host_listener)])
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["content"] == "hello"  # the SDK's call replayed through the front door
    assert out["host"] == "ConnectionRefusedError"  # the host's loopback is not there
    assert out["seconds"] < 5  # at once, not after a timeout
    assert accepted(host_listener) == 0
    assert summary(done.stderr) == (
        "replay-actor: 1 served, 0 missed, 0 exhausted, 0 blocked; "
        f"fixture {_fixture_hash(greeting)}; sealed (namespace)"
    )


def test_the_same_probe_unsealed_reaches_the_host(
    greeting: Path, host_listener: socket.socket
) -> None:
    # The control: what the seal takes away is there without it.
    done = run_cli(greeting, [PY, "-c", PROBE, port_of(host_listener)], flags=("--seal", "off"))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["host"] == "connected"
    assert accepted(host_listener) == 1
    assert summary(done.stderr).endswith("; not sealed")


def _fixture_hash(manifest: Path) -> str:
    provider = open_provider(manifest)
    try:
        digest: str = provider.snapshot()["fixture_set_hash"]
        return digest
    finally:
        provider.release()


# -- the proxy seal --------------------------------------------------------------------------

PROXIED = textwrap.dedent(
    """
    import json, sys, urllib.error, urllib.request
    import openai
    out = {}
    answer = openai.OpenAI().chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "hi"}]
    )
    out["content"] = answer.choices[0].message.content
    def fetch(url):
        try:
            urllib.request.urlopen(url, timeout=20)
            return "reached"
        except urllib.error.HTTPError as exc:
            return [exc.code, json.loads(exc.read())["error"]["message"]]
        except urllib.error.URLError as exc:
            return str(exc.reason)
    out["http"] = fetch("http://vendor.example/v1/chat/completions")
    out["host"] = fetch(f"http://127.0.0.1:{sys.argv[1]}/")
    out["https"] = fetch("https://api.groq.com/openai/v1/models")
    print(json.dumps(out))
    """
)


def test_the_proxy_seal_answers_proxied_requests_and_connect_from_the_fixture_only(
    greeting: Path, host_listener: socket.socket
) -> None:
    # Each proxied request (plain HTTP, and HTTPS through a CONNECT tunnel the run's
    # authority terminates) is a tool's exchange: answered from the fixture, which has
    # none of them, so each misses, is named with its add command and is counted; the
    # host itself is never reached.
    port = port_of(host_listener)
    done = run_cli(greeting, [PY, "-c", PROXIED, port], flags=("--seal", "proxy"))
    assert done.returncode == 4, done.stderr  # the child exited 0; three calls missed
    out = json.loads(done.stdout)
    assert out["content"] == "hello"  # NO_PROXY names the front door: served directly
    for fetched in (out["http"], out["host"], out["https"]):
        status, message = fetched
        assert status == 422
        assert message.startswith("no replay fixture matches this request (request_hash: ")
    assert accepted(host_listener) == 0
    assert done.stderr.count("replay-actor: miss: no replay fixture matches") == 3
    assert summary(done.stderr).startswith(
        "replay-actor: 1 served, 3 missed, 0 exhausted, 0 blocked; fixture sha256:"
    )
    assert summary(done.stderr).endswith("; sealed (proxy, best-effort)")


def test_the_front_door_refuses_a_raw_connect_naming_the_host(greeting: Path) -> None:
    with serving(greeting) as (_proc, info):
        host, _, port = info["url"].removeprefix("http://").rpartition(":")
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            sock.sendall(b"CONNECT api.mistral.ai:443 HTTP/1.1\r\nHost: api.mistral.ai:443\r\n\r\n")
            data = b""
            while b"}}" not in data:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 403 ")
        assert b"x-should-retry: false" in head.lower()
        error = json.loads(body)["error"]
        assert error["type"] == "replay_blocked"
        assert "CONNECT api.mistral.ai:443 was refused" in error["message"]


def test_a_proxied_request_for_the_front_door_itself_is_served(greeting: Path) -> None:
    # A client that proxies even what NO_PROXY lists reaches the front door anyway.
    with serving(greeting) as (_proc, info), httpx2.Client(proxy=info["url"], timeout=30) as http:
        answer = http.post(
            info["openai_base_url"] + "/chat/completions",
            json={"model": "gpt-test", "messages": HI},
            headers={"authorization": f"Bearer {info['token']}"},
        )
        assert answer.status_code == 200
        assert answer.json()["choices"][0]["message"]["content"] == "hello"


# -- where no namespace can be made ------------------------------------------------------------

UNSHARE = shutil.which("unshare")


def _without_namespaces(argv: list[str]) -> list[str]:
    """``argv`` in a user namespace whose limits allow no further network or user
    namespace: what a container without the capability looks like to ``unshare(2)``."""
    script = (
        "echo 0 > /proc/sys/user/max_user_namespaces && "
        'echo 0 > /proc/sys/user/max_net_namespaces && exec "$@"'
    )
    assert UNSHARE is not None
    return [UNSHARE, "--user", "--map-root-user", "sh", "-c", script, "sh", *argv]


def _can_take_namespaces_away() -> bool:
    if UNSHARE is None:
        return False
    probe = subprocess.run(
        _without_namespaces([UNSHARE, "--net", "true"]),
        check=False,
        capture_output=True,
        timeout=30,
    )
    return probe.returncode != 0 and b"No space left" in probe.stderr


def test_without_namespaces_run_falls_back_to_proxy_and_namespace_refuses(
    greeting: Path, tmp_path: Path
) -> None:
    if not _can_take_namespaces_away():
        pytest.skip("this system cannot make a user namespace to take namespaces away in")
    marker = tmp_path / "ran"
    child = [PY, "-c", PROXIED, "9"]
    base = [PY, "-m", "replay_actor", "run"]
    done = subprocess.run(
        _without_namespaces([*base, str(greeting), "--", *child]),
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 4, done.stderr
    assert "note: no network namespace here (unshare failed" in done.stderr
    assert json.loads(done.stdout)["content"] == "hello"
    assert summary(done.stderr).endswith("; sealed (proxy, best-effort)")
    assert " 3 missed, 0 exhausted, 0 blocked;" in summary(done.stderr)

    refused = subprocess.run(
        _without_namespaces(
            [*base, "--seal", "namespace", str(greeting), "--", "touch", str(marker)]
        ),
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 1
    assert "error: cannot seal COMMAND in a network namespace here" in refused.stderr
    assert not marker.exists()  # nothing ran
    assert "replay-actor: " not in refused.stderr  # and there is nothing to sum up


# -- nothing fails quietly --------------------------------------------------------------------

SWALLOWS = textwrap.dedent(
    """
    import sys
    import openai
    client = openai.OpenAI()
    for text in sys.argv[2:]:
        try:
            client.chat.completions.create(
                model="gpt-test", messages=[{"role": "user", "content": text}]
            )
        except openai.APIStatusError as exc:
            pass  # swallowed, as many applications do
    sys.exit(int(sys.argv[1]))
    """
)


@pytest.mark.parametrize(
    ("child_status", "flags", "status"),
    [("0", (), 4), ("0", ("--allow-misses",), 0), ("3", (), 3), ("3", ("--allow-misses",), 3)],
)
def test_a_swallowed_miss_makes_run_exit_4_unless_allowed_or_the_child_failed(
    greeting: Path, child_status: str, flags: tuple[str, ...], status: int
) -> None:
    done = run_cli(greeting, [PY, "-c", SWALLOWS, child_status, "hi", "hi", "unknown"], flags=flags)
    assert done.returncode == status, done.stderr
    assert summary(done.stderr).startswith(
        "replay-actor: 1 served, 1 missed, 1 exhausted, 0 blocked; fixture sha256:"
    )


def test_a_run_with_every_call_served_exits_0(greeting: Path) -> None:
    done = run_cli(greeting, [PY, "-c", SWALLOWS, "0", "hi"])
    assert done.returncode == 0, done.stderr
    assert "1 served, 0 missed, 0 exhausted, 0 blocked;" in summary(done.stderr)


INVALID = textwrap.dedent(
    """
    import os, httpx2
    url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
    token = {"authorization": "Bearer " + os.environ["OPENAI_API_KEY"]}
    print(httpx2.post(url, content=b"{not json", headers=token).status_code)
    print(httpx2.post(url, json={"model": "m", "messages": []}).status_code)
    print(httpx2.post(os.environ["OPENAI_BASE_URL"] + "/models", headers=token).status_code)
    """
)


def test_invalid_requests_are_counted(greeting: Path) -> None:
    done = run_cli(greeting, [PY, "-c", INVALID])
    assert done.returncode == 4, done.stderr
    assert done.stdout.split() == ["400", "401", "404"]
    assert ", 0 blocked, 3 invalid; fixture sha256:" in summary(done.stderr)


def test_live_and_record_summaries(chat: ChatServer, tmp_path: Path) -> None:
    live = run_cli(
        live_manifest(tmp_path, chat.base_url("echo"), max_retries=0),
        [PY, "-c", SWALLOWS, "0", "hi"],
    )
    assert live.returncode == 0, live.stderr
    assert summary(live.stderr) == (
        "replay-actor: 1 served, 0 missed, 0 exhausted, 0 blocked; live openai gpt-live; not sealed"
    )
    failing = run_cli(
        live_manifest(tmp_path, chat.base_url("500"), max_retries=0),
        [PY, "-c", SWALLOWS, "0", "hi"],
    )
    assert failing.returncode == 4, failing.stderr
    assert ", 0 blocked, 1 failed; live openai gpt-live;" in summary(failing.stderr)

    record = record_manifest(tmp_path, chat.base_url("echo"))
    done = run_cli(record, [PY, "-c", SWALLOWS, "0", "hi", "bye"])
    assert done.returncode == 0, done.stderr
    line = summary(done.stderr)
    assert line.startswith("replay-actor: 2 served, 0 missed, 0 exhausted, 0 blocked; fixture ")
    assert line.endswith(" (2 recorded); not sealed")
    replay = replay_manifest(tmp_path, tmp_path / "recorded.jsonl")
    assert line.split("; ")[1] == f"fixture {_fixture_hash(replay)} (2 recorded)"


def test_a_live_run_sealed_on_request_still_reaches_its_vendor(
    chat: ChatServer, tmp_path: Path, host_listener: socket.socket
) -> None:
    # The server stays outside: the live adapter has the network, the child does not.
    manifest = live_manifest(tmp_path, chat.base_url("echo"), max_retries=0)
    done = run_cli(
        manifest, [PY, "-c", PROBE, port_of(host_listener)], flags=("--seal", "namespace")
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["content"] == "1: hi"
    assert out["host"] == "ConnectionRefusedError"
    assert accepted(host_listener) == 0
    assert summary(done.stderr).endswith("; live openai gpt-live; sealed (namespace)")


# -- the real key, in any form ------------------------------------------------------------------

DUMP_ENV = "import json, os; print(json.dumps(dict(os.environ)))"


def test_the_real_key_never_reaches_the_child_in_any_form(chat: ChatServer, tmp_path: Path) -> None:
    planted = "sk-planted-" + os.urandom(16).hex()
    manifest = live_manifest(tmp_path, chat.base_url("echo"), api_key_env="PLANTED_KEY")
    env = dict(os.environ)
    env.update(
        PLANTED_KEY=planted,
        AUTH_HEADER=f"Authorization: Bearer {planted}",
        KEY_WITH_NEWLINE=planted + "\n",
        KEY_LESS_ONE=planted[:-1],
        TOGETHER_CUSTOM_HEADERS=json.dumps({"Authorization": f"Bearer {planted}"}),
        UNRELATED="kept",
    )
    done = run_cli(manifest, [PY, "-c", DUMP_ENV], env=env)
    assert done.returncode == 0, done.stderr
    child = json.loads(done.stdout)
    assert not [name for name, value in child.items() if holds_key_piece(value, planted)]
    for name in ("PLANTED_KEY", "AUTH_HEADER", "KEY_WITH_NEWLINE", "KEY_LESS_ONE"):
        assert name not in child
    assert "TOGETHER_CUSTOM_HEADERS" not in child
    assert child["UNRELATED"] == "kept" and child["PATH"] == os.environ["PATH"]
    assert planted not in done.stdout + done.stderr


INFO = {
    "url": "http://127.0.0.1:9",
    "openai_base_url": "http://127.0.0.1:9/v1",
    "anthropic_base_url": "http://127.0.0.1:9",
    "gemini_base_url": "http://127.0.0.1:9",
    "token": "tok",
}


def test_every_client_variable_points_at_the_front_door() -> None:
    inherited = {
        "PATH": "/bin",
        "GOOGLE_GENAI_USE_VERTEXAI": "true",
        "GOOGLE_GENAI_USE_ENTERPRISE": "true",
        "CLAUDE_CODE_USE_BEDROCK": "1",
        "AZURE_OPENAI_AD_TOKEN": "ad-token",
        "GOOGLE_API_KEY": "g-key",
        "SOMETHING_TRUE": "true",  # a switch's value elsewhere is not a secret
        "GROQ_API_KEY": "gsk_real_groq_key_0123456789",
        "DEEPSEEK_API_KEY": "sk-real-deepseek-0123456789",
    }
    env = child_environment(inherited, INFO, set())
    assert env["GROQ_BASE_URL"] == env["TOGETHER_BASE_URL"] == "http://127.0.0.1:9"
    assert env["GEMINI_API_BASE"] == "http://127.0.0.1:9/v1beta"
    assert env["OLLAMA_HOST"] == env["AZURE_OPENAI_ENDPOINT"] == "http://127.0.0.1:9"
    assert env["REPLAY_ACTOR_URL"] == "http://127.0.0.1:9"
    assert env["OPENAI_BASE_URL"] == env["OPENAI_API_BASE"] == "http://127.0.0.1:9/v1"
    assert env["OPENAI_API_VERSION"] == "2024-10-21"
    assert set(BASE_URL_VARIABLES) <= set(env)
    for name in KEY_VARIABLES:
        assert env[name] == "tok", name
    assert {"GROQ_API_KEY", "AZURE_OPENAI_API_KEY", "MISTRAL_API_KEY"} <= set(KEY_VARIABLES)
    assert env["GOOGLE_GENERATIVE_AI_API_KEY"] == "tok"
    for name in REMOVED_VARIABLES:
        assert name not in env, name
    assert env["DEEPSEEK_API_KEY"] == "tok"  # inherited: replaced
    assert "XAI_API_KEY" not in env  # not inherited: not invented
    assert env["SOMETHING_TRUE"] == "true" and env["PATH"] == "/bin"
    assert "HTTP_PROXY" not in env  # not sealed: the proxies are the user's
    # An inherited API version is the application's: kept.
    assert (
        child_environment({"OPENAI_API_VERSION": "2025-01-01"}, INFO, ())["OPENAI_API_VERSION"]
        == "2025-01-01"
    )


def test_a_sealed_childs_proxy_variables() -> None:
    env = child_environment({"HTTPS_PROXY": "http://corporate:3128"}, INFO, (), no_proxy="x")
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        assert env[name] == env[name.lower()] == "http://127.0.0.1:9"
    assert env["NO_PROXY"] == env["no_proxy"] == "x"
    assert env["NODE_USE_ENV_PROXY"] == "1"


def test_a_short_or_common_secret_removes_only_its_own_value() -> None:
    # OPENAI_API_KEY=dummy is common: only a variable that is exactly it goes.
    env = child_environment(
        {"OPENAI_API_KEY": "dummy", "COPY": " dummy\n", "MODE": "dummy-run", "PATH": "/bin"},
        INFO,
        (),
    )
    assert "COPY" not in env
    assert env["MODE"] == "dummy-run" and env["PATH"] == "/bin"


def test_a_foreign_key_is_named_in_a_warning_never_shown(greeting: Path) -> None:
    secret = "sk-mistral-" + os.urandom(8).hex()
    assert foreign_key_warning({"PATH": "/bin", "OPENAI_API_KEY": "x"}) is None
    env = dict(os.environ, MISTRAL_API_KEY=secret, DEEPSEEK_API_KEY=secret + "d")
    done = run_cli(greeting, [PY, "-c", DUMP_ENV], env=env)
    assert done.returncode == 0, done.stderr
    warning = next(line for line in done.stderr.splitlines() if "warning" in line)
    assert "DEEPSEEK_API_KEY, MISTRAL_API_KEY are set" in warning
    assert secret not in done.stderr + done.stdout
    child = json.loads(done.stdout)
    assert child["MISTRAL_API_KEY"] == child["DEEPSEEK_API_KEY"] == child["OPENAI_API_KEY"]


# -- exit statuses as a shell gives them -------------------------------------------------------


def _executable(path: Path, content: bytes, mode: int = 0o755) -> str:
    path.write_bytes(content)
    path.chmod(mode)
    return str(path)


def test_exit_statuses_as_a_shell(greeting: Path, tmp_path: Path) -> None:
    cases = {
        # an ELF header and nothing else: execve says "Exec format error"
        _executable(tmp_path / "not-elf", b"\x7fELF\x02\x01\x01junk"): (126, "Exec format error"),
        _executable(tmp_path / "no-x", b"#!/bin/sh\n", 0o644): (126, "Permission denied"),
        _executable(tmp_path / "bad-interp", b"#!/nonexistent/sh\n"): (126, "bad interpreter"),
        str(tmp_path): (126, "Permission denied"),  # a directory
        # (no x bit at all is refused to root too: execve needs one for someone)
        "/nonexistent/command": (127, "command not found"),
        "no-such-command-anywhere": (127, "command not found"),
    }
    for command, (status, message) in cases.items():
        done = run_cli(greeting, [command])
        assert done.returncode == status, (command, done.stderr)
        assert message in done.stderr, command


# -- one rule for a repeated x-replay-scope header --------------------------------------------

TWICE = [("x-replay-scope", '{"epoch": 2}'), ("x-replay-scope", '{"epoch": 2}')]
BODY = {"model": "gpt-test", "messages": HI}


def test_a_repeated_scope_header_is_400_at_the_front_door(greeting: Path) -> None:
    with serving(greeting) as (_proc, info), httpx2.Client(timeout=30) as http:
        headers = [("x-api-key", info["token"]), *TWICE]
        answer = http.post(
            info["openai_base_url"] + "/chat/completions", json=BODY, headers=headers
        )
        assert answer.status_code == 400
        assert answer.json()["error"]["message"] == (
            "the x-replay-scope header must appear at most once"
        )


def test_a_repeated_scope_header_is_400_in_every_in_process_transport(greeting: Path) -> None:
    provider = open_provider(greeting)
    try:
        url = "http://replay.invalid/v1/chat/completions"
        body = json.dumps(BODY).encode()
        sync = ProviderTransport(provider, release_on_close=False)
        got = sync.handle_request(httpx2.Request("POST", url, headers=TWICE, content=body))
        old = HttpxProviderTransport(provider, release_on_close=False)
        got_old = old.handle_request(httpx.Request("POST", url, headers=TWICE, content=body))
        aio = AsyncProviderTransport(provider, release_on_close=False)
        got_async = asyncio.run(
            aio.handle_async_request(httpx2.Request("POST", url, headers=TWICE, content=body))
        )
        for answer in (got, got_old, got_async):
            assert answer.status_code == 400
            message = json.loads(answer.read())["error"]["message"]
            assert message == "the x-replay-scope header must appear at most once"
    finally:
        provider.release()


# -- as an unprivileged user --------------------------------------------------------------------

UNPRIVILEGED_PROBE = textwrap.dedent(
    """
    import json, os, socket, sys
    import openai
    out = {"uid": os.getuid(), "uid_map": open("/proc/self/uid_map").read().split()}
    answer = openai.OpenAI().chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "hi"}]
    )
    out["content"] = answer.choices[0].message.content
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20).close()
        out["host"] = "connected"
    except OSError as exc:
        out["host"] = type(exc).__name__
    print(json.dumps(out))
    """
)


def test_an_unprivileged_user_is_sealed_in_a_user_and_network_namespace(
    host_listener: socket.socket,
) -> None:
    if os.geteuid() != 0:
        pytest.skip("the suite already runs unprivileged: every sealed test above is this one")
    setpriv, python = shutil.which("setpriv"), system_python()
    if setpriv is None or python is None:
        pytest.skip("needs setpriv and a system-wide python of this version to drop to nobody")
    # nobody runs from a world-readable copy: the checkout (and the virtual environment
    # in it) may sit in a folder only its owner can enter, as a clone in /root or in a
    # mkdtemp folder does.
    folder = Path(tempfile.mkdtemp(prefix="replay-actor-nobody-"))
    try:
        lib = readable_copy(folder)
        fixture = write_fixture(folder / "fixture.jsonl", {neutral_hash(HI): {"content": "hello"}})
        manifest = replay_manifest(folder, fixture, inspection=False)
        readable_by_all(folder)
        run = [python, "-m", "replay_actor", "run", str(manifest), "--"]
        probe = [python, "-c", UNPRIVILEGED_PROBE, port_of(host_listener)]
        done = as_nobody(folder, lib, [*run, *probe])
    finally:
        shutil.rmtree(folder)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    # Its own user id, mapped to itself in a user namespace of its own.
    assert out["uid"] == NOBODY and out["uid_map"] == [str(NOBODY), str(NOBODY), "1"]
    assert out["content"] == "hello"
    assert out["host"] == "ConnectionRefusedError"
    assert accepted(host_listener) == 0
    assert summary(done.stderr).endswith("; sealed (namespace)")
