"""One page of a list endpoint (``GET /v1/files``, ``/v1/batches``,
``/v1/messages/batches``): the query read, the cursor found, the page cut
(docs/batches.md, "Listing").

Runs in: the serving process, called by the handlers of this package.

Every id this package makes ends in the store's serial number (``Store.new_id``), so a
cursor is placed by its serial, not looked up: a cursor whose object was deleted or
aged out of the bounded store still pages on from where it was, as the vendors' do.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final, NamedTuple
from urllib.parse import parse_qsl

__all__ = ["Page", "Paging", "ends", "page", "read_limit", "read_query"]

_SERIAL: Final = re.compile(r"([0-9a-f]{24})$")
_LIMIT: Final = re.compile(r"[0-9]{1,9}")


class Paging(NamedTuple):
    """What a list request asks: at most ``limit`` items after (or before) a cursor,
    newest first unless ``ascending``."""

    limit: int
    after: str | None = None
    before: str | None = None
    ascending: bool = False


class Page(NamedTuple):
    """The items of one page, in list order, and whether more lie beyond it (past
    ``after``'s side, or past ``before``'s when paging backwards)."""

    items: list[dict[str, Any]]
    has_more: bool


def read_query(query: str) -> dict[str, str]:
    """The query's parameters (the last value of a repeated one)."""
    return dict(parse_qsl(query, keep_blank_values=True))


def read_limit(params: dict[str, str], default: int, most: int) -> int | str:
    """``limit`` from 1 up (``default`` when absent; above ``most``, ``most``), or why
    it is not one."""
    raw = params.get("limit")
    if raw is None:
        return default
    # ASCII digits only, and few: str.isdigit() takes "²", which int() refuses.
    if _LIMIT.fullmatch(raw) is None or int(raw) < 1:
        return f"limit must be a whole number from 1 to {most}"
    return min(int(raw), most)


def _serial(item_id: str) -> int | None:
    found = _SERIAL.search(item_id)
    return None if found is None else int(found.group(1), 16)


def page(items: Sequence[dict[str, Any]], paging: Paging) -> Page | str:
    """The page of ``items`` (each with an ``id``, newest first) that ``paging`` asks,
    or why a cursor cannot be placed."""
    keyed: list[tuple[int, dict[str, Any]]] = []
    for item in items:
        serial = _serial(str(item["id"]))
        if serial is not None:
            keyed.append((serial if paging.ascending else -serial, item))
    keyed.sort(key=lambda pair: pair[0])
    cursor = paging.after if paging.after is not None else paging.before
    if cursor is None:
        rest = [item for _, item in keyed]
        return Page(rest[: paging.limit], len(rest) > paging.limit)
    serial = _serial(cursor)
    if serial is None:
        name = "after" if paging.after is not None else "before"
        return f"{name} must be the id of an object this server listed"
    at = serial if paging.ascending else -serial
    if paging.after is not None:
        rest = [item for key, item in keyed if key > at]
        return Page(rest[: paging.limit], len(rest) > paging.limit)
    rest = [item for key, item in keyed if key < at]
    return Page(rest[-paging.limit :], len(rest) > paging.limit)


def ends(items: list[dict[str, Any]]) -> dict[str, Any]:
    """``first_id`` and ``last_id`` of a page (``None`` when it is empty)."""
    if not items:
        return {"first_id": None, "last_id": None}
    return {"first_id": items[0]["id"], "last_id": items[-1]["id"]}
