"""A batch to run, and what the batch handlers need of the exchange that routes them
(docs/batches.md).

Runs in: the serving process. Typed structurally (:class:`Router`), so this package never
imports ``serving`` (which imports it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

from .._answer import Answer, Headers

__all__ = ["BatchWork", "Router"]


class BatchWork(NamedTuple):
    """A batch to run: per line, the call to put to the provider (a ``serving.Call``) or
    the answer refusing that line before any call, and what the batch answers once every
    line has its answer (in line order)."""

    lines: list[Any]
    finish: Callable[[list[Answer]], Answer]
    #: Failures already decided, counted as ``invalid`` in the summary (a batch whose
    #: input file failed validation answers 200 with ``status: "failed"``, and must not
    #: pass quietly under ``run``).
    refused: int = 0
    #: The endpoint the lines are read as posted to (``/v1/chat/completions``): the
    #: path a run log gives each line's call.
    path: str = ""


class Router(Protocol):
    """What a batch handler asks of ``serving.Exchange``."""

    def prepare(
        self, method: str, path: str, body: bytes, headers: Headers | None = None
    ) -> Any: ...

    def not_found(
        self, method: str, path: str, headers: Headers | None = None, more: Any = ()
    ) -> Answer: ...

    def serves_post(self, path: str) -> bool: ...
