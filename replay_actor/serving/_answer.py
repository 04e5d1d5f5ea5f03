"""One HTTP answer, and the vendors' error envelopes it is written in (docs/sdk.md,
"Failures").

Runs in: whichever process serves (a transport's caller, or the front door). The lowest
part of the serving room: ``serving.py`` (an exchange) and ``batches/`` (the batch
endpoints) both answer with it, and it imports neither.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, NamedTuple

import msgspec

from ..vendors import Vendor, make_vendor

__all__ = ["Answer", "Headers", "error_answer"]

#: The request's headers as its carrier has them: a mapping with case-insensitive lookup
#: (httpx's ``Headers``), or ASGI's raw ``(name, value)`` pairs (names in lower case).
Headers = Mapping[str, str] | Sequence[tuple[bytes, bytes]]

_JSON: Final = ("content-type", "application/json")
_NO_RETRY: Final = ("x-should-retry", "false")

#: Vendors made only for their error envelope (a 404 to a path that looks like a vendor
#: the exchange does not serve, a batch's refusals): error_body is stateless, so one each
#: is shared.
_ENVELOPES: dict[str, Vendor] = {}


class Answer(NamedTuple):
    """What goes back for one HTTP request, a failure included."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes


def _error(
    vendor: Vendor, status: int, kind: str, message: str, nearest: dict[str, Any] | None = None
) -> Answer:
    body = msgspec.json.encode(vendor.error_body(kind, message, nearest))
    return Answer(status, [_JSON, _NO_RETRY], body)


def _envelope_vendor(name: str) -> Vendor:
    """A vendor made only for its error envelope (``error_body`` keeps no state)."""
    if name not in _ENVELOPES:
        _ENVELOPES[name] = make_vendor(name)
    return _ENVELOPES[name]


def error_answer(name: str, status: int, kind: str, message: str) -> Answer:
    """An error answer in the envelope of the registered vendor ``name``, never retried
    (``x-should-retry: false``)."""
    return _error(_envelope_vendor(name), status, kind, message)
