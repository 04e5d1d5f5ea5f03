"""``HandleState``: what every connection of one handle agrees on.

Runs in: the caller.

A handle has many connections to its actor (one per thread, one per event loop, one per
``complete_many`` batch's thread), but one fate: released by this caller (``closed``),
ended by the acquirer (``ended``), or broken from outside (``broken``: the actor died or
hung, or an exchange's framing is in doubt). The first connection that learns of an end
or a break records it here, and every later call on any connection fails the same way.

The errors are built fresh for each call and never raised inside a frame that holds a
request hash (see ``ReplayProvider.complete``), so a private handle's tracebacks, locals
included, carry no hash.
"""

from __future__ import annotations

from collections.abc import Callable

from .._errors import ActorLost, ProviderClosed, ReplayError

__all__ = ["HandleState", "detached"]

_RELEASED = "this provider was released"
_ENDED = "the acquisition was released by its acquirer"


class HandleState:
    """Closed, ended or broken: the handle-wide flags, and the error each means."""

    __slots__ = ("actor_pid", "broken", "broken_reason", "closed", "ended", "ended_reason")

    def __init__(self, actor_pid: int) -> None:
        self.actor_pid = actor_pid
        self.closed = False
        self.ended = False
        self.ended_reason = _ENDED
        self.broken = False
        self.broken_reason = "was lost earlier"

    def usable(self) -> bool:
        return not (self.closed or self.ended or self.broken)

    def error(self) -> ReplayError | None:
        """The error a call would raise now, or None if the handle can be used."""
        if self.closed:
            return ProviderClosed(_RELEASED)
        if self.ended:
            return ProviderClosed(self.ended_reason)
        if self.broken:
            return ActorLost(f"the cursor actor (pid {self.actor_pid}) was lost earlier")
        return None

    def error_factory(self) -> Callable[[], ReplayError]:
        """Makes, per call, the error the handle's state means now."""

        def make() -> ReplayError:
            return self.error() or ProviderClosed(_RELEASED)

        return make

    def check(self) -> None:
        error = self.error()
        if error is not None:
            raise error

    def end(self, reason: str = _ENDED) -> ProviderClosed:
        """Record that the acquisition is over; the error for the call that saw it."""
        if not self.ended:
            self.ended_reason = reason
            self.ended = True
        return ProviderClosed(reason)

    def lose(self, reason: str, cause: BaseException | None = None) -> ActorLost:
        """Record that the actor is lost (or the framing is in doubt): broken for good."""
        self.broken = True
        error = ActorLost(f"the cursor actor (pid {self.actor_pid}) {reason}")
        if cause is not None:
            error.__cause__ = cause.with_traceback(None)
        return error


def detached(error: ReplayError) -> ReplayError:
    """``error`` without the frames it was raised through (they may hold a request
    hash in their locals) and without an implicit context; its cause, if any, keeps
    its type and message only."""
    error.__traceback__ = None
    error.__context__ = None
    cause = error.__cause__
    if cause is not None:
        cause.__traceback__ = None
        cause.__context__ = None
    return error
