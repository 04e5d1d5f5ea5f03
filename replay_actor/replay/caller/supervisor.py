"""``Supervisor``: an orchestrator's registry of the acquisitions it made.

Runs in: the caller.

It bounds how many actors run at once, lists the live ones with their safe snapshots,
and shuts them all down. Reaping needs no call: actors are the zygote's children, which
the kernel reaps, and the zygote is reaped by the process-wide reaper (``reaper.py``),
so a long-lived orchestrator accumulates no zombies even when a run crashes and its
provider is never released.

Nor does it accumulate descriptors: each acquisition holds a channel and a pidfd on its
actor, and a run that crashes never releases them. A watcher thread (one per
supervisor, started on its first acquisition) waits on a duplicate of every actor's
pidfd and releases the handle of an actor the moment it exits; each ``acquire`` also
prunes the handles whose actors are gone (the only way where pidfds are missing).
"""

from __future__ import annotations

import os
import selectors
import threading
import weakref
from typing import Any, Protocol, Self

from ..._errors import ActorLost, InvalidArgument, ProviderClosed, TooManyActors
from ...fixture import Ceilings
from .acquisition import ExplainerFactory, Terms, acquire, check_timeout
from .handle import ReplayProvider

__all__ = ["Supervised", "Supervisor"]


class Supervised(Protocol):
    """What a supervisor needs of a handle, beyond the provider interface."""

    def actor_exit_fd(self) -> int | None:
        """A descriptor that turns readable when the actor exits, or None."""
        ...

    def actor_alive(self) -> bool: ...

    def actor_exited(self) -> None:
        """The actor exited: free the handle's descriptors now (later calls: ActorLost)."""
        ...


class _ExitWatcher:
    """Calls back, on its own daemon thread, when a watched actor exits."""

    def __init__(self, supervisor: Supervisor) -> None:
        self._owner = weakref.ref(supervisor)
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._lock = threading.Lock()
        self._added: list[tuple[int, ReplayProvider]] = []
        self._stopped = False
        self._pid = os.getpid()
        self._thread = threading.Thread(
            target=self._run, name="replay-actor-supervisor", daemon=True
        )
        self._thread.start()

    def watch(self, provider: ReplayProvider) -> None:
        fd = provider.actor_exit_fd()
        if fd is None:
            return  # no pidfd here: acquire() prunes instead
        try:
            mine = os.dup(fd)
        except OSError:
            return  # no descriptor to spare: acquire() prunes instead
        with self._lock:
            if self._stopped:
                os.close(mine)
                return
            self._added.append((mine, provider))
        self._wake()

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
        self._wake()

    @property
    def current(self) -> bool:
        """False in a fork child, where the thread does not exist."""
        return self._pid == os.getpid()

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass  # the pipe is full: the thread is awake already

    def _run(self) -> None:
        selector = self._selector
        watched: dict[int, weakref.ref[ReplayProvider]] = {}
        while True:
            exited = self._exited(watched)
            with self._lock:
                added, self._added = self._added, []
                stopped = self._stopped
            for fd, provider in added:
                watched[fd] = weakref.ref(provider)
                selector.register(fd, selectors.EVENT_READ, True)
            supervisor = self._owner()
            if supervisor is not None and exited:
                supervisor._forget(exited)
            del supervisor
            if stopped or self._owner() is None:
                break
        for fd in watched:
            selector.unregister(fd)
            os.close(fd)
        selector.close()
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _exited(self, watched: dict[int, weakref.ref[ReplayProvider]]) -> list[ReplayProvider]:
        """Wait for a wake-up or an exit: the providers whose actors exited (their pidfds
        closed and no longer watched); a wake-up only empties the pipe."""
        exited: list[ReplayProvider] = []
        for key, _ in self._selector.select():
            if key.data is None:
                try:
                    while os.read(self._wake_r, 4096):
                        pass
                except BlockingIOError:
                    pass
                continue
            fd = key.fd
            self._selector.unregister(fd)
            os.close(fd)
            provider = watched.pop(fd)()
            if provider is not None:
                exited.append(provider)
        return exited


class Supervisor:
    """Acquire, list and shut down many replay providers; a context manager."""

    #: Builds each acquisition's miss explainer: none in the replay layer; the public
    #: ``replay_actor.Supervisor`` binds the authoring layer's (``acquisition.acquire``).
    explainers: ExplainerFactory | None = None

    def __init__(self, max_actors: int | None = None) -> None:
        if max_actors is not None and (type(max_actors) is not int or max_actors < 1):
            raise InvalidArgument("max_actors must be a positive int or None")
        self._max = max_actors
        self._lock = threading.Lock()
        self._providers: list[ReplayProvider] = []
        self._closed = False
        self._watcher: _ExitWatcher | None = None

    def _forget(self, exited: list[ReplayProvider]) -> None:
        """The watcher saw these actors exit: free their handles' descriptors now (a
        later call on one raises ``ActorLost``, as it would have anyway)."""
        with self._lock:
            gone = {id(p) for p in exited}
            self._providers = [p for p in self._providers if id(p) not in gone]
        for provider in exited:
            provider.actor_exited()

    def _live(self) -> list[ReplayProvider]:
        live = []
        for provider in self._providers:
            if provider.closed:
                provider.release()  # closed by its acquirer's release (a no-op) or ended
            elif provider.actor_alive():
                live.append(provider)
            else:
                provider.actor_exited()  # its actor is gone: close our channels to it now
        self._providers = live
        return live

    def acquire(  # noqa: PLR0913 - the public Supervisor.acquire: acquire's keywords
        self,
        fixture: str | os.PathLike[str],
        *,
        owner_pid: int | None = None,
        private: bool = False,
        ceilings: Ceilings | None = None,
        inspection_path: str | os.PathLike[str] | None = None,
        timeout: float = 30.0,
        inspection_served: bool = False,
    ) -> ReplayProvider:
        """As ``replay_actor.acquire``; raises ``TooManyActors`` past ``max_actors`` and
        ``ProviderClosed`` after ``shutdown``."""
        with self._lock:
            if self._closed:
                raise ProviderClosed("this supervisor was shut down")
            live = self._live()  # prunes the dead: their descriptors close now
            if self._max is not None and len(live) >= self._max:
                raise TooManyActors(f"max_actors ({self._max}) reached: release one first")
            terms = Terms(
                owner_pid=owner_pid,
                private=private,
                ceilings=ceilings,
                inspection_path=inspection_path,
                timeout=timeout,
                inspection_served=inspection_served,
            )
            provider = acquire(fixture, terms, explainers=self.explainers)
            self._providers.append(provider)
            if self._watcher is None or not self._watcher.current:
                self._watcher = _ExitWatcher(self)
            self._watcher.watch(provider)
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
        timeout = check_timeout(timeout)
        with self._lock:
            self._closed = True
            providers, self._providers = self._providers, []
            watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.stop()
        for provider in providers:
            provider.release_within(timeout)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    def __del__(self) -> None:
        watcher = getattr(self, "_watcher", None)
        if watcher is not None:
            watcher.stop()
