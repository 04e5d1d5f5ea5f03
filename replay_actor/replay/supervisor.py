"""``Supervisor``: an orchestrator's registry of the acquisitions it made.

Runs in: the caller.

It bounds how many actors run at once, lists the live ones with their safe snapshots,
and shuts them all down. Reaping needs no call: actors are the zygote's children, which
the kernel reaps, and the zygote is reaped by the process-wide reaper (``reaper.py``),
so a long-lived orchestrator accumulates no zombies even when a run crashes and its
provider is never released.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from .._errors import ActorLost, InvalidArgument, ProviderClosed, TooManyActors
from ..fixture import Ceilings
from .handle import ReplayProvider, acquire

__all__ = ["Supervisor"]


class Supervisor:
    """Acquire, list and shut down many replay providers; a context manager."""

    def __init__(self, max_actors: int | None = None) -> None:
        if max_actors is not None and (type(max_actors) is not int or max_actors < 1):
            raise InvalidArgument("max_actors must be a positive int or None")
        self._max = max_actors
        self._lock = threading.Lock()
        self._providers: list[ReplayProvider] = []
        self._closed = False

    def _live(self) -> list[ReplayProvider]:
        live = []
        for provider in self._providers:
            if not provider.closed and _alive(provider):
                live.append(provider)
            else:
                provider.release()  # its actor is gone: close our channel to it now
        self._providers = live
        return live

    def acquire(
        self,
        fixture: str | os.PathLike[str],
        *,
        owner_pid: int | None = None,
        private: bool = False,
        ceilings: Ceilings | None = None,
        inspection_path: str | os.PathLike[str] | None = None,
        timeout: float = 30.0,
    ) -> ReplayProvider:
        """As ``replay_actor.acquire``; raises ``TooManyActors`` past ``max_actors`` and
        ``ProviderClosed`` after ``shutdown``."""
        with self._lock:
            if self._closed:
                raise ProviderClosed("this supervisor was shut down")
            if self._max is not None and len(self._live()) >= self._max:
                raise TooManyActors(f"max_actors ({self._max}) reached: release one first")
            provider = acquire(
                fixture,
                owner_pid=owner_pid,
                private=private,
                ceilings=ceilings,
                inspection_path=inspection_path,
                timeout=timeout,
            )
            self._providers.append(provider)
            return provider

    def active(self) -> list[dict[str, Any]]:
        """Actor pid, owner pid and safe snapshot of each live actor."""
        with self._lock:
            providers = list(self._live())
        result = []
        for provider in providers:
            try:
                snapshot = provider.snapshot()
            except (ActorLost, ProviderClosed):
                continue
            result.append(
                {
                    "actor_pid": provider.actor_pid,
                    "owner_pid": provider.owner_pid,
                    "snapshot": snapshot,
                }
            )
        return result

    def shutdown(self, timeout: float = 5.0) -> None:
        """Release every provider this supervisor acquired (each waits up to ``timeout``)."""
        with self._lock:
            self._closed = True
            providers, self._providers = self._providers, []
        for provider in providers:
            provider.release_within(timeout)

    def __enter__(self) -> Supervisor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()


def _alive(provider: ReplayProvider) -> bool:
    return provider._actor_alive()
