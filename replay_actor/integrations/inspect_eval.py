"""Inspect's own eval logs, read for ``replay-actor compare --eval`` (docs/attribution.md).

Runs in: the ``replay-actor compare`` process; imports Inspect (``replay-actor[inspect]``)
when called, and reads the log with Inspect's own API (``inspect_ai.log.read_eval_log``),
never its file format.

Each sample becomes an ``attribution.evals.EvalRow``: its id, epoch, scores, error, input
and, per model call of its transcript, the hashes the call's request can have in a run
log, so ``compare`` can find the sample's calls whichever way the eval reached the model:

- through the ``replay`` provider: the neutral request ``inspect_ai.to_request`` makes of
  the model event's input, tools, tool choice and config, with the epoch's scope (and
  without it, for a scope-less run);
- through an SDK client under ``replay-actor run`` (Inspect's own ``openai/…`` or
  ``anthropic/…`` providers, ``--batch`` included): the SDK call the event recorded
  (chat completions, Responses or messages), read as the front door reads its body.
"""

from __future__ import annotations

import math
import os
from typing import Any

from .._errors import ReplayError
from .._request import request_hash
from ..attribution.evals import EvalRow
from ..attribution.read import display_path
from ..attribution.requests import shorten

__all__ = ["read_eval_rows"]


def _plain(value: Any) -> Any:
    """A score value as JSON can hold it (Inspect's unscored NaN becomes ``"nan"``)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _hash_or_none(request: Any) -> str | None:
    try:
        return request_hash(request)
    except ValueError:  # RequestError: not a request this mapping can make
        return None


#: What an SDK call takes beside the body (never sent in it); ``extra_body`` is merged.
_SDK_OPTIONS = ("extra_headers", "extra_query", "timeout")


def _vendor_hashes(recorded: dict[str, Any]) -> list[str]:
    """The hashes of an SDK call recorded in a model event (its keyword arguments), read
    as each shape Inspect's own providers send: chat completions, Responses, messages."""
    from ..vendors import make_vendor

    body = {k: v for k, v in recorded.items() if k not in _SDK_OPTIONS and k != "extra_body"}
    if isinstance(recorded.get("extra_body"), dict):
        body.update(recorded["extra_body"])
    found = []
    for shape in ("openai", "openai-responses", "anthropic"):
        try:
            request = make_vendor(shape).read_body(body).request
        except (ValueError, TypeError, KeyError, AttributeError):
            continue
        digest = _hash_or_none(request)
        if digest is not None:
            found.append(digest)
    return found


def _event_hashes(event: Any, epoch: int) -> tuple[str, ...]:
    from .inspect_ai import to_request

    found: list[str] = []
    for scope in (epoch, None):
        try:
            request = to_request(
                event.input, event.tools, event.tool_choice, event.config, epoch=scope
            )
        except (ValueError, TypeError, AttributeError):
            continue
        digest = _hash_or_none(request)
        if digest is not None:
            found.append(digest)
    call = getattr(event, "call", None)
    if call is not None and isinstance(call.request, dict):
        found.extend(_vendor_hashes(call.request))
    return tuple(dict.fromkeys(found))


def _input_text(sample: Any) -> str | None:
    value = sample.input
    if isinstance(value, str):
        return shorten(value)
    for message in value:
        if getattr(message, "role", None) == "user":
            return shorten(message.text)
    return None


def _row(sample: Any) -> EvalRow:
    scores = {name: _plain(score.value) for name, score in (sample.scores or {}).items()}
    error = sample.error.message if sample.error is not None else None
    requests = [
        _event_hashes(event, sample.epoch)
        for event in sample.events
        if getattr(event, "event", None) == "model"
    ]
    return EvalRow(sample.id, sample.epoch, scores, error, requests, _input_text(sample))


def read_eval_rows(path: str | os.PathLike[str]) -> list[EvalRow]:
    """Every sample of an Inspect log (``.eval`` or ``.json``) as an ``EvalRow``.

    Raises ``ReplayError`` naming the path when Inspect is not installed or the file is
    not an Inspect log it can read.
    """
    shown = display_path(path)
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise ReplayError(
            "--eval reads Inspect's logs with Inspect: pip install 'replay-actor[inspect]'"
        ) from None
    if not os.path.isfile(path):
        raise ReplayError(f"{shown}: not an Inspect log (no such file)")
    try:
        log = read_eval_log(os.fspath(path), resolve_attachments=True)
    except Exception:  # Inspect's reader raises many kinds; none may escape
        raise ReplayError(f"{shown}: not an Inspect log Inspect can read") from None
    return [_row(sample) for sample in log.samples or []]
