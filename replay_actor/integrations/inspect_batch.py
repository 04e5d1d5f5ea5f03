"""Inspect's OpenAI batcher, made to read a failed batch line as that line's own error
(docs/inspect.md, "Batches").

Runs in: an Inspect process (``inspect eval … --batch``). Inspect loads it with the
``replay`` provider through replay-actor's ``inspect_ai`` entry point, which it loads
at startup, so a batch run under ``replay-actor run`` gets it with nothing to import.

Inspect builds a failed line's exception through the openai SDK from an
``httpx2.Response`` made without its request; the SDK's status error reads the request,
so the line's error is lost in ``RuntimeError('The request instance has not been set on
this response.')``, and because that escapes the result file's reader, every sample of
the batch fails with it. :func:`install` wraps the reader: only where that exact
failure happens, the line's exception is made again the way the SDK makes it for a
direct call (from the line's HTTP status and its vendor error envelope, with a
request attached), so a missed line fails its own sample with the miss message and its
``replay-actor add`` hint, and the other samples keep their answers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

__all__ = ["install", "line_error"]

#: httpx2's words when a response built without a request is asked for it.
_NO_REQUEST: Final = "request instance has not been set"
#: Marks the wrapped reader, so a second install leaves it alone.
_MARK: Final = "_replay_actor_reads_failed_lines"

_Reader = Callable[[Any, dict[str, Any]], tuple[str, Any]]


def line_error(client: Any, line: dict[str, Any]) -> tuple[str, Exception] | None:
    """``(custom_id, the SDK's status error)`` for a failed batch output line
    ``{"custom_id", "response": {"status_code", "body"}, "error": {"code", "message"}}``
    (``client``: the batcher's ``openai`` client), or None when the line is not one."""
    import httpx2

    custom_id, error, response = line.get("custom_id"), line.get("error"), line.get("response")
    if not isinstance(custom_id, str) or not isinstance(error, dict):
        return None
    answered = response if isinstance(response, dict) else {}
    status = answered.get("status_code", error.get("code"))
    if type(status) is not int:
        return None
    body = answered.get("body") or {"error": {"message": str(error.get("message", ""))}}
    request = httpx2.Request("POST", str(client.base_url).rstrip("/") + "/batches")
    made = httpx2.Response(status, json=body, request=request)
    return custom_id, client._make_status_error_from_response(made)


def _wrapped(original: _Reader) -> _Reader:
    def parse(self: Any, line_data: dict[str, Any]) -> tuple[str, Any]:
        try:
            return original(self, line_data)
        except RuntimeError as exc:
            if _NO_REQUEST not in str(exc):
                raise
            made = line_error(self._openai_client, line_data)
            if made is None:
                raise
            return made

    setattr(parse, _MARK, True)
    return parse


def install() -> None:
    """Wrap Inspect's OpenAI batch line reader (once; nothing when Inspect has none)."""
    try:
        from inspect_ai.model._providers._openai_batch import OpenAIBatcher
    except ImportError:  # another Inspect layout: nothing to mend
        return
    original = getattr(OpenAIBatcher, "_parse_jsonl_line", None)
    if original is None or getattr(original, _MARK, False):
        return
    setattr(OpenAIBatcher, "_parse_jsonl_line", _wrapped(original))  # noqa: B010
