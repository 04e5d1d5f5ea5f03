"""The http kind's live side (docs/tools.md, "Recording"): a tool's exchange sent on to its
own host, the client's own (credentials and body bytes) when the front door handed it,
the neutral form otherwise; the answer kept whole and without credentials; a failure
named by host and kind, with no credential in it or in its traceback's frames."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest

from replay_actor import LiveProviderError, request_hash
from replay_actor._http_kind import FORWARDING, Forwarding
from replay_actor.adapters.forward import HttpForwarder
from tests.support.frame_locals import captured
from tests.support.tool_server import TOOL_HOST, SearchAPI, TestAuthority

pytestmark = pytest.mark.timeout(60)

SECRET = "planted-secret-8b1e55c3"


@pytest.fixture
def forwarder(tool_authority: TestAuthority, monkeypatch: pytest.MonkeyPatch) -> HttpForwarder:
    # The roots this process trusts: the test CA, as run's own SSL_CERT_FILE.
    monkeypatch.setenv("SSL_CERT_FILE", str(tool_authority.ca))
    return HttpForwarder()


def _search(port: int, **more: Any) -> dict[str, Any]:
    return {
        "kind": "http",
        "method": "GET",
        "scheme": "https",
        "host": TOOL_HOST,
        "port": port,
        "path": "/search",
        "query": [["q", "paris"]],
        **more,
    }


def _handed(request: dict[str, Any], url: str, body: bytes = b"") -> Forwarding:
    headers = [("authorization", f"Bearer {SECRET}"), ("x-api-key", SECRET)]
    return Forwarding(request_hash(request), url, headers, body)


def test_the_clients_own_exchange_is_forwarded_and_its_answer_kept_whole(
    forwarder: HttpForwarder, search_api: SearchAPI
) -> None:
    search_api.answers["paris"] = ["Paris: sunny"]
    request = _search(search_api.port)
    token = FORWARDING.set(_handed(request, f"{search_api.url}/search?q=paris&api_key={SECRET}"))
    try:
        answer = forwarder.complete(request)
    finally:
        FORWARDING.reset(token)
    got = search_api.received[0]
    assert got.headers["authorization"] == f"Bearer {SECRET}" and got.headers["x-api-key"] == SECRET
    assert got.path == f"/search?q=paris&api_key={SECRET}"
    assert answer["status"] == 200
    assert answer["text"] == '{"results": ["Paris: sunny"], "query": "paris", "edition": 1}'
    names = [name for name, _ in answer["headers"]]
    assert "x-tool-edition" in names and "content-type" in names
    # The hop's, the date and the credentials are not kept.
    assert not {"set-cookie", "date", "content-length", "connection"} & set(names)


def test_the_body_goes_as_the_client_wrote_it(
    forwarder: HttpForwarder, search_api: SearchAPI
) -> None:
    body = b'{ "text" :  "Paris is sunny",\n "api_key": "' + SECRET.encode() + b'" }'
    request = {
        **_search(search_api.port),
        "method": "POST",
        "path": "/summarise",
        "query": [],
        "json": {"text": "Paris is sunny"},
    }
    handed = Forwarding(
        request_hash(request),
        f"{search_api.url}/summarise",
        [("content-type", "application/json")],
        body,
    )

    async def forward() -> dict[str, Any]:
        token = FORWARDING.set(handed)
        try:
            return await forwarder.acomplete(request)
        finally:
            FORWARDING.reset(token)

    answer = asyncio.run(forward())
    assert search_api.received[0].body == body
    assert answer["text"] == '{"summary": "Paris is sunny"}'


def test_a_request_built_in_code_goes_as_its_neutral_form(
    forwarder: HttpForwarder, search_api: SearchAPI
) -> None:
    request = {
        **_search(search_api.port),
        "method": "POST",
        "path": "/summarise",
        "query": [["lang", "en"]],
        "headers": {"content-type": "application/json"},
        "json": {"text": "Oslo", "limit": 1.0},
    }
    # An exchange handed for another request is not this one's.
    token = FORWARDING.set(_handed(_search(search_api.port), f"{search_api.url}/search"))
    try:
        answer = forwarder.complete(request)
    finally:
        FORWARDING.reset(token)
    got = search_api.received[0]
    assert (got.method, got.path, got.body) == (
        "POST",
        "/summarise?lang=en",
        b'{"limit":1,"text":"Oslo"}',
    )
    assert "authorization" not in got.headers
    assert answer["status"] == 200


def test_an_event_stream_is_relayed_and_recorded_open_when_the_client_left(
    forwarder: HttpForwarder, search_api: SearchAPI
) -> None:
    class Relay:
        def __init__(self) -> None:
            self.started: list[int] = []
            self.chunks: list[bytes] = []
            self.left = asyncio.Event()

        def start(self, status: int, headers: list[tuple[str, str]]) -> None:
            self.started.append(status)

        def chunk(self, data: bytes) -> None:
            self.chunks.append(data)
            self.left.set()  # the client leaves after the first event

        @property
        def gone(self) -> bool:
            return self.left.is_set()

        async def wait_gone(self) -> None:
            await self.left.wait()

    request = {**_search(search_api.port), "path": "/forever", "query": []}

    async def forward(relay: Relay) -> dict[str, Any]:
        handed = Forwarding(request_hash(request), f"{search_api.url}/forever", [], b"", relay)
        token = FORWARDING.set(handed)
        try:
            return await forwarder.acomplete(request)
        finally:
            FORWARDING.reset(token)

    relay = Relay()
    answer = asyncio.run(asyncio.wait_for(forward(relay), 20))
    assert relay.started == [200]
    assert (
        b"".join(relay.chunks).decode()
        == answer["text"]
        == 'event: hello\ndata: {"first": true}\n\n'
    )
    assert answer["open"] is True


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind((TOOL_HOST, 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_host_is_named_and_no_credential_is_kept(forwarder: HttpForwarder) -> None:
    port = _closed_port()
    request = _search(port)

    def forward() -> Any:
        token = FORWARDING.set(_handed(request, f"https://{TOOL_HOST}:{port}/search?key={SECRET}"))
        try:
            return forwarder.complete(request)
        finally:
            FORWARDING.reset(token)

    with pytest.raises(LiveProviderError) as caught:
        forward()
    assert str(caught.value) == (
        f"the tool host https://{TOOL_HOST}:{port} could not be reached (ConnectError)"
    )
    assert caught.value.__cause__ is None and caught.value.__context__ is None
    assert SECRET not in captured(forward)


def test_a_host_the_run_does_not_trust_is_refused(
    search_api: SearchAPI, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Verified against this process's roots only: here, none that signed the tool's cert.
    other = TestAuthority(tmp_path / "other")
    monkeypatch.setenv("SSL_CERT_FILE", str(other.ca))
    with pytest.raises(LiveProviderError, match=r"could not be reached \(ConnectError\)"):
        HttpForwarder().complete(_search(search_api.port))
    assert search_api.received == []
