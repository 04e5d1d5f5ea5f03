"""What a locals-printing error reporter (pytest ``--showlocals``, Sentry,
``traceback.TracebackException(capture_locals=True)``) would show of an error."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

from replay_actor import ReplayError


def captured(fn: Callable[[], Any]) -> str:
    """Everything a locals-printing reporter would show of ``fn``'s error."""
    try:
        fn()
    except ReplayError as exc:
        report = traceback.TracebackException.from_exception(exc, capture_locals=True)
        return "".join(report.format())
    raise AssertionError("no error was raised")
