"""``HandleState``: what every connection of one handle agrees on, and the lifecycle
messages of the replay path. No I/O.

Runs in: the caller (every backend's handle: the local one and the Ray one).

A handle has many connections to its actor (one per thread, one per event loop, one per
``complete_many`` batch's thread; or Ray object references), but one fate: released by
this caller (``closed``), ended by the acquirer (``ended``), or broken from outside
(``broken``: the actor died or hung, or an exchange's framing is in doubt). The first
connection that learns of an end or a break records it here, and every later call on any
connection fails the same way.

Every lifecycle message of the replay path is made here, and only here:

- ``this provider was released`` (``release()`` on this handle);
- ``the acquisition was released by its acquirer`` (the acquirer's release, seen by a
  copy or a call racing it), or ``the acquisition has ended`` (nobody listens any more,
  and a copy cannot tell why);
- ``the cursor actor (WHO) REASON`` (``ActorLost``), where ``WHO`` names the actor the
  backend's way (``pid 1234``, ``ray actor 5f1e…``).

The errors are built fresh for each call and never raised inside a frame that holds a
request hash (see ``ReplayProvider.complete``), so a private handle's tracebacks, locals
included, carry no hash.
"""

from __future__ import annotations

from collections.abc import Callable

from ..._errors import ActorLost, ProviderClosed, ReplayError

__all__ = [
    "DIED",
    "ENDED",
    "GONE",
    "LATE",
    "LOST_EARLIER",
    "NOT_PASSED_ON",
    "NOT_UP",
    "RELEASED",
    "UNEXPECTED",
    "UNSOLICITED",
    "Failure",
    "HandleState",
    "detached",
    "fresh",
    "released",
]

#: ``release()`` was called on this handle.
RELEASED = "this provider was released"
#: The acquirer released the acquisition (a copy, or a call racing the release, sees it).
ENDED = "the acquisition was released by its acquirer"
#: Nobody listens any more; a copy cannot tell a release from the owner's death.
GONE = "the acquisition has ended"

# Why an actor is lost: the end of ``the cursor actor (WHO) ...`` (``HandleState.lose``).
DIED = "died"
LATE = "did not answer in time"
UNEXPECTED = "sent an unexpected reply"
UNSOLICITED = "sent a reply nobody asked for"
LOST_EARLIER = "was lost earlier"
#: ``acquire`` (either backend): the actor never said it was ready.
NOT_UP = "the cursor actor did not come up in time"
#: Pickling a released handle.
NOT_PASSED_ON = "a released provider cannot be passed on"

#: Makes, per call, the error a failed connection means (never one instance shared).
Failure = Callable[[], ReplayError]


class HandleState:
    """Closed, ended or broken: the handle-wide flags, and the error each means."""

    __slots__ = ("broken", "closed", "ended", "ended_reason", "who")

    def __init__(self, who: str) -> None:
        #: How messages name the actor: ``pid 1234`` or ``ray actor 5f1e…``.
        self.who = who
        self.closed = False
        self.ended = False
        self.ended_reason = ENDED
        self.broken = False

    def usable(self) -> bool:
        return not (self.closed or self.ended or self.broken)

    def lost_message(self, reason: str) -> str:
        """The ``ActorLost`` message for ``reason`` (``died``, ``did not answer in time``)."""
        return f"the cursor actor ({self.who}) {reason}"

    def error(self) -> ReplayError | None:
        """The error a call would raise now, or None if the handle can be used."""
        if self.closed:
            return ProviderClosed(RELEASED)
        if self.ended:
            return ProviderClosed(self.ended_reason)
        if self.broken:
            return ActorLost(self.lost_message(LOST_EARLIER))
        return None

    def error_factory(self) -> Failure:
        """Makes, per call, the error the handle's state means now."""

        def make() -> ReplayError:
            return self.error() or released()

        return make

    def check(self) -> None:
        error = self.error()
        if error is not None:
            raise error

    def end(self, reason: str = ENDED) -> ProviderClosed:
        """Record that the acquisition is over; the error for the call that saw it."""
        if not self.ended:
            self.ended_reason = reason
            self.ended = True
        return ProviderClosed(reason)

    def lose(self, reason: str, cause: BaseException | None = None) -> ActorLost:
        """Record that the actor is lost (or the framing is in doubt): broken for good."""
        self.broken = True
        error = ActorLost(self.lost_message(reason))
        if cause is not None:
            error.__cause__ = cause.with_traceback(None)
        return error

    def ended_failure(self, reason: str = ENDED) -> Failure:
        """``end``, for a connection that fails every request in flight with it."""
        self.end(reason)
        message = self.ended_reason
        return lambda: ProviderClosed(message)

    def lost_failure(self, reason: str, cause: BaseException | None = None) -> Failure:
        """``lose``, for a connection that fails every request in flight with it."""
        self.lose(reason, cause)
        message = self.lost_message(reason)
        return lambda: ActorLost(message)


def released() -> ReplayError:
    """The error of a call on a handle that ``release()`` closed."""
    return ProviderClosed(RELEASED)


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


def fresh(error: ReplayError) -> ReplayError:
    """A new instance of ``error`` (same type, arguments and cause): one per element of a
    batch or per call, never one instance shared between callers."""
    copy = type(error)(*error.args)
    copy.__cause__ = error.__cause__
    return copy
