"""``Provider``: the interface every provider has, whatever its kind.

``open_provider`` returns one (a replay handle, a live provider or a recorder), and the
integrations (SDK transports, framework models, the pytest plugin) take any of them:
this is what keeps the application the same code in every mode.

``Attributed`` is a capability some providers add (the run log's ``LoggedProvider``,
docs/attribution.md): told where each call came from, the vendor API and path a
serving read it through, and of the requests refused before any call.

``complete_many(requests)`` answers a batch: one element per request, in order, each the
response or the ``ReplayError`` that ``complete`` would have raised for it. The replay
handle pipelines the batch over its connection; the live and recording providers call
``complete`` for each request in turn (``complete_each``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any, Protocol, Self, runtime_checkable

from ._errors import ReplayError
from ._request import RequestLike

__all__ = ["Attributed", "Provider", "ReleasedOnExit", "complete_each"]


@runtime_checkable
class Provider(Protocol):
    """What ``open_provider`` returns, whatever the kind."""

    @property
    def closed(self) -> bool: ...

    def complete(self, request: RequestLike) -> dict[str, Any]: ...

    async def acomplete(self, request: RequestLike) -> dict[str, Any]: ...

    def complete_many(
        self, requests: Iterable[RequestLike]
    ) -> list[dict[str, Any] | ReplayError]: ...

    def snapshot(self) -> dict[str, Any]: ...

    def release(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Any: ...


@runtime_checkable
class Attributed(Protocol):
    """A provider that records where each call came from: ``via`` is the vendor API and
    the URL path it was read through (``("openai", "/v1/chat/completions")``)."""

    def complete_via(
        self, request: RequestLike, via: tuple[str, str] | None = None
    ) -> dict[str, Any]: ...

    async def acomplete_via(
        self, request: RequestLike, via: tuple[str, str] | None = None
    ) -> dict[str, Any]: ...

    def refused(self, outcome: str, where: str | None = None) -> None:
        """A request answered before any provider call: ``invalid`` (``where``: its path)
        or ``blocked`` (``where``: the host it was meant for)."""


class ReleasedOnExit:
    """The context manager a provider class shares: ``with provider:`` releases it when the
    block ends, however it ends (the class supplies ``release``)."""

    def release(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def complete_each(
    complete: Callable[[RequestLike], dict[str, Any]], requests: Iterable[RequestLike]
) -> list[dict[str, Any] | ReplayError]:
    """``complete_many`` as a loop: each request's response, or the ``ReplayError`` its
    ``complete`` raised (any other exception propagates)."""
    results: list[dict[str, Any] | ReplayError] = []
    for request in requests:
        try:
            results.append(complete(request))
        except ReplayError as exc:
            exc.__traceback__ = None  # the caller gets the error, not our frames
            results.append(exc)
    return results
