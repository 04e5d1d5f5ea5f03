"""The run's certificate authority and its tunnels (docs/tools.md, "The certificate
authority"): certificates a client verifies for a name and an IP address, a CA key that
is never written, a leaf key owner-only in an owner-only folder removed when ``run``
ends, a bundle of ``run``'s own roots and the run's authority, and a client that does not
trust it blocked, named and counted."""

from __future__ import annotations

import json
import os
import socket
import ssl
import stat
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from replay_actor.frontdoor.authority import CA_VARIABLES, RunAuthority, trusted_roots
from tests.support.frontdoor_util import (
    quiet_env,
    record_manifest,
    replay_manifest,
    run_cli,
    summary,
)
from tests.support.tool_server import SearchAPI, TestAuthority

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(180)]

PY = sys.executable


def _handshake(authority: RunAuthority, host: str, client: ssl.SSLContext, name: str) -> str:
    """A TLS handshake with a server presenting ``host``'s certificate; its subject's CN."""
    server_side, client_side = socket.socketpair()
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            with authority.server_context(host).wrap_socket(server_side, server_side=True):
                pass
        except (ssl.SSLError, OSError) as exc:
            errors.append(exc)

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client.wrap_socket(client_side, server_hostname=name) as tls:
            cert = tls.getpeercert()
    finally:
        thread.join(10)
    assert cert is not None
    subject: Any = cert["subject"]
    return str(dict(item[0] for item in subject)["commonName"])


def test_a_client_trusting_the_bundle_verifies_a_name_and_an_ip(tmp_path: Path) -> None:
    authority = RunAuthority()
    try:
        client = ssl.create_default_context(cafile=authority.bundle)
        assert _handshake(authority, "api.search.example", client, "api.search.example") == (
            "api.search.example"
        )
        assert _handshake(authority, "127.0.0.2", client, "127.0.0.2") == "127.0.0.2"
        with pytest.raises(ssl.SSLCertVerificationError):
            _handshake(authority, "api.search.example", client, "api.other.example")
        # A client trusting only the system's roots refuses it.
        with pytest.raises(ssl.SSLCertVerificationError):
            _handshake(
                authority, "api.search.example", ssl.create_default_context(), "api.search.example"
            )
    finally:
        authority.close()


def test_the_folder_is_owner_only_and_holds_no_key_of_the_authority() -> None:
    authority = RunAuthority()
    try:
        authority.server_context("api.search.example")
        folder = Path(authority.folder)
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        files = sorted(folder.iterdir())
        for path in files:
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
        # One private key on disk: the leaves'. The authority's is only ever in memory.
        holding_keys = [p.name for p in files if b"PRIVATE KEY" in p.read_bytes()]
        assert holding_keys == ["leaf-key.pem"]
        assert authority.variables() == dict.fromkeys(CA_VARIABLES, authority.bundle)
    finally:
        authority.close()
    assert not folder.exists()
    authority.close()  # idempotent


def test_the_bundle_is_runs_own_roots_then_the_authority(
    tool_authority: TestAuthority, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(tool_authority.ca))
    assert trusted_roots() == tool_authority.ca.read_bytes()
    authority = RunAuthority()
    try:
        bundle = Path(authority.bundle).read_bytes()
        assert bundle.startswith(tool_authority.ca.read_bytes())
        assert bundle.endswith(Path(authority.certificate).read_bytes())
        assert bundle.count(b"BEGIN CERTIFICATE") == 2
    finally:
        authority.close()


CHILD_VIEW = textwrap.dedent(
    """
    import json, os, sys
    names = sys.argv[1:]
    bundle = os.environ["SSL_CERT_FILE"]
    print(json.dumps({
        "values": {name: os.environ.get(name) for name in names},
        "bundle": bundle,
        "exists": os.path.isfile(bundle),
        "proxy": os.environ.get("HTTPS_PROXY"),
        "no_proxy": os.environ.get("NO_PROXY"),
    }))
    """
)


@pytest.mark.parametrize("kind", ["replay", "record"])
def test_the_child_trusts_the_bundle_which_is_gone_when_run_ends(tmp_path: Path, kind: str) -> None:
    fixture = tmp_path / "fixture.jsonl"
    fixture.write_text("")
    manifest = (
        replay_manifest(tmp_path, fixture)
        if kind == "replay"
        else record_manifest(tmp_path, "http://127.0.0.1:9/v1")
    )
    done = run_cli(manifest, [PY, "-c", CHILD_VIEW, *CA_VARIABLES], env=quiet_env())
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert set(seen["values"].values()) == {seen["bundle"]} and seen["exists"]
    assert seen["proxy"].startswith("http://127.0.0.1:")  # the front door, sealed or not
    assert seen["no_proxy"] == "127.0.0.1,localhost,::1"
    assert not os.path.exists(seen["bundle"])
    assert not os.path.exists(os.path.dirname(seen["bundle"]))


def test_a_client_that_does_not_trust_the_run_is_blocked_and_named(
    tmp_path: Path, search_api: SearchAPI, tool_authority: TestAuthority
) -> None:
    code = textwrap.dedent(
        """
        import sys, httpx2
        try:
            # Its own roots only: the tool's CA, not the run's bundle.
            httpx2.get(sys.argv[1] + "/search?q=paris", verify=sys.argv[2], timeout=30)
            print("reached")
        except httpx2.ConnectError:
            print("refused")
        """
    )
    fixture = tmp_path / "fixture.jsonl"
    fixture.write_text("")
    done = run_cli(
        replay_manifest(tmp_path, fixture),
        [PY, "-c", code, search_api.url, str(tool_authority.ca)],
        env=quiet_env(),
    )
    assert done.returncode == 4, done.stderr
    assert done.stdout.strip() == "refused"
    assert f"replay-actor run: blocked a tunnel to 127.0.0.2:{search_api.port}: " in done.stderr
    assert "does it trust SSL_CERT_FILE?" in done.stderr
    assert summary(done.stderr).startswith(
        "replay-actor: 0 served, 0 missed, 0 exhausted, 1 blocked"
    )
    assert search_api.received == []
