"""``acquire``: spawn one acquisition's cursor actor and return the handle on it.

Runs in: the caller (the acquirer). The actor is forked by the zygote
(``forked/zygote.py``, asked by ``zygote_client.py``).

This is the replay layer's ``acquire``: it knows nothing of the fixture's request
sidecar. A caller in a higher layer that can explain a miss passes ``explainers`` (the
public ``replay_actor.acquire`` binds the authoring layer's); without one a miss is a
plain ``ReplayMiss``.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from typing import Final, NamedTuple

from ..._errors import (
    ActorLost,
    FixtureError,
    InspectionPathError,
    InvalidArgument,
    OwnerNotAlive,
    ReplayError,
)
from ...fixture import DEFAULT_CEILINGS, Ceilings
from ..core import protocol
from ..core.protocol import ActorConfig
from ..core.state import NOT_UP
from ..io.procs import ProcessHandle, identity
from ..io.wire import Channel, bounded_timeout, set_timeouts
from . import dial
from .base import MissExplainer
from .handle import Acquired, ReplayProvider
from .zygote_client import zygote

__all__ = ["ExplainerFactory", "Terms", "acquire", "check_timeout"]

#: ``explainers(fixture, inspection_path, private)``: the miss explainer of an acquisition
#: of ``fixture`` (absolute paths), or None when a miss has nothing to explain it with.
ExplainerFactory = Callable[[str, str | None, bool], MissExplainer | None]

#: A failed bootstrap's kind -> the error the caller can catch.
_FAILURES: Final[dict[str, type[ReplayError]]] = {
    "owner": OwnerNotAlive,
    "inspection": InspectionPathError,
}
_OWNER_WATCH_ENV: Final = "REPLAY_ACTOR_OWNER_WATCH"


def check_timeout(timeout: float) -> float:
    """``timeout`` as a float if it is a positive finite number of seconds.

    Raises ``InvalidArgument`` otherwise (``inf`` and ``nan`` included: no call may
    block forever). A value under a microsecond is rounded up to one, never down to
    "no timeout"; one over ``wire.MAX_TIMEOUT`` (about 11.6 days) is capped there.
    """
    return bounded_timeout(timeout)


class Terms(NamedTuple):
    """An acquisition's terms besides its fixture: the public ``acquire``'s keywords,
    which travel together from every entry point (``acquire``, ``Supervisor.acquire``,
    a manifest) to the actor's config. The Ray backend reads ``private``, ``ceilings``
    and ``timeout`` (Ray owns its actor, which keeps no inspection record)."""

    owner_pid: int | None = None
    private: bool = False
    ceilings: Ceilings | None = None
    inspection_path: str | os.PathLike[str] | None = None
    timeout: float = 30.0
    inspection_served: bool = False


def acquire(
    fixture: str | os.PathLike[str], terms: Terms, *, explainers: ExplainerFactory | None = None
) -> ReplayProvider:
    """Spawn this acquisition's cursor actor, wait until it has loaded ``fixture``.

    ``terms.inspection_served``: also log each hit to the inspection record (for
    ``replay-actor coverage``); it needs ``terms.inspection_path``. ``explainers``:
    makes the handle's miss explainer (see ``ExplainerFactory``).

    Raises ``FixtureError`` (reason and line only) if the fixture is rejected,
    ``ReplayError`` if the owner is not alive or this process lacks a resource (no file
    descriptor to spare), ``ActorLost`` if the actor does not come up within
    ``timeout``. Leaves no process and no descriptor behind on failure.
    """
    timeout = check_timeout(terms.timeout)
    if terms.inspection_served and terms.inspection_path is None:
        raise InvalidArgument("inspection_served=True needs an inspection_path to log to")
    try:
        config = _config(fixture, terms)
        explain = None
        if explainers is not None:
            explain = explainers(config.fixture, config.inspection_path, config.private)
        return _spawn(config, timeout, explain)
    except OSError as exc:
        failure = dial.resource_error(exc)
    raise failure


def _config(fixture: str | os.PathLike[str], terms: Terms) -> ActorConfig:
    owner = os.getpid() if terms.owner_pid is None else terms.owner_pid
    create_time = identity(owner)
    if create_time is None:
        raise OwnerNotAlive(f"the owner process {owner} is not alive")
    ceilings, inspection = terms.ceilings, terms.inspection_path
    return ActorConfig(
        fixture=os.path.abspath(os.fspath(fixture)),
        owner_pid=owner,
        owner_create_time=create_time,
        private=bool(terms.private),
        ceilings=(DEFAULT_CEILINGS if ceilings is None else ceilings).as_dict(),
        inspection_path=None if inspection is None else os.path.abspath(inspection),
        owner_watch=os.environ.get(_OWNER_WATCH_ENV, "pidfd"),
        inspection_served=bool(terms.inspection_served),
    )


def _spawn(config: ActorConfig, timeout: float, explain: MissExplainer | None) -> ReplayProvider:
    deadline = time.monotonic() + timeout  # ``timeout`` bounds the whole acquire
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            actor_pid = zygote.spawn(config, theirs, timeout)
        finally:
            theirs.close()  # the actor's end lives only in the actor: its death is EOF
    except BaseException:
        ours.close()
        raise
    process = ProcessHandle(actor_pid)
    conn: Channel | None = None
    outcome: bytes | None = None
    try:
        set_timeouts(ours, max(deadline - time.monotonic(), 0.001))
        conn = Channel.from_socket(ours)
        outcome = conn.recv()
    except (EOFError, OSError):
        outcome = None
    if outcome is not None and conn is not None and outcome.startswith(protocol.READY):
        acquired = Acquired(
            address=outcome[len(protocol.READY) :],
            actor_pid=actor_pid,
            owner_pid=config.owner_pid,
            private=config.private,
            timeout=timeout,
        )
        return ReplayProvider(acquired, conn=conn, acquirer=process, explain=explain)
    if conn is not None:
        conn.close()
    else:
        ours.close()
    if outcome is None:
        process.kill()  # silent or dead: the actor started for us, stopped by its pidfd
        process.close()
        raise ActorLost(NOT_UP)
    process.finish(timeout)
    if outcome.startswith(protocol.FIXTURE_REJECTED):
        raise FixtureError(*protocol.decode_rejection(outcome))
    kind, message = protocol.decode_failure(outcome)
    raise _FAILURES.get(kind, ReplayError)(message)
