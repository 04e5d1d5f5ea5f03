"""The private-mode rule for every integration that passes a provider's failures on
(docs/privacy.md): a miss or an exhausted sequence without a request hash is raised
afresh, outside the ``except`` block that caught it.

The provider's frames hold the request hash in their locals (``digest``, the frame that
hashed the request), and a traceback printed with locals (``pytest --showlocals``,
Inspect's ``INSPECT_TRACEBACK_LOCALS=1``, Sentry) shows every frame it passed through. A
fresh exception raised here has no ``__context__`` and a traceback that starts in this
module, so none of those frames is reachable from it. In normal mode (the exception
carries its hash anyway) the original is re-raised unchanged, ``nearest`` and all.

Used by the pytest plugin, the Inspect provider and the pydantic-ai model: one copy of
the rule, so a change to it reaches all three.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from .._errors import ReplayMiss, SequenceExhausted

__all__ = ["Failure", "acall_private", "call_private"]

#: The failures a fixture gives for a request: the ones that carry its hash.
Failure = ReplayMiss | SequenceExhausted
_T = TypeVar("_T")


def call_private(call: Callable[[], _T], observe: Callable[[Failure], None] | None = None) -> _T:
    """``call()``; a miss or an exhausted sequence is shown to ``observe`` (if given),
    then re-raised, or raised afresh when it has no hash (private mode)."""
    fresh: type[Failure] | None = None
    try:
        return call()
    except (ReplayMiss, SequenceExhausted) as exc:
        if observe is not None:
            observe(exc)
        if exc.request_hash is not None:
            raise
        fresh = type(exc)
    # Out of the except block: no __context__, and the traceback starts here.
    assert fresh is not None
    raise fresh()


async def acall_private(
    call: Callable[[], Awaitable[_T]], observe: Callable[[Failure], None] | None = None
) -> _T:
    """The async form of :func:`call_private`: awaits ``call()``."""
    fresh: type[Failure] | None = None
    try:
        return await call()
    except (ReplayMiss, SequenceExhausted) as exc:
        if observe is not None:
            observe(exc)
        if exc.request_hash is not None:
            raise
        fresh = type(exc)
    assert fresh is not None
    raise fresh()
