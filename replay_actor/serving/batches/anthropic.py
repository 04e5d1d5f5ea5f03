"""Anthropic Message Batches over the serving provider (docs/batches.md, "Anthropic").

Runs in: the serving process. ``POST /v1/messages/batches`` takes ``{"requests":
[{"custom_id", "params"}]}``, puts each ``params`` to the provider as if posted alone to
``/v1/messages``, and answers the batch already ``ended``; its ``results_url`` (on the
host the request came to) gives the JSON Lines ``{"custom_id", "result": {"type":
"succeeded", "message"}}`` or ``{"type": "errored", "error": <Anthropic's error
envelope>}``, in request order.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

import msgspec

from ...vendors import identifier
from .._answer import Answer, Headers, error_answer
from ._http import header, json_answer, read_object
from ._page import Paging, ends, page, read_limit, read_query
from ._work import BatchWork, Router

if TYPE_CHECKING:
    from .store import Store

__all__ = ["AnthropicBatches"]

_ROUTE: Final = re.compile(r"^/v1/messages/batches(?:/([^/]+)(/results|/cancel)?)?/?$")
_CUSTOM_ID: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_DAY: Final = 24 * 3600
#: Anthropic's default and bound of ``limit``.
_LIMIT: Final = (20, 1000)


def _when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


class AnthropicBatches:
    """The Message Batches endpoints, on ``exchange``'s ``/v1/messages`` shape and
    ``store`` (the results are a stored file with the batch's id and ``_results``)."""

    paths: Final = (
        "POST /v1/messages/batches",
        "GET /v1/messages/batches",
        "GET /v1/messages/batches/{batch_id}",
        "GET /v1/messages/batches/{batch_id}/results",
        "POST /v1/messages/batches/{batch_id}/cancel",
    )

    def __init__(self, exchange: Router, store: Store) -> None:
        self._exchange = exchange
        self._store = store

    def _error(self, status: int, kind: str, message: str) -> Answer:
        return error_answer("anthropic", status, kind, message)

    def handle(
        self, method: str, path: str, body: bytes, headers: Headers | None, query: str = ""
    ) -> Answer | BatchWork | None:
        route = _ROUTE.match(path)
        if route is None:
            return None
        batch_id, action = route.group(1), route.group(2)
        if batch_id is None:
            if method == "POST":
                return self._create(body, headers)
            if method == "GET":
                return self._list(read_query(query))
            return self._exchange.not_found(method, path, headers)
        wanted = {None: ("GET", "DELETE"), "/results": ("GET",), "/cancel": ("POST",)}[action]
        if method not in wanted:
            return self._exchange.not_found(method, path, headers)
        batch = self._store.batch(batch_id)
        if batch is None or not batch_id.startswith("msgbatch_"):
            return self._error(404, "not_found", f"no batch {identifier(batch_id)}")
        if action == "/results":
            stored = self._store.file(f"{batch_id}_results")
            if stored is None:
                return self._error(404, "not_found", "the batch's results are gone")
            return Answer(200, [("content-type", "application/binary")], stored.content)
        if method == "DELETE":
            self._store.delete_batch(batch_id)
            return json_answer({"id": batch_id, "type": "message_batch_deleted"})
        # A batch ends at once: cancelling one leaves it as it is (docs/batches.md).
        return json_answer(batch)

    def _list(self, params: dict[str, str]) -> Answer:
        """One page, newest first: ``after_id`` pages on (the SDK passes the last
        ``last_id``), ``before_id`` back (the first ``first_id``)."""
        after, before = params.get("after_id"), params.get("before_id")
        if after is not None and before is not None:
            return self._error(400, "invalid_request", "give after_id or before_id, not both")
        limit = read_limit(params, *_LIMIT)
        if isinstance(limit, str):
            return self._error(400, "invalid_request", limit)
        cut = page(self._store.batches("msgbatch_"), Paging(limit, after, before))
        if isinstance(cut, str):
            return self._error(
                400,
                "invalid_request",
                cut.replace("after must", "after_id must").replace("before must", "before_id must"),
            )
        return json_answer({"data": cut.items, "has_more": cut.has_more, **ends(cut.items)})

    def _create(self, body: bytes, headers: Headers | None) -> Answer | BatchWork:
        data = read_object(body)
        if isinstance(data, str):
            return self._error(400, "invalid_request", data)
        requests = data.get("requests")
        if type(requests) is not list or not requests:
            return self._error(400, "invalid_request", "requests must be a non-empty list")
        seen: set[str] = set()
        calls: list[Any] = []
        for i, item in enumerate(requests):
            custom_id = item.get("custom_id") if type(item) is dict else None
            params = item.get("params") if type(item) is dict else None
            if type(custom_id) is not str or not _CUSTOM_ID.match(custom_id):
                problem = f"requests[{i}].custom_id must be 1-64 letters, digits, _ or -"
                return self._error(400, "invalid_request", problem)
            if custom_id in seen:
                problem = f"requests[{i}].custom_id repeats {custom_id!r}"
                return self._error(400, "invalid_request", problem)
            if type(params) is not dict:
                return self._error(
                    400, "invalid_request", f"requests[{i}].params must be an object"
                )
            seen.add(custom_id)
            if params.get("stream"):
                calls.append(self._error(400, "invalid_request", "a batch request cannot stream"))
            else:
                encoded = msgspec.json.encode(params)
                calls.append(self._exchange.prepare("POST", "/v1/messages", encoded))
        ids = [item["custom_id"] for item in requests]
        host = header(headers, "host") or "localhost"

        def finish(answers: list[Answer]) -> Answer:
            return self._finish(ids, answers, host)

        return BatchWork(calls, finish, path="/v1/messages")

    def _finish(self, ids: list[str], answers: list[Answer], host: str) -> Answer:
        lines, succeeded = [], 0
        for custom_id, answer in zip(ids, answers, strict=True):
            body = msgspec.json.decode(answer.body) if answer.body else None
            if answer.status == 200:
                succeeded += 1
                result: dict[str, Any] = {"type": "succeeded", "message": body}
            else:
                result = {"type": "errored", "error": body}
            lines.append(msgspec.json.encode({"custom_id": custom_id, "result": result}) + b"\n")
        batch_id = self._store.new_id("msgbatch_")
        self._store.add_file(
            f"{batch_id}_results.jsonl", "results", b"".join(lines), file_id=f"{batch_id}_results"
        )
        now = time.time()
        batch = {
            "id": batch_id,
            "type": "message_batch",
            "processing_status": "ended",
            "request_counts": {
                "processing": 0,
                "succeeded": succeeded,
                "errored": len(ids) - succeeded,
                "canceled": 0,
                "expired": 0,
            },
            "ended_at": _when(now),
            "created_at": _when(now),
            "expires_at": _when(now + _DAY),
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": f"http://{host}/v1/messages/batches/{batch_id}/results",
        }
        self._store.put_batch(batch)
        return json_answer(batch)
