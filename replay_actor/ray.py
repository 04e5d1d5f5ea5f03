"""``replay_actor.ray``: the replay provider whose cursor actor runs on a Ray cluster.

``acquire(fixture, *, private=False, ceilings=None, timeout=30.0, fixture_bytes=None)``
returns a ``RayReplayProvider``: the interface of ``replay_actor.ReplayProvider`` plus
``actor_id``, and a handle that passes to Ray tasks and actors on any node. A miss is
explained as the local handle's is (``ReplayMiss.nearest``, from the fixture's request
sidecar, read where the call is made). Importing this module does not import Ray; the
first acquisition does. See docs/ray.md.
"""

from __future__ import annotations

import os

from ._replay import miss_explainer
from .fixture import Ceilings
from .replay.caller import ray_backend
from .replay.caller.acquisition import Terms
from .replay.caller.ray_backend import RayReplayProvider

__all__ = ["RayReplayProvider", "acquire"]


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
    ``fixture_bytes`` instead. Raises ``FixtureError`` (reason and line only) if the
    fixture is rejected, ``ActorLost`` if the actor does not come up within ``timeout``,
    ``ReplayError`` without Ray or before ``ray.init()``: it uses the Ray cluster this
    process is connected to.
    """
    terms = Terms(private=private, ceilings=ceilings, timeout=timeout)
    return ray_backend.acquire(
        fixture, terms, fixture_bytes=fixture_bytes, explainers=miss_explainer
    )
