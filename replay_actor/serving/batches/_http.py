"""What the batch handlers share: JSON answers, request headers, a strict JSON body, a
multipart upload (docs/batches.md).

Runs in: the serving process, called by the handlers of this package.
"""

from __future__ import annotations

import email.parser
import email.policy
from collections.abc import Mapping
from typing import Any, Final, NamedTuple

import msgspec

from ..._strict_json import MAX_BODY_DEPTH, NotStrictJSON, loads_strict
from .._answer import Answer, Headers

__all__ = ["Upload", "header", "json_answer", "read_object", "read_upload"]

_JSON: Final = ("content-type", "application/json")


def json_answer(value: Any, status: int = 200) -> Answer:
    return Answer(status, [_JSON], msgspec.json.encode(value))


def header(headers: Headers | None, name: str) -> str | None:
    """The first value of header ``name`` (lower case), from either carrier."""
    if headers is None:
        return None
    if isinstance(headers, Mapping):
        value = headers.get(name)
        return None if value is None else str(value)
    key = name.encode()
    for raw, raw_value in headers:
        if raw == key:
            return raw_value.decode("latin-1")
    return None


def read_object(body: bytes) -> dict[str, Any] | str:
    """The body as a JSON object, or the problem (a string) when it is not one."""
    try:
        data = loads_strict(body.decode("utf-8"), max_depth=MAX_BODY_DEPTH)
    except (UnicodeDecodeError, NotStrictJSON):
        return "the request body is not JSON"
    if type(data) is not dict:
        return "the request body must be a JSON object"
    return data


class Upload(NamedTuple):
    fields: dict[str, str]
    filename: str
    content: bytes


def read_upload(body: bytes, headers: Headers | None) -> Upload | str:
    """A ``multipart/form-data`` upload with one ``file`` part (the standard library's
    MIME parser reads it), or the problem."""
    kind = header(headers, "content-type") or ""
    if not kind.lower().startswith("multipart/form-data"):
        return "the upload must be multipart/form-data"
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + kind.encode("latin-1") + b"\r\n\r\n" + body
    )
    if not message.is_multipart():
        return "the upload is not a readable multipart/form-data body"
    fields: dict[str, str] = {}
    found: tuple[str, bytes] | None = None
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if type(name) is not str or not isinstance(payload, bytes):
            continue
        if name == "file":
            found = (part.get_filename() or "upload.jsonl", payload)
        else:
            fields[name] = payload.decode("utf-8", "replace")
    if found is None:
        return "the upload has no file part"
    return Upload(fields, *found)
