"""``replay_actor.ray``: the replay provider whose cursor actor runs on a Ray cluster.

``acquire(fixture, *, private=False, ceilings=None, timeout=30.0, fixture_bytes=None)``
returns a ``RayReplayProvider``: the interface of ``replay_actor.ReplayProvider`` plus
``actor_id``, and a handle that passes to Ray tasks and actors on any node. Importing
this module does not import Ray; the first acquisition does. See docs/ray.md.
"""

from __future__ import annotations

from .integrations.ray import RayReplayProvider, acquire

__all__ = ["RayReplayProvider", "acquire"]
