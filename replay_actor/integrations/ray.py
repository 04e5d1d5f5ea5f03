"""The owned cursor as a Ray actor: one acquisition shared by tasks on every node.

::

    acquirer (driver, task or actor)             cursor actor (a Ray actor, num_cpus=0)
    ---------------------------------------      ---------------------------------------
    acquire() -- create (path | bytes ref) -->   load_fixture / parse_fixture, once
              <-- ready: actor id | FE reason -  cursors (the same class as the local actor)
    handle.complete(request)                     calls run one at a time (Ray's default),
      validate, normalise, request_hash            so every element goes out exactly once
      -- complete(hash) ------------------------>  RESPONSE + bytes | MISS | EXHAUSTED
      <- result code ------------------------      (GOODBYE once the acquisition is released)
      decode -> fresh dict, or raise here

Only the hash travels toward the actor and only response bytes come back. The actor never
raises for a request: it answers a result code and the caller raises the exception, so
a miss never reaches Ray's error wrapping, its task-failure logs or its dashboards (in
private mode, no hash is ever in an exception, wherever it surfaces).

Ownership is Ray's own (docs/ray.md): the cursor actor is a non-detached actor owned by
the process that called ``acquire``, so Ray ends it when that process dies (a killed
driver or task leaves no cursor actor) or when no handle is left. ``release()`` on the
acquirer's handle marks the actor closed (every later call from any copy answers
``ProviderClosed``) and then kills it; a copy that finds the actor dead asks Ray's actor
table why, so a release reads as ``ProviderClosed`` and anything else as ``ActorLost``.

Ray is imported only when a Ray handle is made or used; the core never imports it.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import threading
import warnings
from collections.abc import Iterable
from typing import Any, Final

import msgspec

from .._errors import (
    ActorLost,
    FixtureError,
    InvalidArgument,
    ProviderClosed,
    ReplayError,
    ReplayMiss,
    RequestError,
    SequenceExhausted,
)
from .._request import RequestLike, request_hash
from ..fixture import DEFAULT_CEILINGS, Ceilings, Cursors, load_fixture, parse_fixture
from ..replay import protocol
from ..replay.handle import check_timeout

__all__ = ["CursorActor", "RayReplayProvider", "acquire"]

_decode = msgspec.json.decode
# The actor's result codes are the local actor's replies (``replay.protocol``), so both
# backends speak one vocabulary; ``GOODBYE`` answers every call after the release.
_RELEASED: Final = protocol.GOODBYE

_RELEASED_MESSAGE: Final = "the acquisition was released by its acquirer"
#: How long ``release()`` waits for Ray to report the killed actor gone, at most.
_RELEASE_WAIT: Final = 5.0


def ray_module() -> Any:
    """Ray, imported on first use; a clear ``ReplayError`` when it is not installed."""
    try:
        return importlib.import_module("ray")
    except ImportError:
        pass
    raise ReplayError(
        "the Ray backend needs Ray: install replay-actor[ray] (pip install 'replay-actor[ray]')"
    )


class CursorActor:
    """The body of the Ray actor (wrapped with ``ray.remote`` on first use).

    It loads the fixture once and answers result codes, never exceptions: a rejected
    fixture is remembered as (reason, line) and reported by ``ready``.
    """

    def __init__(self, fixture: str | None, data: bytes | None, ceilings: dict[str, int]) -> None:
        self._cursors: Cursors | None = None
        self._snapshot: dict[str, Any] = {}
        self._rejected: tuple[str, int | None] | None = None
        limits = Ceilings(**ceilings)
        try:
            if data is None:
                assert fixture is not None
                table = load_fixture(fixture, ceilings=limits)
            else:
                table = parse_fixture(data, limits)
        except FixtureError as exc:
            self._rejected = (exc.reason, exc.line)
        else:
            # The project's one implementation of the cursor semantics.
            self._cursors = Cursors(table)
            self._snapshot = table.snapshot()

    def ready(self) -> bytes:
        """``OK`` + this actor's id (hex), or ``FE`` + JSON ``[reason, line]``."""
        if self._rejected is not None:
            return protocol.fixture_rejected(*self._rejected)
        actor_id: str = ray_module().get_runtime_context().get_actor_id()
        return protocol.ready(actor_id.encode("ascii"))

    def complete(self, digest: str) -> bytes:
        cursors = self._cursors
        if cursors is None:
            return _RELEASED
        return protocol.outcome_reply(cursors.take(digest))

    def complete_many(self, digests: list[str]) -> list[bytes]:
        if self._cursors is None:
            return [_RELEASED]
        return [self.complete(digest) for digest in digests]

    def snapshot(self) -> bytes:
        if self._cursors is None:
            return _RELEASED
        return protocol.json_reply({**self._snapshot, **self._cursors.counters()})

    def inspect(self) -> bytes:
        if self._cursors is None:
            return _RELEASED
        return protocol.json_reply(self._cursors.inspect())

    def release(self) -> bytes:
        """From the acquirer: stop serving (and free the table) before the kill."""
        self._cursors = None
        self._snapshot = {}
        return protocol.RELEASED


_actor_class: Any = None
_actor_class_lock = threading.Lock()


def _remote_class() -> Any:
    global _actor_class
    with _actor_class_lock:
        if _actor_class is None:
            # num_cpus=0: an idle cursor must not hold a CPU a task could use. No
            # restarts and no retries: a restarted actor would start its cursors over,
            # and a retried call could hand out a second element.
            _actor_class = ray_module().remote(num_cpus=0, max_restarts=0, max_task_retries=0)(
                CursorActor
            )
        return _actor_class


class RayReplayProvider:
    """A handle on one acquisition's cursor actor running on Ray. Use ``acquire()``.

    The interface of ``ReplayProvider``: ``complete``, ``acomplete``, ``complete_many``,
    ``snapshot``, ``inspect``, ``release``, context manager and ``closed``, with the same
    exceptions and messages; plus ``actor_id``. It pickles into Ray tasks and actors on
    any node; every copy shares the acquisition's cursors. Only the handle ``acquire``
    returned ends the acquisition; ``release()`` on a copy closes that copy alone.
    """

    def __init__(
        self, actor: Any, *, actor_id: str, private: bool, timeout: float, acquirer: bool
    ) -> None:
        self._actor = actor
        self._actor_id = actor_id
        self._private = private
        self._timeout = timeout
        self._acquirer = acquirer
        self._state = threading.Lock()
        self._closed = False  # release() was called on this handle
        self._ended = False  # the acquisition was released by its acquirer
        self._broken = False  # the actor died or did not answer in time

    # -- properties -------------------------------------------------------------------

    @property
    def actor_id(self) -> str:
        """The Ray actor id of this acquisition's cursor actor (hex)."""
        return self._actor_id

    @property
    def closed(self) -> bool:
        """True once ``release()`` was called on this handle (or the acquisition ended)."""
        return self._closed or self._ended

    @property
    def private(self) -> bool:
        """True when hashes are kept out of public diagnostics."""
        return self._private

    @property
    def _who(self) -> str:
        return f"ray actor {self._actor_id}"

    # -- calls ------------------------------------------------------------------------

    def complete(self, request: RequestLike) -> dict[str, Any]:
        """Answer ``request`` from the fixture: a fresh response dict.

        Raises ``ReplayMiss``, ``SequenceExhausted``, ``RequestError``,
        ``ProviderClosed`` or ``ActorLost``; never falls back to anything.
        """
        self._usable()  # a closed handle says so before judging the request
        digest = request_hash(request)
        reply = self._get(self._submit("complete", digest))
        return self._answer(reply, digest)

    async def acomplete(self, request: RequestLike) -> dict[str, Any]:
        """``complete`` for asyncio: awaits Ray's object reference on the event loop."""
        self._usable()
        digest = request_hash(request)
        ref = self._submit("complete", digest)
        failure: BaseException | None = None
        try:
            reply: bytes = await asyncio.wait_for(_awaitable(ref), self._timeout)
        except TimeoutError as exc:
            failure = exc
        except ray_module().exceptions.RayError as exc:
            failure = exc
        if failure is not None:
            raise self._error(failure)
        return self._answer(reply, digest)

    def complete_many(self, requests: Iterable[RequestLike]) -> list[dict[str, Any] | ReplayError]:
        """Answer a batch in one round trip to the actor, in order.

        Each result is the response dict, or the ``ReplayError`` that ``complete`` would
        have raised for that request (``ReplayMiss``, ``SequenceExhausted``,
        ``RequestError``). A closed handle or a lost actor fails the whole batch.
        """
        self._usable()
        results: list[dict[str, Any] | ReplayError | None] = []
        digests: list[str] = []
        for request in requests:
            invalid: RequestError | None = None
            try:
                digests.append(request_hash(request))
            except RequestError as exc:
                invalid = exc
            # Keep the error, not the frames holding the request it was judging.
            results.append(None if invalid is None else invalid.with_traceback(None))
        if not digests:
            return [r for r in results if r is not None]
        replies: list[bytes] = self._get(self._submit("complete_many", digests))
        if replies == [_RELEASED]:
            self._ended = True
            raise ProviderClosed(_RELEASED_MESSAGE)
        answers = iter(zip(replies, digests, strict=True))
        out: list[dict[str, Any] | ReplayError] = []
        for result in results:
            if result is not None:
                out.append(result)
                continue
            reply, digest = next(answers)
            out.append(self._outcome(reply, digest))
        return out

    def snapshot(self) -> dict[str, Any]:
        """The fixture's safe snapshot plus ``served``, ``misses`` and ``exhausted``."""
        result: dict[str, Any] = self._json(self._get(self._submit("snapshot")))
        result["kind"] = "replay"
        result["backend"] = "ray"
        return result

    def inspect(self) -> dict[str, Any]:
        """Owner-only diagnostics: the hashes of misses and exhausted sequences."""
        result: dict[str, Any] = self._json(self._get(self._submit("inspect")))
        return result

    # -- the caller's side of a result code -------------------------------------------

    def _outcome(self, reply: bytes, digest: str) -> dict[str, Any] | ReplayError:
        kind = reply[:1]
        if kind == protocol.RESPONSE:
            response: dict[str, Any] = _decode(memoryview(reply)[1:])
            return response
        shown = None if self._private else digest
        if kind == protocol.MISS:
            return ReplayMiss(shown)
        if kind == protocol.EXHAUSTED:
            return SequenceExhausted(shown)
        if kind == _RELEASED:
            self._ended = True
            return ProviderClosed(_RELEASED_MESSAGE)
        self._broken = True
        return ActorLost("the cursor actor sent an unexpected reply")

    def _answer(self, reply: bytes, digest: str) -> dict[str, Any]:
        outcome = self._outcome(reply, digest)
        if isinstance(outcome, ReplayError):
            raise outcome  # built here, outside any except block: nothing chained
        return outcome

    def _json(self, reply: bytes) -> Any:
        if reply[:1] == protocol.JSON:
            return protocol.decode_json(reply)
        if reply == _RELEASED:
            self._ended = True
            raise ProviderClosed(_RELEASED_MESSAGE)
        self._broken = True
        raise ActorLost("the cursor actor sent an unexpected reply")

    # -- talking to the actor ---------------------------------------------------------

    def _usable(self) -> Any:
        """The actor handle, once the handle is known to be usable."""
        if self._closed:
            raise ProviderClosed("this provider was released")
        if self._ended:
            raise ProviderClosed(_RELEASED_MESSAGE)
        if self._broken:
            raise ActorLost(f"the cursor actor ({self._who}) was lost earlier")
        return self._actor

    def _submit(self, method: str, *args: Any) -> Any:
        """Send one call to the actor: its object reference."""
        actor = self._usable()
        ray = ray_module()
        # Never let a call start a Ray instance of its own (Ray would, after
        # ``ray.shutdown()``): the acquisition belonged to the cluster that is gone.
        if not ray.is_initialized():
            self._broken = True
            raise ActorLost(
                f"the cursor actor ({self._who}) is out of reach: Ray is not running here"
            )
        failure: BaseException | None = None
        try:
            return getattr(actor, method).remote(*args)
        except Exception as exc:  # Ray reports a failed submission as a bare Exception
            failure = exc
        self._broken = True
        lost = ActorLost(f"the cursor actor ({self._who}) cannot be reached")
        lost.__cause__ = failure
        raise lost

    def _get(self, ref: Any) -> Any:
        """``ray.get`` bounded by the handle's timeout; Ray's failures become ours."""
        ray = ray_module()
        failure: BaseException | None = None
        try:
            value = ray.get(ref, timeout=self._timeout)
        except ray.exceptions.RayError as exc:  # GetTimeoutError included
            failure = exc
        else:
            return value
        raise self._error(failure)

    def _error(self, failure: BaseException) -> ReplayError:
        """``ProviderClosed`` or ``ActorLost`` for a call that failed with ``failure``;
        marks the handle ended or broken accordingly."""
        ray = ray_module()
        lost: ReplayError
        if isinstance(failure, (TimeoutError, ray.exceptions.GetTimeoutError)):
            self._broken = True
            lost = ActorLost(f"the cursor actor ({self._who}) did not answer in time")
            lost.__cause__ = failure
            return lost
        if isinstance(failure, ray.exceptions.RayActorError) and _killed_on_release(self._actor_id):
            self._ended = True
            return ProviderClosed(_RELEASED_MESSAGE)
        self._broken = True
        if isinstance(failure, ray.exceptions.RayActorError):
            lost = ActorLost(f"the cursor actor ({self._who}) died")
            lost.__cause__ = failure
            return lost
        # Any other Ray error (a failure inside Ray itself): not chained, since its text
        # is Ray's and need not be safe to show.
        return ActorLost(f"the cursor actor ({self._who}) failed")

    # -- lifecycle --------------------------------------------------------------------

    def release(self) -> None:
        """Close this handle; on the handle ``acquire`` returned, end the acquisition.

        Idempotent and never raises. The acquirer's release stops the actor serving
        (every copy's next call raises ``ProviderClosed``), kills it, and waits (bounded)
        until Ray reports it gone.
        """
        with self._state:
            if self._closed:
                return
            self._closed = True
            actor, self._actor = self._actor, None
        if not self._acquirer or actor is None:
            return
        ray = ray_module()
        if not ray.is_initialized():
            return  # this process left the cluster, and Ray ended its actors with it
        if not (self._ended or self._broken):
            try:
                ray.get(actor.release.remote(), timeout=min(self._timeout, _RELEASE_WAIT))
            except Exception:
                pass  # dead or unresponsive: the kill below ends it either way
        try:
            ray.kill(actor, no_restart=True)
            # Resolves (with an error) once the actor is gone: release returns after.
            gone = actor.__ray_ready__.remote()
            ray.wait([gone], timeout=min(self._timeout, _RELEASE_WAIT))
        except Exception:
            pass  # release never raises: whatever Ray reports, the actor is not ours now

    def __enter__(self) -> RayReplayProvider:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def __del__(self) -> None:
        # Ray ends the actor once no handle refers to it; say that it was not released,
        # as an unclosed file does.
        if getattr(self, "_acquirer", False) and not self._closed:
            warnings.warn(
                f"unreleased RayReplayProvider for ray actor {self._actor_id}",
                ResourceWarning,
                source=self,
                stacklevel=1,
            )

    def __repr__(self) -> str:
        state = "closed" if self.closed else "broken" if self._broken else "open"
        role = "acquirer" if self._acquirer else "copy"
        return f"<RayReplayProvider {state} {role} ray actor={self._actor_id}>"

    # -- copies -----------------------------------------------------------------------

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        if self.closed:
            raise ProviderClosed("a released provider cannot be passed on")
        # Ray serialises the actor handle itself, registering the copy as a borrower.
        return (_rebuild, (self._actor, self._actor_id, self._private, self._timeout))


def _rebuild(actor: Any, actor_id: str, private: bool, timeout: float) -> RayReplayProvider:
    return RayReplayProvider(
        actor, actor_id=actor_id, private=private, timeout=timeout, acquirer=False
    )


async def _awaitable(ref: Any) -> Any:
    return await ref


def _killed_on_release(actor_id: str) -> bool:
    """Whether Ray's actor table says the actor was ended by ``ray.kill`` (the release).

    Read from the GCS actor table, which needs no dashboard; any doubt reads as "no",
    so a failure to ask is reported as a lost actor, never as a clean release.
    """
    try:
        state = importlib.import_module("ray._private.state")
        protocol = importlib.import_module("ray.core.generated.common_pb2")
        info = state.actors(actor_id)
        context = info["DeathCause"].actor_died_error_context
        killed = protocol.ActorDiedErrorContext.RAY_KILL
        return bool(info["State"] == "DEAD" and context.reason == killed)
    except Exception:
        return False


def acquire(
    fixture: str | os.PathLike[str] | None = None,
    *,
    private: bool = False,
    ceilings: Ceilings | None = None,
    timeout: float = 30.0,
    fixture_bytes: bytes | None = None,
) -> RayReplayProvider:
    """Start this acquisition's cursor actor on Ray and wait until it loaded the fixture.

    The actor runs on this process's node. ``fixture`` is a path read there (resolved
    against this process's working directory); or pass the file's content as
    ``fixture_bytes`` instead. Raises
    ``FixtureError`` (reason and line only) if the fixture is rejected, ``ActorLost`` if
    the actor does not come up within ``timeout``, ``ReplayError`` without Ray or before
    ``ray.init()``: it uses the Ray cluster this process is connected to.
    """
    timeout = check_timeout(timeout)
    if (fixture is None) == (fixture_bytes is None):
        raise InvalidArgument("give exactly one of fixture and fixture_bytes")
    limits = DEFAULT_CEILINGS if ceilings is None else ceilings
    if fixture_bytes is not None and len(fixture_bytes) > limits.max_file_bytes:
        raise FixtureError("file_too_large")
    ray = ray_module()
    if not ray.is_initialized():
        # Ray would start a private cluster on the first call; an acquisition belongs on
        # the cluster the evaluation's tasks run on, so that choice is the caller's.
        raise ReplayError("Ray is not initialized in this process: call ray.init() first")
    path = None if fixture is None else os.path.abspath(os.fspath(fixture))
    # Shipped through the object store, so the actor's creation spec (which Ray's
    # control plane keeps) holds a reference rather than the payloads.
    data = None if fixture_bytes is None else ray.put(bytes(fixture_bytes))
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    # On the acquirer's node, always: the actor dies with its owner anyway, so tying it
    # to the owner's node costs no resilience; the path resolved here is read here, and
    # the acquirer's own calls skip a network hop. (A soft preference is not enough:
    # Ray spreads zero-CPU actors over the nodes regardless.)
    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    actor = _remote_class().options(scheduling_strategy=here).remote(path, data, limits.as_dict())
    failure: BaseException | None = None
    outcome = b""
    try:
        outcome = ray.get(actor.ready.remote(), timeout=timeout)
    except ray.exceptions.RayError as exc:
        failure = exc
    finally:
        del data  # loaded (or failed): the bytes need not stay in the object store
    if failure is None and outcome.startswith(protocol.READY):
        return RayReplayProvider(
            actor,
            actor_id=outcome[len(protocol.READY) :].decode("ascii"),
            private=bool(private),
            timeout=timeout,
            acquirer=True,
        )
    try:
        ray.kill(actor, no_restart=True)
    except Exception:
        pass  # already gone: nothing is left to end
    if failure is not None:
        if isinstance(failure, ray.exceptions.GetTimeoutError):
            raise ActorLost("the cursor actor did not come up in time") from failure
        raise ActorLost("the cursor actor failed to start") from failure
    raise FixtureError(*protocol.decode_rejection(outcome))
