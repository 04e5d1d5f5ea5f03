"""The live adapters' HTTP client (adapters/_http.py, _secrets.py) against a hostile or
unlucky endpoint: trickled answers, key pieces in error codes, answers and log records,
keys and headers with characters HTTP cannot carry, credentials in ``base_url``, and a
200 MiB answer.

Every test talks HTTP to a real server on 127.0.0.1 (``HostileServer``,
tests/support/hostile_server.py); nothing is mocked.
"""

from __future__ import annotations

import asyncio
import logging
import os
import tracemalloc
from pathlib import Path

import pytest

from replay_actor import LiveProviderError, ManifestError, open_provider
from replay_actor.adapters._secrets import (
    holds_key_piece,
    key_piece_spans,
    piece_length,
    redact_key_pieces,
)
from tests.support.hostile_server import (
    ASK,
    KEY,
    VAR,
    HostileServer,
    MiB,
    live,
    pieces,
    shown,
)

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def key_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VAR, KEY)


# -- a trickling endpoint cannot hold a call ------------------------------------------


@pytest.mark.parametrize("scenario", ["trickle-body", "trickle-headers"])
def test_timeout_bounds_the_whole_attempt_sync(hostile: HostileServer, scenario: str) -> None:
    with (
        open_provider(live(hostile, scenario, timeout=1, max_retries=0)) as llm,
        pytest.raises(LiveProviderError, match="did not answer within the timeout"),
    ):
        llm.complete(ASK)
    # The endpoint would have gone on for TRICKLE_SECONDS: the deadline cut it.
    assert hostile.count(scenario) == 1


@pytest.mark.parametrize("scenario", ["trickle-body", "trickle-headers"])
def test_timeout_bounds_the_whole_attempt_async(hostile: HostileServer, scenario: str) -> None:
    async def ask() -> None:
        with (
            open_provider(live(hostile, scenario, timeout=1, max_retries=0)) as llm,
            pytest.raises(LiveProviderError, match="did not answer within the timeout"),
        ):
            await llm.acomplete(ASK)

    asyncio.run(ask())
    assert hostile.count(scenario) == 1


def test_a_trickled_attempt_is_retried_within_its_own_deadline(hostile: HostileServer) -> None:
    with (
        open_provider(live(hostile, "trickle-body", timeout=0.5, max_retries=2)) as llm,
        pytest.raises(LiveProviderError, match=r"timeout \(3 attempts\)"),
    ):
        llm.complete(ASK)
    assert hostile.count("trickle-body") == 3


def test_the_pooled_connection_still_answers_after_a_deadline(hostile: HostileServer) -> None:
    with (
        open_provider(live(hostile, "trickle-body", timeout=1, max_retries=0)) as llm,
        pytest.raises(LiveProviderError),
    ):
        llm.complete(ASK)
    with open_provider(live(hostile, "fine", timeout=1, max_retries=0)) as llm:
        assert llm.complete(ASK)["content"] == "fine"
        assert llm.complete(ASK)["content"] == "fine"


# -- an error code holding a long piece of the key is not quoted -----------------------


@pytest.mark.parametrize("variant", ["invalid", "rejected", "suffix"])
def test_an_error_code_with_a_piece_of_the_key_is_dropped(
    hostile: HostileServer, variant: str
) -> None:
    with (
        open_provider(live(hostile, f"code-{variant}")) as llm,
        pytest.raises(LiveProviderError) as caught,
    ):
        llm.complete(ASK)
    assert str(caught.value) == "the live endpoint answered HTTP 401"
    assert not pieces(shown(caught.value))


def test_key_piece_detection() -> None:
    key = "sk-ant-api03-" + "x7Qp2Lm9Rt4Vb8Nc1Zs6"
    assert piece_length(len(key)) == 16
    assert holds_key_piece(f"echo: {key[:-1]}!", key)
    assert holds_key_piece("invalid_" + key[7:], key)
    assert holds_key_piece(("z" * 100_000 + key[5:21]).encode(), key.encode())
    assert not holds_key_piece(key[:15], key)  # 15 shared characters: not a piece
    assert not holds_key_piece("the prefix sk-ant-api03- alone", key)
    assert not holds_key_piece("anything", None)
    # A short key counts only whole; one of 9 to 16 characters less its last one.
    assert holds_key_piece("a-secret!", "a-secret!") and not holds_key_piece("a-secret", "k")
    assert holds_key_piece("x" + "abcdefghij"[:-1], "abcdefghij")
    assert not holds_key_piece("abcd", "abcdefgh")
    text = f"A {key} B {key[3:20]} C"
    assert key_piece_spans(text, key) == [(2, 2 + len(key)), (len(key) + 5, len(key) + 22)]
    assert redact_key_pieces(text, key) == "A [redacted] B [redacted] C"


# -- a response holding the key less one character is refused, not recorded ------------


def test_a_response_with_the_key_less_one_character_is_never_recorded(
    hostile: HostileServer, tmp_path: Path
) -> None:
    fixture = tmp_path / "recorded.jsonl"
    table = live(hostile, "almost-key")["provider"]
    del table["kind"]
    manifest = {"provider": {"kind": "record", "fixture": str(fixture), "live": table}}
    with open_provider(manifest) as rec, pytest.raises(LiveProviderError) as caught:
        rec.complete(ASK)
    assert "echoes the API key" in str(caught.value)
    assert not pieces(shown(caught.value))
    for path in tmp_path.iterdir():
        assert not pieces(path.read_bytes().decode()), path.name


# -- a key or a header with characters HTTP cannot carry --------------------------------


@pytest.mark.parametrize("odd", ["\u00a0", "\u2019", " ", "\n"])
@pytest.mark.parametrize("kind", ["live", "record"])
def test_a_key_with_an_odd_character_is_a_manifest_error_without_the_key(
    hostile: HostileServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    odd: str,
    kind: str,
) -> None:
    monkeypatch.setenv(VAR, KEY[:20] + odd + KEY[20:])
    manifest = live(hostile, "fine")
    if kind == "record":
        table = manifest["provider"]
        del table["kind"]
        manifest = {
            "provider": {"kind": "record", "fixture": str(tmp_path / "f.jsonl"), "live": table}
        }
    with pytest.raises(ManifestError) as caught:
        open_provider(manifest)
    prefix = "provider." if kind == "live" else "provider.live."
    assert caught.value.key == prefix + "api_key_env"
    assert VAR in str(caught.value)
    assert caught.value.__cause__ is None and caught.value.__context__ is None
    text = shown(caught.value)
    assert "open_provider" in text  # the frames are there
    assert not pieces(text)
    assert not any(p.name.endswith(".lock") for p in tmp_path.iterdir())


def test_a_header_value_with_an_odd_character_is_a_manifest_error(
    hostile: HostileServer,
) -> None:
    secret = "org-SECRET-7c1d\u00a0e"
    with pytest.raises(ManifestError) as caught:
        open_provider(live(hostile, "fine", headers={"X-Org": secret}))
    assert caught.value.key == "provider.headers.X-Org"
    # (The manifest, the caller's own mapping, is in open_provider's frame.)
    said = " ".join([str(caught.value), repr(caught.value.args), repr(vars(caught.value))])
    assert "SECRET-7c1d" not in said
    assert caught.value.__context__ is None


# -- a key echoed in a response header stays out of the HTTP client's DEBUG log --------


def test_a_key_echoed_in_a_header_is_redacted_from_debug_logs(
    hostile: HostileServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with open_provider(live(hostile, "key-header")) as llm:
        assert llm.complete(ASK)["content"] == "fine"
        assert asyncio.run(llm.acomplete(ASK))["content"] == "fine"
    assert hostile.received[-1].headers["authorization"] == f"Bearer {KEY}"
    headers_logged = [r for r in caplog.records if "receive_response_headers" in r.getMessage()]
    assert headers_logged, "httpcore2 logged no response headers at DEBUG"
    assert "x-echo-key" in caplog.text.lower() and "[redacted]" in caplog.text
    assert not pieces(caplog.text)


# -- credentials in base_url ----------------------------------------------------------


@pytest.mark.parametrize("userinfo", ["user:PASSWORD-9f2e@", "TOKEN-9f2e@", "u:@"])
def test_base_url_with_userinfo_is_refused(hostile: HostileServer, userinfo: str) -> None:
    url = f"http://{userinfo}127.0.0.1:{hostile.port}/fine/v1"
    with pytest.raises(ManifestError) as caught:
        open_provider(live(hostile, "fine", base_url=url))
    assert caught.value.key == "provider.base_url"
    assert "9f2e" not in str(caught.value)
    assert hostile.received == []


# -- a huge answer is not read past the ceiling ---------------------------------------


@pytest.mark.parametrize("scenario", ["huge", "huge-chunked"])
def test_a_200_mib_answer_is_refused_without_reading_it_into_memory(
    hostile: HostileServer, tmp_path: Path, scenario: str
) -> None:
    table = live(hostile, scenario, max_retries=0, timeout=30)["provider"]
    del table["kind"]
    manifest = {"provider": {"kind": "record", "fixture": str(tmp_path / "f.jsonl"), "live": table}}
    with open_provider(manifest) as rec:
        tracemalloc.start()
        try:
            with pytest.raises(LiveProviderError, match="larger than max_response_bytes"):
                rec.complete(ASK)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    # The default ceiling is 16 MiB; the whole answer would be 200 MiB and more.
    assert peak < 64 * MiB, peak
    assert hostile.sent < 200 * MiB


def test_max_response_bytes_is_a_checked_adapter_key(hostile: HostileServer) -> None:
    with open_provider(live(hostile, "fine", max_response_bytes=1000)) as llm:
        assert llm.complete(ASK)["content"] == "fine"
    with (
        open_provider(live(hostile, "fine", max_response_bytes=50)) as llm,
        pytest.raises(LiveProviderError, match="larger than max_response_bytes"),
    ):
        llm.complete(ASK)
    for bad in (0, -1, 1.5, "big", True):
        with pytest.raises(ManifestError) as caught:
            open_provider(live(hostile, "fine", max_response_bytes=bad))
        assert caught.value.key == "provider.max_response_bytes"


# -- the sync client is made on the first sync call --------------------------------------


def test_the_sync_client_is_made_on_the_first_sync_call_only(hostile: HostileServer) -> None:
    with open_provider(live(hostile, "fine")) as llm:
        adapter = llm._adapter  # type: ignore[attr-defined]
        assert asyncio.run(llm.acomplete(ASK))["content"] == "fine"
        # A caller that only awaits (the front door) never builds it, nor its TLS trust.
        assert adapter._client is None
        assert llm.complete(ASK)["content"] == "fine"
        assert adapter._client is not None
        assert llm.complete(ASK)["content"] == "fine"
        assert hostile.ports[-1] == hostile.ports[-2]  # the same pooled connection
    assert adapter._client is None  # closed with the provider


# -- a fork child does not share the parent's pooled connection ---------------------------


def test_a_fork_child_opens_its_own_connection(hostile: HostileServer) -> None:
    with open_provider(live(hostile, "fine")) as llm:
        assert llm.complete(ASK)["content"] == "fine"  # a pooled connection now
        pid = os.fork()
        if pid == 0:  # the child: only os._exit leaves it
            code = 9
            try:
                code = 0 if llm.complete(ASK)["content"] == "fine" else 1
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert llm.complete(ASK)["content"] == "fine"
    parent_first, child, parent_again = hostile.ports
    # Two processes on one connection would read each other's answers.
    assert child != parent_first
    assert parent_again == parent_first  # the parent's pool is intact
