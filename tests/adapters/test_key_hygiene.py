"""Nothing that contains the API key's value is kept or shown: not an error code that
echoes it, not a response that echoes it (which a recording would keep)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from replay_actor import LiveProviderError, open_provider
from tests.support.chat_server import ChatServer

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(60)]

KEY = "sk-PLANTED-9f4e2a61c0d7b3"
VAR = "REPLAY_ACTOR_KEY_HYGIENE_TEST"
ASK = {"messages": [{"role": "user", "content": "hello"}]}


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VAR, KEY)


def table(chat: ChatServer, scenario: str) -> dict[str, object]:
    return {
        "adapter": "openai",
        "model": "m",
        "base_url": chat.base_url(scenario),
        "api_key_env": VAR,
        "retry_backoff": 0.0,
    }


def _everything(exc: BaseException) -> str:
    return " ".join([str(exc), repr(exc), repr(exc.args), repr(vars(exc))])


def test_an_error_code_that_echoes_the_key_is_not_shown(
    chat: ChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    live = {"provider": {"kind": "live", **table(chat, "keycode")}}
    with open_provider(live) as llm, pytest.raises(LiveProviderError) as caught:
        llm.complete(ASK)
    assert chat.received[-1].headers["authorization"] == f"Bearer {KEY}"  # it was sent
    assert caught.value.status == 400
    assert str(caught.value) == "the live endpoint answered HTTP 400"
    assert KEY not in _everything(caught.value)
    assert KEY[:12] not in caplog.text


def test_a_response_that_echoes_the_key_is_refused_and_never_recorded(
    chat: ChatServer, tmp_path: Path
) -> None:
    fixture = tmp_path / "recorded.jsonl"
    manifest = {
        "provider": {"kind": "record", "fixture": str(fixture), "live": table(chat, "keyusage")}
    }
    with open_provider(manifest) as rec, pytest.raises(LiveProviderError) as caught:
        rec.complete(ASK)
    assert "echoes the API key" in str(caught.value)
    assert KEY not in _everything(caught.value)
    for path in tmp_path.iterdir():  # the fixture, its journal, its sidecar: nothing holds it
        assert KEY.encode() not in path.read_bytes(), path.name
    # A response without the key is recorded as usual.
    manifest["provider"]["live"] = table(chat, "echo")
    with open_provider(manifest) as rec:
        assert rec.complete(ASK)["content"].endswith("hello")
    assert KEY.encode() not in fixture.read_bytes()
