"""The public replay entry points: ``acquire`` and ``Supervisor`` with misses explained.

The replay layer (``replay/``) never reads a fixture's request sidecar: a handle is
given a miss explainer by the layer that made it. These are the public names, and they
bind the authoring layer's (``authoring/explain.py``): ``ReplayMiss.nearest`` in normal
mode, a line in the inspection record in private mode. The Ray backend's public
``acquire`` (``replay_actor.ray``) and ``open_provider`` bind the same.
"""

from __future__ import annotations

import functools
import os

from ._errors import ReplayMiss
from ._request import RequestLike
from .fixture import Ceilings
from .replay.caller import acquisition, supervisor
from .replay.caller.base import MissExplainer
from .replay.caller.handle import ReplayProvider

__all__ = ["Supervisor", "acquire", "miss_explainer"]


def _explain(
    request: RequestLike, digest: str, *, private: bool, fixture: str, inspection: str | None
) -> ReplayMiss:
    # Imported on the first miss only: a run that never misses never loads it.
    from .authoring.explain import miss_error

    return miss_error(request, digest, private, fixture, inspection)


def miss_explainer(
    fixture: str | None, inspection_path: str | None, private: bool
) -> MissExplainer | None:
    """The explainer of an acquisition of ``fixture``; None when a miss has nothing to
    say (no fixture path, or private mode with nowhere private to say it)."""
    if not fixture or (private and inspection_path is None):
        return None
    return functools.partial(_explain, private=private, fixture=fixture, inspection=inspection_path)


def acquire(  # noqa: PLR0913 - the public acquire: its documented keywords
    fixture: str | os.PathLike[str],
    *,
    owner_pid: int | None = None,
    private: bool = False,
    ceilings: Ceilings | None = None,
    inspection_path: str | os.PathLike[str] | None = None,
    timeout: float = 30.0,
    inspection_served: bool = False,
) -> ReplayProvider:
    """Spawn this acquisition's cursor actor, wait until it has loaded ``fixture``.

    ``inspection_served``: also log each hit to the inspection record (for
    ``replay-actor coverage``); it needs ``inspection_path``.

    Raises ``FixtureError`` (reason and line only) if the fixture is rejected,
    ``ReplayError`` if the owner is not alive or this process lacks a resource (no file
    descriptor to spare), ``ActorLost`` if the actor does not come up within
    ``timeout``. Leaves no process and no descriptor behind on failure.
    """
    terms = acquisition.Terms(
        owner_pid=owner_pid,
        private=private,
        ceilings=ceilings,
        inspection_path=inspection_path,
        timeout=timeout,
        inspection_served=inspection_served,
    )
    return acquisition.acquire(fixture, terms, explainers=miss_explainer)


class Supervisor(supervisor.Supervisor):
    """Acquire, list and shut down many replay providers; a context manager."""

    explainers = staticmethod(miss_explainer)
