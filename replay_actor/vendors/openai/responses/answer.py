"""The neutral response -> a Responses ``response`` object (``response_object``) and
its server-sent events (``events``), with ids derived from the response id.

Item ids (``msg_``, ``fc_``) derive from the response id and the item's position; a call
without an id (or with one already used) gets one derived the same way, because the
SDK's stream helper tells calls apart by ``call_id``. Reasoning items recorded from this
API go back first, verbatim; another vendor's reasoning is left out.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from ...._response import Response
from ..._common import VendorCall
from ._fields import NAME, digest
from .request import ResponsesCall

__all__ = ["events", "logprob_tokens", "output_items", "response_object"]

_encode: Final = msgspec.json.encode


def _usage(response: Response) -> dict[str, Any]:
    usage = response.usage
    if usage is None:
        usage = {}
    if "input_tokens" in usage or "output_tokens" in usage:
        out = dict(usage)
    else:
        # Recorded through chat completions (or written by hand that way).
        out = {
            "input_tokens": usage.get("prompt_tokens", 0),
            "output_tokens": usage.get("completion_tokens", 0),
        }
    out.setdefault("input_tokens", 0)
    out.setdefault("output_tokens", 0)
    out.setdefault("total_tokens", out["input_tokens"] + out["output_tokens"])
    out.setdefault("input_tokens_details", {"cached_tokens": 0, "cache_write_tokens": 0})
    out.setdefault("output_tokens_details", {"reasoning_tokens": 0})
    return out


def logprob_tokens(response: Response) -> list[Any]:
    """The tokens of a response's ``logprobs`` (chat's ``content`` list), for the
    output text part; none when it has none."""
    tokens = (response.logprobs or {}).get("content")
    return tokens if isinstance(tokens, list) else []


def output_items(response: Response, rid: str) -> list[dict[str, Any]]:
    """The output items, with ids derived from the response id and position."""
    items: list[dict[str, Any]] = []
    if response.reasoning is not None and response.reasoning.vendor == NAME:
        items.extend(response.reasoning.items)
    calls = response.tool_calls
    if response.refusal is not None:
        part: dict[str, Any] = {"type": "refusal", "refusal": response.refusal}
    elif response.content is not None or not calls:
        part = {
            "type": "output_text",
            "text": response.content or "",
            "annotations": [],
            "logprobs": logprob_tokens(response),
        }
    else:
        part = {}
    if part:
        items.append(
            {
                "id": f"msg_{digest(f'{rid}:{len(items)}')}",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [part],
            }
        )
    seen: set[str] = set()
    for call in calls:
        position = len(items)
        call_id = call.id
        if not call_id or call_id in seen:
            # The stream helper tells calls apart by call_id: never empty, never twice.
            call_id = f"call_{digest(f'{rid}:{position}:call')}"
        seen.add(call_id)
        items.append(
            {
                "id": f"fc_{digest(f'{rid}:{position}')}",
                "type": "function_call",
                "status": "completed",
                "call_id": call_id,
                "name": call.name,
                "arguments": call.arguments,
            }
        )
    return items


def _status(response: Response) -> tuple[str, dict[str, Any] | None]:
    if response.finish_reason == "length":
        return "incomplete", {"reason": "max_output_tokens"}
    if response.finish_reason == "content_filter":
        return "incomplete", {"reason": "content_filter"}
    return "completed", None


def response_object(
    response: Response, call: VendorCall, rid: str, output: list[dict[str, Any]]
) -> dict[str, Any]:
    echo: dict[str, Any] = call.echo if isinstance(call, ResponsesCall) else {}
    status, incomplete = _status(response)
    body: dict[str, Any] = {
        "id": rid,
        "object": "response",
        "created_at": response.created,
        "status": status,
        "error": None,
        "incomplete_details": incomplete,
        "instructions": None,
        "max_output_tokens": None,
        "metadata": {},
        "model": call.model,
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": True,
        "temperature": None,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": None,
        "truncation": "disabled",
        "usage": _usage(response),
    }
    body.update(echo)
    return body


def events(final: dict[str, Any]) -> bytes:
    """``final`` as the API streams it: ``response.created``, ``response.in_progress``,
    each output item added, filled and done, then ``response.completed`` (or
    ``response.incomplete``) carrying ``final`` itself, so the SDK's ``responses.stream``
    helper ends with exactly the non-streamed object."""
    out: list[bytes] = []

    def emit(kind: str, **fields: Any) -> None:
        event = {"type": kind, "sequence_number": len(out), **fields}
        out.append(b"event: " + kind.encode() + b"\ndata: " + _encode(event) + b"\n\n")

    start = {**final, "status": "in_progress", "output": [], "usage": None}
    start["incomplete_details"] = None
    emit("response.created", response=start)
    emit("response.in_progress", response=start)
    for index, item in enumerate(final["output"]):
        kind = item.get("type")
        if kind == "message":
            item_id = item["id"]
            emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "content": []},
            )
            for c, part in enumerate(item["content"]):
                where = {"item_id": item_id, "output_index": index, "content_index": c}
                if part["type"] == "refusal":
                    emit("response.content_part.added", **where, part={**part, "refusal": ""})
                    emit("response.refusal.delta", **where, delta=part["refusal"])
                    emit("response.refusal.done", **where, refusal=part["refusal"])
                else:
                    emit("response.content_part.added", **where, part={**part, "text": ""})
                    tokens = part["logprobs"]
                    emit("response.output_text.delta", **where, delta=part["text"], logprobs=tokens)
                    emit("response.output_text.done", **where, text=part["text"], logprobs=tokens)
                emit("response.content_part.done", **where, part=part)
        elif kind == "function_call":
            where = {"item_id": item["id"], "output_index": index}
            emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "arguments": ""},
            )
            emit("response.function_call_arguments.delta", **where, delta=item["arguments"])
            emit(
                "response.function_call_arguments.done",
                **where,
                name=item["name"],
                arguments=item["arguments"],
            )
        else:
            # Reasoning items (replayed verbatim) arrive whole.
            emit("response.output_item.added", output_index=index, item=item)
        emit("response.output_item.done", output_index=index, item=item)
    last = "response.completed" if final["status"] == "completed" else "response.incomplete"
    emit(last, response=final)
    return b"".join(out)
