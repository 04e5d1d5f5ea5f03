"""``Provider``: the interface every provider has, whatever its kind.

``open_provider`` returns one (a replay handle, a live provider or a recorder), and the
integrations (SDK transports, framework models, the pytest plugin) take any of them:
this is what keeps the application the same code in every mode.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Protocol, Self, runtime_checkable

from ._request import RequestLike

__all__ = ["Provider"]


@runtime_checkable
class Provider(Protocol):
    """What ``open_provider`` returns, whatever the kind."""

    @property
    def closed(self) -> bool: ...

    def complete(self, request: RequestLike) -> dict[str, Any]: ...

    async def acomplete(self, request: RequestLike) -> dict[str, Any]: ...

    def snapshot(self) -> dict[str, Any]: ...

    def release(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Any: ...
