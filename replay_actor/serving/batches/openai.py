"""OpenAI Files and Batches over the serving provider (docs/batches.md, "OpenAI").

Runs in: the serving process. ``POST /v1/files`` keeps an upload; ``POST /v1/batches``
reads its JSON Lines (``{"custom_id", "method": "POST", "url": endpoint, "body"}``),
puts each line to the provider as if posted alone, and answers the batch already
``completed``: the output file holds the lines answered 200, the error file the others,
each line ``{"id", "custom_id", "response": {"status_code", "request_id", "body"},
"error"}``, where a failed line's ``body`` is the vendor's error envelope and its
``error`` is ``{"code": status, "message"}`` (the status as a number: what Inspect's
batcher reads). A file that is not a valid batch input fails the whole batch at
creation, as OpenAI does: ``status: "failed"`` and ``errors.data`` naming each line.
"""

from __future__ import annotations

import re
import time
from typing import Any, Final

import msgspec

from ..._strict_json import MAX_BODY_DEPTH, NotStrictJSON, loads_strict
from ...vendors import identifier
from .._answer import Answer, Headers, error_answer
from ._http import json_answer, read_object, read_upload
from ._page import Paging, ends, page, read_limit, read_query
from ._work import BatchWork, Router
from .store import Store, StoredFile

__all__ = ["OpenAIBatches"]

_FILES: Final = re.compile(r"^/v1/files(?:/([^/]+)(/content)?)?/?$")
_BATCHES: Final = re.compile(r"^/v1/batches(?:/([^/]+)(/cancel)?)?/?$")
_DAY: Final = 24 * 3600
#: OpenAI's bounds and defaults of ``limit``: files list all by default, batches 20.
_FILES_LIMIT: Final = (10_000, 10_000)
_BATCHES_LIMIT: Final = (20, 100)


def _file_object(stored: StoredFile) -> dict[str, Any]:
    return {
        "id": stored.id,
        "object": "file",
        "bytes": len(stored.content),
        "created_at": stored.created_at,
        "filename": stored.filename,
        "purpose": stored.purpose,
        "status": "processed",
        "expires_at": None,
        "status_details": None,
    }


def _line_error(code: str, message: str, line: int | None = None) -> dict[str, Any]:
    return {"code": code, "message": message, "param": None, "line": line}


def _read_lines(content: bytes, endpoint: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The lines' ``{"custom_id", "body"}``, and the validation errors (OpenAI's
    ``errors.data`` items, each naming its line)."""
    lines: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number, raw in enumerate(content.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            line = loads_strict(raw.decode("utf-8"), max_depth=MAX_BODY_DEPTH)
        except (UnicodeDecodeError, NotStrictJSON):
            errors.append(_line_error("invalid_json_line", "the line is not JSON", number))
            continue
        if type(line) is not dict:
            errors.append(_line_error("invalid_json_line", "the line is not an object", number))
            continue
        custom_id = line.get("custom_id")
        if type(custom_id) is not str or not custom_id:
            errors.append(_line_error("missing_custom_id", "custom_id must be a string", number))
        elif custom_id in seen:
            errors.append(_line_error("duplicate_custom_id", "custom_id repeats", number))
        elif line.get("method", "POST") != "POST":
            errors.append(_line_error("invalid_method", "method must be POST", number))
        elif line.get("url") != endpoint:
            errors.append(
                _line_error(
                    "mismatched_url", f"url must be the batch's endpoint {endpoint}", number
                )
            )
        elif type(line.get("body")) is not dict:
            errors.append(_line_error("invalid_body", "body must be an object", number))
        else:
            seen.add(custom_id)
            lines.append({"custom_id": custom_id, "body": line["body"]})
    if not lines and not errors:
        errors.append(_line_error("empty_file", "the input file has no requests"))
    return lines, errors


class OpenAIBatches:
    """The Files and Batches endpoints, on ``exchange``'s shapes and ``store``."""

    paths: Final = (
        "POST /v1/files",
        "GET /v1/files",
        "GET /v1/files/{file_id}",
        "GET /v1/files/{file_id}/content",
        "POST /v1/batches",
        "GET /v1/batches",
        "GET /v1/batches/{batch_id}",
        "POST /v1/batches/{batch_id}/cancel",
    )

    def __init__(self, exchange: Router, store: Store) -> None:
        self._exchange = exchange
        self._store = store

    def _error(self, status: int, kind: str, message: str) -> Answer:
        return error_answer("openai", status, kind, message)

    def handle(
        self, method: str, path: str, body: bytes, headers: Headers | None, query: str = ""
    ) -> Answer | BatchWork | None:
        files = _FILES.match(path)
        if files is not None:
            if method == "GET" and files.group(1) is None:
                return self._list_files(read_query(query))
            return self._files(method, path, files.groups(), body, headers)
        batches = _BATCHES.match(path)
        if batches is not None:
            if method == "GET" and batches.group(1) is None:
                return self._list_batches(read_query(query))
            return self._batches(method, path, batches.group(1), batches.group(2), body)
        return None

    def _listed(self, items: list[dict[str, Any]], paging: Paging | str) -> Answer:
        """One page of a list, in OpenAI's cursor form (``after`` = the last id)."""
        cut = paging if isinstance(paging, str) else page(items, paging)
        if isinstance(cut, str):
            return self._error(400, "invalid_request", cut)
        return json_answer(
            {"object": "list", "data": cut.items, **ends(cut.items), "has_more": cut.has_more}
        )

    def _list_files(self, params: dict[str, str]) -> Answer:
        order = params.get("order", "desc")
        if order not in ("asc", "desc"):
            return self._error(400, "invalid_request", "order must be 'asc' or 'desc'")
        limit = read_limit(params, *_FILES_LIMIT)
        paging = limit if isinstance(limit, str) else Paging(limit, params.get("after"))
        purpose = params.get("purpose")
        # Only OpenAI's own files: an Anthropic batch's results are kept as a file too.
        files = [
            _file_object(f)
            for f in self._store.files()
            if f.id.startswith("file-") and purpose in (None, f.purpose)
        ]
        if isinstance(paging, Paging):
            paging = paging._replace(ascending=order == "asc")
        return self._listed(files, paging)

    def _list_batches(self, params: dict[str, str]) -> Answer:
        limit = read_limit(params, *_BATCHES_LIMIT)
        paging = limit if isinstance(limit, str) else Paging(limit, params.get("after"))
        return self._listed(self._store.batches("batch_"), paging)

    def _files(
        self,
        method: str,
        path: str,
        groups: tuple[str | Any, ...],
        body: bytes,
        headers: Headers | None,
    ) -> Answer:
        file_id: str | None = groups[0]
        content: str | None = groups[1]
        if file_id is None and method == "POST":
            return self._upload(body, headers)
        if file_id is None or method not in ("GET", "DELETE") or (content and method != "GET"):
            return self._exchange.not_found(method, path, headers)
        stored = self._store.file(file_id)
        if stored is None:
            return self._error(404, "not_found", f"No such File object: {identifier(file_id)}")
        if content:
            return Answer(200, [("content-type", "application/octet-stream")], stored.content)
        if method == "DELETE":
            self._store.delete_file(file_id)
            return json_answer({"id": file_id, "object": "file", "deleted": True})
        return json_answer(_file_object(stored))

    def _upload(self, body: bytes, headers: Headers | None) -> Answer:
        upload = read_upload(body, headers)
        if isinstance(upload, str):
            return self._error(400, "invalid_request", upload)
        purpose = upload.fields.get("purpose", "")
        if not purpose:
            return self._error(400, "invalid_request", "purpose is required")
        try:
            stored = self._store.add_file(upload.filename, purpose, upload.content)
        except ValueError as exc:
            return self._error(400, "invalid_request", str(exc))
        return json_answer(_file_object(stored))

    def _batches(
        self, method: str, path: str, batch_id: str | None, cancel: str | None, body: bytes
    ) -> Answer | BatchWork:
        if batch_id is None and method == "POST":
            return self._create(body)
        if batch_id is None or method != ("POST" if cancel else "GET"):
            return self._exchange.not_found(method, path)
        batch = self._store.batch(batch_id)
        if batch is None or not batch_id.startswith("batch_"):
            return self._error(404, "not_found", f"No such Batch object: {identifier(batch_id)}")
        # A batch completes at once: cancelling one leaves it as it is (docs/batches.md).
        return json_answer(batch)

    def _create(self, body: bytes) -> Answer | BatchWork:
        data = read_object(body)
        if isinstance(data, str):
            return self._error(400, "invalid_request", data)
        file_id, endpoint = data.get("input_file_id"), data.get("endpoint")
        if type(file_id) is not str or type(endpoint) is not str:
            return self._error(400, "invalid_request", "input_file_id and endpoint are required")
        if not self._exchange.serves_post(endpoint):
            return self._error(
                400, "invalid_request", f"endpoint {identifier(endpoint)} is not served here"
            )
        stored = self._store.file(file_id)
        if stored is None:
            return self._error(404, "not_found", f"No such File object: {identifier(file_id)}")
        now = int(time.time())
        batch: dict[str, Any] = {
            "id": self._store.new_id("batch_"),
            "object": "batch",
            "endpoint": endpoint,
            "errors": None,
            "input_file_id": file_id,
            "completion_window": data.get("completion_window", "24h"),
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": now,
            "in_progress_at": None,
            "expires_at": now + _DAY,
            "finalizing_at": None,
            "completed_at": None,
            "failed_at": None,
            "expired_at": None,
            "cancelling_at": None,
            "cancelled_at": None,
            "request_counts": {"total": 0, "completed": 0, "failed": 0},
            "metadata": data.get("metadata"),
        }
        lines, errors = _read_lines(stored.content, endpoint)
        if errors:
            batch.update(status="failed", failed_at=now)
            batch["errors"] = {"object": "list", "data": errors}
            self._store.put_batch(batch)
            failed = json_answer(batch)
            return BatchWork([], lambda _answers: failed, refused=len(errors))
        calls: list[Any] = []
        for line in lines:
            if line["body"].get("stream"):
                calls.append(self._error(400, "invalid_request", "a batch line cannot stream"))
            else:
                body_bytes = msgspec.json.encode(line["body"])
                calls.append(self._exchange.prepare("POST", endpoint, body_bytes))

        def finish(answers: list[Answer]) -> Answer:
            return self._finish(batch, lines, answers)

        return BatchWork(calls, finish, path=endpoint)

    def _finish(
        self, batch: dict[str, Any], lines: list[dict[str, Any]], answers: list[Answer]
    ) -> Answer:
        done, failed = [], []
        for number, (line, answer) in enumerate(zip(lines, answers, strict=True)):
            body = msgspec.json.decode(answer.body) if answer.body else None
            out = {
                "id": f"batch_req_{batch['id'].removeprefix('batch_')}_{number}",
                "custom_id": line["custom_id"],
                "response": {
                    "status_code": answer.status,
                    "request_id": f"req_{batch['id'].removeprefix('batch_')}_{number}",
                    "body": body,
                },
                "error": None,
            }
            if answer.status == 200:
                done.append(out)
            else:
                message = body.get("error", {}).get("message", "") if type(body) is dict else ""
                out["error"] = {"code": answer.status, "message": message}
                failed.append(out)
        for outputs, key in ((done, "output_file_id"), (failed, "error_file_id")):
            if outputs:
                content = b"".join(msgspec.json.encode(o) + b"\n" for o in outputs)
                name = f"{batch['id']}_{key.removesuffix('_file_id')}.jsonl"
                batch[key] = self._store.add_file(name, "batch_output", content).id
        now = int(time.time())
        batch.update(status="completed", in_progress_at=now, finalizing_at=now, completed_at=now)
        batch["request_counts"] = {
            "total": len(lines),
            "completed": len(done),
            "failed": len(failed),
        }
        self._store.put_batch(batch)
        return json_answer(batch)
