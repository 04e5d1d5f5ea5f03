"""One contract for every provider: the same exceptions and messages whatever the kind.

Run against each provider ``open_provider`` can return, and the wrapper that stands in
for one (the pytest plugin's counting provider):

- ``replay``: the local cursor actor; ``ray``: the cursor actor on a local Ray cluster of
  this module's own (marked ``ray``); ``live`` and ``record``: against the loopback chat
  server (tests/support/chat_server.py); ``wrapped``: the pytest plugin's wrapper over a replay
  handle.

Each provider answers what it can: a live provider has no fixture, so no miss and no
sequence to exhaust; only the replay handles have copies. What every kind shares is
checked on every kind: fresh answers, ``RequestError`` for an invalid request,
``complete_many`` never raising (one element per request, in order), and the release.
"""

from __future__ import annotations

import asyncio
import importlib.util
import pickle
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from replay_actor import (
    Provider,
    ProviderClosed,
    ReplayError,
    ReplayMiss,
    RequestError,
    SequenceExhausted,
    entry_line,
    open_provider,
    request_hash,
)
from replay_actor._request import canonical_request
from replay_actor.files.sidecar import SidecarWriter
from tests.support.chat_server import ChatServer

# ``no_leaks`` is asked for by every case but Ray's (see ``opened``): Ray keeps its
# workers between tasks by design, and its cluster checks its own processes instead.
pytestmark = [pytest.mark.timeout(120)]

HAS_RAY = importlib.util.find_spec("ray") is not None
RELEASED = "this provider was released"
ENDED = "the acquisition was released by its acquirer"


def req(text: str, temperature: float = 0.2) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}], "params": {"temperature": temperature}}


HELLO = req("hello")
TWICE = req("twice")
MISSING = req("hello", temperature=0.9)  # one path away from HELLO: its nearest
INVALID: dict[str, Any] = {"messages": []}


def invalid_message() -> str:
    try:
        request_hash(INVALID)
    except RequestError as exc:
        return str(exc)
    raise AssertionError("the invalid request was accepted")


def write_fixture(folder: Path) -> Path:
    path = folder / "contract.jsonl"
    lines = [
        entry_line(request_hash(HELLO), response={"content": "frozen"}),
        entry_line(request_hash(TWICE), responses=[{"content": "one"}, {"content": "two"}]),
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    sidecar = SidecarWriter(path)
    for request in (HELLO, TWICE):
        sidecar.append(request_hash(request), canonical_request(request))
    return path


def live_table(chat: ChatServer) -> dict[str, Any]:
    return {
        "adapter": "openai",
        "model": "test-model",
        "base_url": chat.base_url("echo"),
        "retry_backoff": 0.0,
        "max_retries": 0,
    }


# -- the providers --------------------------------------------------------------------------


class Kind:
    """How to open one kind of provider, and what it can do."""

    def __init__(
        self,
        name: str,
        opener: Callable[[Path, ChatServer, bool], Provider],
        *,
        misses: bool,
        exhausts: bool,
        copies: bool,
    ) -> None:
        self.name = name
        self.open = opener
        self.misses = misses
        self.exhausts = exhausts
        self.copies = copies


def _replay(fixture: Path, chat: ChatServer, private: bool) -> Provider:
    data = "private" if private else "normal"
    return open_provider({"provider": {"kind": "replay", "fixture": str(fixture), "data": data}})


def _ray(fixture: Path, chat: ChatServer, private: bool) -> Provider:
    data = "private" if private else "normal"
    manifest = {"kind": "replay", "backend": "ray", "fixture": str(fixture), "data": data}
    return open_provider({"provider": manifest})


def _live(fixture: Path, chat: ChatServer, private: bool) -> Provider:
    return open_provider({"provider": {"kind": "live", **live_table(chat)}})


def _record(fixture: Path, chat: ChatServer, private: bool) -> Provider:
    data = "private" if private else "normal"
    target = fixture.parent / "recorded.jsonl"
    target.write_bytes(fixture.read_bytes())
    manifest = {"kind": "record", "fixture": str(target), "data": data, "live": live_table(chat)}
    return open_provider({"provider": manifest})


def _wrapped(fixture: Path, chat: ChatServer, private: bool) -> Provider:
    from replay_actor.integrations.pytest_plugin import _Counted, _Stats

    counted: Provider = _Counted(_replay(fixture, chat, private), _Stats(), [])
    return counted


KINDS = [
    Kind("replay", _replay, misses=True, exhausts=True, copies=True),
    Kind("live", _live, misses=False, exhausts=False, copies=False),
    Kind("record", _record, misses=False, exhausts=True, copies=False),
    Kind("wrapped", _wrapped, misses=True, exhausts=True, copies=False),
    # Last: a module-scoped parameter groups the cases by kind, so the Ray cluster starts
    # after every other kind has run, and no other case sees its worker processes.
    Kind("ray", _ray, misses=True, exhausts=True, copies=True),
]


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    """This module's own local Ray cluster (one node), started when a ``ray`` case runs."""
    from tests.support.raycluster import local_cluster

    with local_cluster(head_cpus=2):
        yield


@pytest.fixture(
    scope="module",
    params=[
        pytest.param(
            kind,
            id=kind.name,
            marks=[pytest.mark.ray, pytest.mark.skipif(not HAS_RAY, reason="Ray not installed")]
            if kind.name == "ray"
            else [],
        )
        for kind in KINDS
    ],
)
def kind(request: pytest.FixtureRequest) -> Kind:
    chosen: Kind = request.param
    if chosen.name == "ray":
        request.getfixturevalue("ray_cluster")
    return chosen


@pytest.fixture
def opened(
    kind: Kind, tmp_path: Path, chat: ChatServer, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Provider]]:
    """Opens providers of this kind (normal or private) and releases every one after."""
    if kind.name != "ray":
        request.getfixturevalue("no_leaks")
    fixture = write_fixture(tmp_path)
    made: list[Provider] = []

    def open_one(*, private: bool = False) -> Provider:
        provider = kind.open(fixture, chat, private)
        made.append(provider)
        return provider

    try:
        yield open_one
    finally:
        for provider in made:
            provider.release()


def outcome(call: Callable[[], Any]) -> tuple[str, str]:
    """(exception class name, message), or ("ok", "") for an answer."""
    try:
        call()
    except ReplayError as exc:
        return type(exc).__name__, str(exc)
    return "ok", ""


# -- what every provider does ---------------------------------------------------------------


def test_answers_are_fresh_dicts(opened: Callable[..., Provider]) -> None:
    provider = opened()
    first = provider.complete(HELLO)
    assert isinstance(first, dict)
    first.clear()
    second = asyncio.run(provider.acomplete(HELLO))
    assert isinstance(second, dict) and second
    assert second is not first


def test_an_invalid_request_is_request_error_on_every_path(
    opened: Callable[..., Provider],
) -> None:
    provider = opened()
    message = invalid_message()
    assert outcome(lambda: provider.complete(INVALID)) == ("RequestError", message)
    assert outcome(lambda: asyncio.run(provider.acomplete(INVALID))) == ("RequestError", message)
    batch = provider.complete_many([INVALID])
    assert len(batch) == 1 and isinstance(batch[0], RequestError)
    assert str(batch[0]) == message


def test_complete_many_answers_each_element_and_never_raises(
    kind: Kind, opened: Callable[..., Provider]
) -> None:
    provider = opened()
    requests = [HELLO, INVALID, HELLO, MISSING]
    batch = provider.complete_many(iter(requests))  # any iterable, not only a list
    assert len(batch) == len(requests)
    assert isinstance(batch[0], dict) and isinstance(batch[2], dict)
    assert isinstance(batch[1], RequestError)
    assert isinstance(batch[3], ReplayMiss if kind.misses else dict)
    assert provider.complete_many([]) == []
    provider.release()
    # Released: still no exception, one ProviderClosed per element (each its own).
    after = provider.complete_many(requests)
    assert [outcome_of(r) for r in after] == [("ProviderClosed", RELEASED)] * len(requests)
    assert len({id(r) for r in after}) == len(after)


def outcome_of(result: Any) -> tuple[str, str]:
    if isinstance(result, ReplayError):
        return type(result).__name__, str(result)
    return "ok", ""


def test_release_is_idempotent_and_every_later_call_is_provider_closed(
    opened: Callable[..., Provider],
) -> None:
    provider = opened()
    assert not provider.closed
    provider.complete(HELLO)
    provider.release()
    provider.release()  # idempotent, never raises
    assert provider.closed
    closed = ("ProviderClosed", RELEASED)
    assert outcome(lambda: provider.complete(HELLO)) == closed
    # A closed provider says so before judging the request.
    assert outcome(lambda: provider.complete(INVALID)) == closed
    assert outcome(lambda: asyncio.run(provider.acomplete(HELLO))) == closed
    with provider:  # the context manager's exit releases again, harmlessly
        pass


# -- misses, sequences, copies (where the kind has them) ------------------------------------


def test_a_miss_is_the_same_on_every_path_with_its_nearest(
    kind: Kind, opened: Callable[..., Provider]
) -> None:
    if not kind.misses:
        pytest.skip(f"a {kind.name} provider has no fixture to miss")
    provider = opened()
    digest = request_hash(MISSING)
    nearest = {"request_hash": request_hash(HELLO), "paths": ["params.temperature"]}
    first_line = f"no replay fixture matches this request (request_hash: {digest})"
    with pytest.raises(ReplayMiss) as sync_miss:
        provider.complete(MISSING)
    with pytest.raises(ReplayMiss) as async_miss:
        asyncio.run(provider.acomplete(MISSING))
    (batch_miss,) = provider.complete_many([MISSING])
    assert isinstance(batch_miss, ReplayMiss)
    for miss in (sync_miss.value, async_miss.value, batch_miss):
        assert miss.request_hash == digest
        assert miss.nearest == nearest
        assert str(miss).split("\n")[0] == first_line


def test_a_private_miss_names_nothing(kind: Kind, opened: Callable[..., Provider]) -> None:
    if not kind.misses:
        pytest.skip(f"a {kind.name} provider has no fixture to miss")
    provider = opened(private=True)
    with pytest.raises(ReplayMiss) as sync_miss:
        provider.complete(MISSING)
    with pytest.raises(ReplayMiss) as async_miss:
        asyncio.run(provider.acomplete(MISSING))
    (batch_miss,) = provider.complete_many([MISSING])
    for miss in (sync_miss.value, async_miss.value, batch_miss):
        assert isinstance(miss, ReplayMiss)
        assert str(miss) == "no replay fixture matches this request"
        assert miss.request_hash is None and miss.nearest is None


def test_an_exhausted_sequence_is_the_same_on_every_path(
    kind: Kind, opened: Callable[..., Provider]
) -> None:
    if not kind.exhausts:
        pytest.skip(f"a {kind.name} provider has no sequence to exhaust")
    provider = opened()
    message = f"replay sequence exhausted for this request (request_hash: {request_hash(TWICE)})"
    assert [r["content"] for r in provider.complete_many([TWICE, TWICE])] == ["one", "two"]  # type: ignore[index]
    assert outcome(lambda: provider.complete(TWICE)) == ("SequenceExhausted", message)
    assert outcome(lambda: asyncio.run(provider.acomplete(TWICE))) == ("SequenceExhausted", message)
    (batch,) = provider.complete_many([TWICE])
    assert isinstance(batch, SequenceExhausted) and str(batch) == message


def test_the_acquirers_release_reaches_its_copies(
    kind: Kind, opened: Callable[..., Provider]
) -> None:
    if not kind.copies:
        pytest.skip(f"a {kind.name} provider has no copies")
    provider = opened()
    twin: Provider = pickle.loads(pickle.dumps(provider))
    try:
        assert twin.complete(HELLO) == provider.complete(HELLO)
        with pytest.raises(ReplayMiss) as miss:
            twin.complete(MISSING)
        assert miss.value.nearest is not None  # a copy explains its misses too
        provider.release()
        assert outcome(lambda: twin.complete(HELLO)) == ("ProviderClosed", ENDED)
        assert [outcome_of(r) for r in twin.complete_many([HELLO])] == [("ProviderClosed", ENDED)]
        assert twin.closed
    finally:
        twin.release()
    with pytest.raises(ProviderClosed):
        pickle.dumps(provider)  # a released handle is not passed on
