"""What every direction of the Responses mapping shares: the API's name, and small
helpers for ids and for items sent back.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

__all__ = ["NAME", "digest", "without_nulls"]

NAME: Final = "openai-responses"


def digest(text: str) -> str:
    """24 hex characters of the sha256 of ``text``: the body of a derived id."""
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def without_nulls(item: dict[str, Any]) -> dict[str, Any]:
    """``item`` without keys set to null: the API reads a null optional field as absent,
    and an output item sent back through the SDK's ``model_dump()`` carries several."""
    if None in item.values():
        return {k: v for k, v in item.items() if v is not None}
    return item
