"""The eval row a call belongs to: named by the integration that knows it, written by the
run log beside the call, never part of the request (docs/attribution.md, "Eval rows").

Runs in: the process that owns the provider. The integration sets the row around the
provider call (``in_row``); the log writer (``provider.LoggedProvider``) reads it when it
writes the call's line. The Inspect provider names ``{"sample": <id>, "epoch": <n>}``,
the pytest plugin ``{"test": <node id>}``.

Why beside the request and not in it: ``scope`` is hashed (docs/request.md), and every
fixture recorded through the Inspect provider holds ``scope: {"epoch": N}`` in its
hashes; a sample id added to the scope would make each of them miss. A context variable
reaches the writer through every wrapper between the integration and the log (the pytest
plugin's counter, ``LoggedProvider``) for threads' own calls and asyncio tasks alike,
without a new argument on the provider interface, and costs one lookup per call.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final

__all__ = ["ROW", "current_row", "in_row"]

#: The row of the call being made in this context, or None.
ROW: Final[ContextVar[dict[str, Any] | None]] = ContextVar("replay_actor_row", default=None)

#: The row of the call being made in this context (what the log writer reads).
current_row: Final = ROW.get


@contextmanager
def in_row(row: dict[str, Any] | None) -> Iterator[None]:
    """Calls made inside the ``with`` block belong to ``row`` (None: to no row)."""
    token = ROW.set(row)
    try:
        yield
    finally:
        ROW.reset(token)
