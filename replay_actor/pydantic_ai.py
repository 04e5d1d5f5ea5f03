"""pydantic-ai integration: ``ReplayModel`` (docs/pydantic-ai.md).

Importing this module imports pydantic-ai (``replay-actor[pydantic-ai]``); nothing in the
rest of replay-actor does.
"""

from __future__ import annotations

from .integrations.pydantic_ai import ReplayModel, ReplayStreamedResponse

__all__ = ["ReplayModel", "ReplayStreamedResponse"]
