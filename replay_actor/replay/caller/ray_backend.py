"""The Ray backend: the owned cursor as a Ray actor, shared by tasks on every node.

Runs in: the caller (``RayReplayProvider``, ``acquire``) and a Ray worker (``CursorActor``).

A replay backend beside the local one: the same core (``protocol.py`` frames and
``decode_reply``, ``state.HandleState`` messages), with Ray's object references as the
driver that moves the bytes. ``manifest/`` reaches it here; ``replay_actor.ray`` is
its public face.

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

When the cluster dies (its GCS and raylet killed, as ``ray stop`` does), nothing here
waits on Ray's word. Every wait is on the object reference's own future, by the handle's
clock (``_resolve``), not on a timeout of Ray's: with the GCS gone, Ray's queries to it
(the actor table) block for a minute and more. And the cursor actor exits the moment
its node's raylet does (``_watch_node``): Ray means its workers to, but checks that the
raylet's PID is alive, and a raylet killed but not yet reaped (a zombie child of the
driver that ``ray.init()`` started it from) passes that check, so the actor would go on
answering for the minute until Ray's GCS reconnect timeout ends every process. Either
way a call is ``ActorLost`` within its ``timeout`` (and the question of why, a GCS
query, bounded by the same deadline). A wait that times out leaves Ray a callback on the
reference until Ray gives up on it; the handle is broken from then on and sends nothing
more, so those are bounded by the calls in flight when it broke, and the GCS questions
by one thread per actor (``_MAX_ASKING`` at most).

Ray is imported only when a Ray handle is made or used; nothing else imports it.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import threading
import time
import warnings
from collections.abc import Sequence
from typing import Any, Final, NamedTuple

import psutil

from ..._errors import (
    ActorLost,
    FixtureError,
    InvalidArgument,
    ProviderClosed,
    ReplayError,
    RequestError,
)
from ..._request import RequestLike, request_hash
from ...fixture import DEFAULT_CEILINGS, Ceilings, Cursors, load_fixture, parse_fixture
from ..core import protocol
from ..core.state import DIED, LATE, NOT_PASSED_ON, NOT_UP, UNEXPECTED, HandleState, detached, fresh
from ..io.procs import ProcessHandle
from .acquisition import ExplainerFactory, Terms, check_timeout
from .base import MissExplainer, ReplayHandle, Result
from .sync import failed

__all__ = [
    "CursorActor",
    "RayAcquired",
    "RayReplayProvider",
    "acquire",
    "ray_module",
]

# The actor's answers are the local actor's frames (``protocol``), decoded by the same
# ``protocol.decode_reply``: ``GOODBYE`` means what it means locally (the acquirer
# released the acquisition) and answers every call after the release; ``RELEASED``
# acknowledges the release itself.
_GOODBYE: Final = protocol.GOODBYE
_JSON_REPLIES: Final = frozenset({protocol.JSON})
#: The least time given to asking Ray why an actor died, even past a call's deadline.
_MIN_ASK: Final = 0.5
#: How long ``release()`` waits for Ray to report the killed actor gone, at most.
_RELEASE_WAIT: Final = 5.0
#: At most this many questions to Ray's actor table at once, each on a thread of its own
#: (with the GCS gone, one blocks for a minute and more); past it, the answer is "no".
_MAX_ASKING: Final = 4
#: Set by the raylet in each worker it starts: the PID the actor watches (``_watch_node``).
_RAYLET_PID_ENV: Final = "RAY_RAYLET_PID"
#: Where the kernel gives no pidfd, the raylet is looked at this often (seconds).
_NODE_POLL: Final = 0.5


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
    fixture is remembered as (reason, line) and reported by ``ready``. It ends with its
    node's raylet (``_watch_node``).
    """

    def __init__(self, fixture: str | None, data: bytes | None, ceilings: dict[str, int]) -> None:
        _watch_node()
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
            return _GOODBYE
        return protocol.outcome_reply(cursors.take(digest))

    def complete_many(self, digests: list[str]) -> list[bytes]:
        """One answer per digest, in order (every one ``GOODBYE`` after the release)."""
        return [self.complete(digest) for digest in digests]

    def snapshot(self) -> bytes:
        if self._cursors is None:
            return _GOODBYE
        return protocol.json_reply({**self._snapshot, **self._cursors.counters()})

    def inspect(self) -> bytes:
        if self._cursors is None:
            return _GOODBYE
        return protocol.json_reply(self._cursors.inspect())

    def release(self) -> bytes:
        """From the acquirer: stop serving (and free the table) before the kill."""
        self._cursors = None
        self._snapshot = {}
        return protocol.RELEASED


def _watch_node() -> None:
    """In the cursor actor's process: exit the moment this node's raylet has exited.

    Ray's workers check once a second that their raylet's PID is alive, which a raylet
    killed but not yet reaped by its parent still is (a zombie), so they would go on
    serving a node whose raylet, and a cluster whose GCS, may be gone. A pidfd turns
    readable when the raylet exits, reaped or not; without one, psutil counts a zombie
    as dead. One thread for the actor's life, asleep in the kernel: nothing per call.
    """
    pid = os.environ.get(_RAYLET_PID_ENV, "")
    if not pid.isdigit():
        return  # not in a worker a raylet started: there is no node to outlive
    # Opened while the raylet that started this worker lives (a pidfd cannot follow a
    # reused PID; Ray's own check trusts the same PID).
    raylet = ProcessHandle(int(pid))
    threading.Thread(
        target=_exit_with, args=(raylet,), name="replay-actor-ray-node", daemon=True
    ).start()


def _exit_with(raylet: ProcessHandle) -> None:
    if raylet.fd is not None:
        while not raylet.wait(3600.0):
            pass
    else:
        try:
            while raylet.alive():
                time.sleep(_NODE_POLL)
        except psutil.Error:
            return  # the raylet cannot be looked at: Ray's own check is all there is
    # As Ray ends a worker whose raylet died: at once, with nothing to flush (the
    # cursors die with the acquisition). A caller's call fails by its own deadline.
    os._exit(1)


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


class RayAcquired(NamedTuple):
    """What an acquisition on Ray gives its handles: the Ray actor, its id, and the
    terms of every call. All a copy carries to another task or node (``__reduce__``)."""

    actor: Any
    actor_id: str
    private: bool
    timeout: float


class RayReplayProvider(ReplayHandle):
    """A handle on one acquisition's cursor actor running on Ray. Use ``acquire()``.

    The interface of ``ReplayProvider``: ``complete``, ``acomplete``, ``complete_many``,
    ``snapshot``, ``inspect``, ``release``, context manager and ``closed``, with the same
    exceptions and messages (``state.HandleState`` makes them, and
    ``protocol.decode_reply`` decodes the actor's answers, for both backends); plus
    ``actor_id``. It pickles into Ray tasks and actors on any node; every copy shares
    the acquisition's cursors. Only the handle ``acquire`` returned ends the
    acquisition; ``release()`` on a copy closes that copy alone.

    Every call is bounded by the handle's own deadline (``ray.wait`` with the timeout),
    never by Ray's: with the cluster gone, a call is ``ActorLost`` within ``timeout``.
    """

    def __init__(
        self, acquired: RayAcquired, *, acquirer: bool, explain: MissExplainer | None = None
    ) -> None:
        self._actor = acquired.actor
        self._actor_id = acquired.actor_id
        self._private = acquired.private
        self._timeout = acquired.timeout
        self._acquirer = acquirer
        self._explain = explain
        self._lock = threading.Lock()
        self._state = HandleState(f"ray actor {acquired.actor_id}")

    # -- properties -------------------------------------------------------------------

    @property
    def actor_id(self) -> str:
        """The Ray actor id of this acquisition's cursor actor (hex)."""
        return self._actor_id

    # -- how one request travels (the calls themselves are ``base.ReplayHandle``'s) ----

    def _ask(self, request: RequestLike) -> tuple[bytes | ReplayError, str | None]:
        # The one frame that holds the hash; it returns (never raises) what went wrong.
        digest = request_hash(request)
        shown = None if self._private else digest
        return self._call("complete", digest), shown

    def _send(self, request: RequestLike) -> tuple[Any, str | None]:
        # As ``_ask``: the hash lives only in this frame, which never raises a ReplayError.
        digest = request_hash(request)
        return self._submit("complete", digest), None if self._private else digest

    async def _receive(self, pending: Any) -> bytes | ReplayError:
        # Awaits Ray's object reference on the event loop, by our own deadline.
        deadline = time.monotonic() + self._timeout
        failure: BaseException | None = None
        try:
            reply: bytes = await asyncio.wait_for(_awaitable(pending), self._timeout)
        except TimeoutError as exc:
            failure = exc
        except ray_module().exceptions.RayError as exc:
            failure = exc
        if failure is not None:
            return self._error(failure, deadline)
        return reply

    def _batch(self, batch: Sequence[RequestLike]) -> list[Result]:
        # One round trip to the actor for the whole batch, answered in order.
        error = self._state.error()
        if error is not None:
            return failed(batch, error)
        results: list[Result | None] = [None] * len(batch)
        sent: list[int] = []
        digests: list[str] = []
        for i, request in enumerate(batch):
            try:
                digests.append(request_hash(request))
            except RequestError as exc:
                results[i] = detached(exc)  # the error, not the frames judging it
            else:
                sent.append(i)
        if digests:
            replies = self._call("complete_many", digests)
            for n, i in enumerate(sent):
                if isinstance(replies, ReplayError):
                    results[i] = fresh(replies)
                else:
                    shown = None if self._private else digests[n]
                    results[i] = protocol.decode_reply(replies[n], shown, self._state)
        return results  # type: ignore[return-value]  # every element is filled

    def snapshot(self) -> dict[str, Any]:
        """The fixture's safe snapshot plus ``served``, ``misses`` and ``exhausted``."""
        result: dict[str, Any] = self._json("snapshot")
        result["kind"] = "replay"
        result["backend"] = "ray"
        return result

    def inspect(self) -> dict[str, Any]:
        """Owner-only diagnostics: the hashes of misses and exhausted sequences."""
        result: dict[str, Any] = self._json("inspect")
        return result

    def _json(self, method: str) -> Any:
        self._state.check()
        reply = self._call(method)
        if isinstance(reply, bytes) and reply[:1] in _JSON_REPLIES:
            return protocol.decode_json(reply)
        if isinstance(reply, ReplayError):
            raise reply
        if reply == _GOODBYE:
            raise self._state.end()
        raise self._state.lose(UNEXPECTED)

    # -- moving bytes to and from the actor -------------------------------------------

    def _call(self, method: str, *args: Any) -> Any:
        """One call to the actor and its answer, bounded by the handle's own deadline;
        the ``ReplayError`` is returned, never raised."""
        deadline = time.monotonic() + self._timeout
        ref = self._submit(method, *args)
        if isinstance(ref, ReplayError):
            return ref
        ray = ray_module()
        failure: BaseException
        try:
            return _resolve(ref, self._timeout)
        except TimeoutError as exc:
            failure = exc
        except ray.exceptions.RayError as exc:
            failure = exc
        return self._error(failure, deadline)

    def _submit(self, method: str, *args: Any) -> Any:
        """Send one call to the actor: its object reference, or the error (returned)."""
        state = self._state
        error = state.error()
        if error is not None:
            return error
        ray = ray_module()
        # Never let a call start a Ray instance of its own (Ray would, after
        # ``ray.shutdown()``): the acquisition belonged to the cluster that is gone.
        if not ray.is_initialized():
            return state.lose("is out of reach: Ray is not running here")
        failure: BaseException | None = None
        try:
            return getattr(self._actor, method).remote(*args)
        except Exception as exc:  # Ray reports a failed submission as a bare Exception
            failure = exc
        return state.lose("cannot be reached", failure)

    def _error(self, failure: BaseException, deadline: float) -> ReplayError:
        """``ProviderClosed`` or ``ActorLost`` for a call that failed with ``failure``;
        marks the handle ended or broken accordingly. Asking Ray why the actor died is
        bounded by the call's ``deadline`` (``time.monotonic``), as the call was."""
        ray = ray_module()
        state = self._state
        if isinstance(failure, (TimeoutError, ray.exceptions.GetTimeoutError)):
            return state.lose(LATE, failure)
        if isinstance(failure, ray.exceptions.RayActorError):
            if _killed_on_release(self._actor_id, within=deadline - time.monotonic()):
                return state.end()
            return state.lose(DIED, failure)
        # Any other Ray error (a failure inside Ray itself): not chained, since its text
        # is Ray's and need not be safe to show.
        return state.lose("failed")

    # -- lifecycle --------------------------------------------------------------------

    def release(self) -> None:
        """Close this handle; on the handle ``acquire`` returned, end the acquisition.

        Idempotent and never raises. The acquirer's release stops the actor serving
        (every copy's next call raises ``ProviderClosed``), kills it, and waits (bounded)
        until Ray reports it gone.
        """
        state = self._state
        with self._lock:
            if state.closed:
                return
            state.closed = True
            actor, self._actor = self._actor, None
        if not self._acquirer or actor is None:
            return
        ray = ray_module()
        if not ray.is_initialized():
            return  # this process left the cluster, and Ray ended its actors with it
        wait = min(self._timeout, _RELEASE_WAIT)
        if not (state.ended or state.broken):
            try:
                _resolve(actor.release.remote(), wait)
            except Exception:
                pass  # dead or unresponsive: the kill below ends it either way
        try:
            ray.kill(actor, no_restart=True)
            # Resolves (with an error) once the actor is gone: release returns after.
            _resolve(actor.__ray_ready__.remote(), wait)
        except Exception:
            pass  # release never raises: whatever Ray reports, the actor is not ours now

    def __del__(self) -> None:
        # Ray ends the actor once no handle refers to it; say that it was not released,
        # as an unclosed file does.
        if getattr(self, "_acquirer", False) and not self._state.closed:
            warnings.warn(
                f"unreleased RayReplayProvider for ray actor {self._actor_id}",
                ResourceWarning,
                source=self,
                stacklevel=1,
            )

    def __repr__(self) -> str:
        state = "closed" if self.closed else "broken" if self._state.broken else "open"
        role = "acquirer" if self._acquirer else "copy"
        return f"<RayReplayProvider {state} {role} ray actor={self._actor_id}>"

    # -- copies -----------------------------------------------------------------------

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        if self.closed:
            raise ProviderClosed(NOT_PASSED_ON)
        # Ray serialises the actor handle itself, registering the copy as a borrower.
        acquired = RayAcquired(self._actor, self._actor_id, self._private, self._timeout)
        return (_rebuild, (acquired, self._explain))


def _rebuild(acquired: RayAcquired, explain: MissExplainer | None = None) -> RayReplayProvider:
    return RayReplayProvider(acquired, acquirer=False, explain=explain)


async def _awaitable(ref: Any) -> Any:
    return await ref


def _resolve(ref: Any, timeout: float) -> Any:
    """The value of a Ray object reference within ``timeout`` seconds by our own clock:
    raises ``TimeoutError`` (concurrent.futures' is the builtin) or Ray's error.

    Ray completes the reference's future from its own thread; we wait on it here, where
    no retry loop of Ray's can hold us past the deadline (``ray.get``/``ray.wait`` keep
    the deadline in Ray's hands). If Ray never completes it, its callback waits in
    Ray until the process ends: one per call that timed out, and such a call breaks
    the handle.
    """
    return ref.future().result(timeout=max(timeout, 0.0))


#: The question in flight per actor id: its thread and the answer it will append.
_asking: dict[str, tuple[threading.Thread, list[bool]]] = {}
_asking_lock = threading.Lock()


def _killed_on_release(actor_id: str, *, within: float) -> bool:
    """Whether Ray's actor table says the actor was ended by ``ray.kill`` (the release).

    Read from the GCS actor table, which needs no dashboard; any doubt reads as "no",
    so a failure to ask is reported as a lost actor, never as a clean release. Asked on
    a thread and waited for at most ``within`` seconds (a small floor): with the GCS
    gone, Ray's own query blocks for a minute and more. Calls that ask about one actor
    at once share one question, and no more than ``_MAX_ASKING`` are out at a time, so
    a GCS that never answers holds a bounded number of threads.
    """
    with _asking_lock:
        entry = _asking.get(actor_id)
        if entry is None:
            if len(_asking) >= _MAX_ASKING:
                return False  # Ray's table is not answering: no thread more for it
            answer: list[bool] = []
            asker = threading.Thread(
                target=_ask_why, args=(actor_id, answer), name="replay-actor-ray-why", daemon=True
            )
            entry = _asking[actor_id] = (asker, answer)
            asker.start()
    asker, answer = entry
    asker.join(max(within, _MIN_ASK))
    return bool(answer and answer[0])


def _ask_why(actor_id: str, answer: list[bool]) -> None:
    try:
        state = importlib.import_module("ray._private.state")
        protocol = importlib.import_module("ray.core.generated.common_pb2")
        info = state.actors(actor_id)
        context = info["DeathCause"].actor_died_error_context
        killed = protocol.ActorDiedErrorContext.RAY_KILL
        answer.append(bool(info["State"] == "DEAD" and context.reason == killed))
    except Exception:
        answer.append(False)
    finally:
        with _asking_lock:
            _asking.pop(actor_id, None)


def acquire(
    fixture: str | os.PathLike[str] | None,
    terms: Terms,
    *,
    fixture_bytes: bytes | None = None,
    explainers: ExplainerFactory | None = None,
) -> RayReplayProvider:
    """Start this acquisition's cursor actor on Ray and wait until it loaded the fixture.

    The actor runs on this process's node. ``fixture`` is a path read there (resolved
    against this process's working directory); or pass the file's content as
    ``fixture_bytes`` instead. ``terms``: its ``private``, ``ceilings`` and ``timeout``.
    ``explainers`` makes the handle's miss explainer (see
    ``acquisition.ExplainerFactory``; only a fixture path can be explained). Raises
    ``FixtureError`` (reason and line only) if the fixture is rejected, ``ActorLost`` if
    the actor does not come up within ``timeout``, ``ReplayError`` without Ray or before
    ``ray.init()``: it uses the Ray cluster this process is connected to.
    """
    timeout = check_timeout(terms.timeout)
    if (fixture is None) == (fixture_bytes is None):
        raise InvalidArgument("give exactly one of fixture and fixture_bytes")
    private, ceilings = terms.private, terms.ceilings
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
        outcome = _resolve(actor.ready.remote(), timeout)
    except (TimeoutError, ray.exceptions.RayError) as exc:
        failure = exc
    finally:
        del data  # loaded (or failed): the bytes need not stay in the object store
    if failure is None and outcome.startswith(protocol.READY):
        actor_id = outcome[len(protocol.READY) :].decode("ascii")
        return RayReplayProvider(
            RayAcquired(actor, actor_id, bool(private), timeout),
            acquirer=True,
            explain=None if explainers is None or path is None else explainers(path, None, private),
        )
    try:
        ray.kill(actor, no_restart=True)
    except Exception:
        pass  # already gone: nothing is left to end
    if failure is not None:
        if isinstance(failure, TimeoutError):
            raise ActorLost(NOT_UP) from failure
        raise ActorLost("the cursor actor failed to start") from failure
    raise FixtureError(*protocol.decode_rejection(outcome))
