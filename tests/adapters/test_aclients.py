"""The async path's two HTTP clients (adapters/_aclients.py): aiohttp's when installed,
httpx2's otherwise. Each test runs against both, through ``acomplete``, against the real
loopback server of tests/support/hostile_server.py: the same answer, the same deadline,
the same ceiling, the same failures naming only an exception type, the key nowhere, the
client closed by its loop's shutdown.
"""

from __future__ import annotations

import asyncio
import gc
import socket
import tracemalloc
import warnings
from typing import Any

import pytest

from replay_actor import LiveProviderError, open_provider
from replay_actor.adapters._aclients import _Aiohttp, _Httpx
from replay_actor.adapters._http import HTTPAdapter
from tests.support.hostile_server import ASK, KEY, VAR, HostileServer, MiB, live, pieces, shown

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["aiohttp", "httpx2"])
def client(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which async client the adapters post with in this test."""
    monkeypatch.setattr(HTTPAdapter, "prefer_aiohttp", request.param == "aiohttp")
    monkeypatch.setenv(VAR, KEY)
    name: str = request.param
    return name


def _kind(llm: Any) -> type:
    clients = llm._adapter._aclients._clients
    (made,) = [found[0] for found in clients.values()]
    return type(made)


def _failure(manifest: dict[str, Any]) -> LiveProviderError:
    """The error one ``acomplete`` of ``ASK`` fails with, on a loop of its own."""

    async def ask() -> LiveProviderError:
        with open_provider(manifest) as llm:
            try:
                await llm.acomplete(ASK)
            except LiveProviderError as exc:
                return exc
        raise AssertionError("the call did not fail")

    return asyncio.run(ask())


def test_each_client_answers_and_is_the_one_chosen(hostile: HostileServer, client: str) -> None:
    async def ask() -> type:
        with open_provider(live(hostile, "fine")) as llm:
            first = await llm.acomplete(ASK)
            second = await llm.acomplete(ASK)
            assert first["content"] == second["content"] == "fine"
            return _kind(llm)

    assert asyncio.run(ask()) is (_Aiohttp if client == "aiohttp" else _Httpx)
    # One pooled connection carried both calls.
    assert len(hostile.ports) == 2 and hostile.ports[0] == hostile.ports[1]


@pytest.mark.parametrize("scenario", ["trickle-body", "trickle-headers"])
def test_the_deadline_bounds_a_trickled_attempt(
    hostile: HostileServer, client: str, scenario: str
) -> None:
    async def ask() -> None:
        with (
            open_provider(live(hostile, scenario, timeout=1, max_retries=1)) as llm,
            pytest.raises(LiveProviderError, match=r"within the timeout \(2 attempts\)"),
        ):
            await llm.acomplete(ASK)

    asyncio.run(ask())
    assert hostile.count(scenario) == 2


@pytest.mark.parametrize("scenario", ["huge", "huge-chunked"])
def test_a_200_mib_answer_is_not_read_past_the_ceiling(
    hostile: HostileServer, client: str, scenario: str
) -> None:
    async def ask() -> int:
        with open_provider(live(hostile, scenario, max_retries=0, timeout=30)) as llm:
            tracemalloc.start()
            try:
                with pytest.raises(LiveProviderError, match="larger than max_response_bytes"):
                    await llm.acomplete(ASK)
                return tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()

    peak = asyncio.run(ask())
    assert peak < 64 * MiB, peak
    assert hostile.sent < 200 * MiB


def test_an_unreachable_endpoint_names_only_a_type(client: str) -> None:
    with socket.socket() as held:  # a port nobody answers on: bound, never listening
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        table = {
            "provider": {
                "kind": "live",
                "adapter": "openai",
                "model": "m",
                "base_url": f"http://127.0.0.1:{port}/v1",
                "api_key_env": VAR,
                "max_retries": 1,
                "retry_backoff": 0.0,
            }
        }

        caught = _failure(table)
    assert str(caught).startswith("the live endpoint could not be reached (")
    assert str(caught).endswith("(2 attempts)")
    assert caught.__context__ is None and caught.__cause__ is None
    text = shown(caught)
    assert not pieces(text) and KEY not in text and str(port) not in str(caught)


def test_the_key_in_an_echoed_answer_is_never_returned(hostile: HostileServer, client: str) -> None:
    caught = _failure(live(hostile, "almost-key", max_retries=0))
    assert "echoes the API key" in str(caught)
    assert not pieces(shown(caught))


def test_the_client_is_closed_by_its_loops_shutdown(hostile: HostileServer, client: str) -> None:
    async def ask() -> None:
        with open_provider(live(hostile, "fine")) as llm:
            assert (await llm.acomplete(ASK))["content"] == "fine"

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        asyncio.run(ask())
        gc.collect()  # an unclosed session or socket warns when collected
    unclosed = [str(w.message) for w in seen if "nclosed" in str(w.message)]
    assert unclosed == []
    # A second loop gets a client of its own, and it answers.
    asyncio.run(ask())
