"""``ReplayHandle``: the calls every replay backend's handle shares, over the core.

Runs in: the caller.

A backend's handle (the local ``ReplayProvider``, the Ray ``RayReplayProvider``) says
only how one request travels: ``_ask`` (one request, blocking), ``_send`` and
``_receive`` (one request, awaited), ``_batch`` (many). Everything else is here, once:
the order of the checks, decoding through ``protocol.decode_reply``, the lifecycle
errors of ``state.HandleState``, explaining a miss, and ``complete_many`` never raising.

Private mode: the request hash lives only in the frames of ``_ask`` and ``_send``, which
return (never raise) what went wrong; the public methods raise, in frames whose locals
hold no hash (``pytest --showlocals``, ``capture_locals=True``, Sentry print them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, Self

from ..._errors import ReplayError, ReplayMiss
from ..._request import RequestLike, request_hash
from ..core import protocol
from ..core.state import HandleState, fresh

__all__ = ["MissExplainer", "ReplayHandle", "Result"]

#: ``explain(request, request_hash) -> ReplayMiss``: the miss for ``request``, explained
#: (``nearest``, or in private mode a line in the inspection record only). Called in a
#: frame that is gone before the caller raises; it must pickle (copies carry it).
MissExplainer = Callable[[RequestLike, str], ReplayMiss]
Result = dict[str, Any] | ReplayError
_decode_reply: Final = protocol.decode_reply


class ReplayHandle:
    """The shared calls of a handle on one acquisition's cursor actor."""

    _state: HandleState
    _private: bool
    _explain: MissExplainer | None

    @property
    def closed(self) -> bool:
        """True once ``release()`` was called on this handle (or the acquisition ended)."""
        return self._state.closed or self._state.ended

    @property
    def private(self) -> bool:
        """True when hashes are kept out of public diagnostics."""
        return self._private

    def complete(self, request: RequestLike) -> dict[str, Any]:
        """Answer ``request`` from the fixture: a fresh response dict.

        Raises ``ReplayMiss``, ``SequenceExhausted``, ``RequestError``,
        ``ProviderClosed`` or ``ActorLost``; never falls back to anything.
        """
        state = self._state
        if state.closed or state.ended:
            state.check()  # a closed handle says so before judging the request
        reply, shown = self._ask(request)
        return self._answer(request, reply, shown)

    async def acomplete(self, request: RequestLike) -> dict[str, Any]:
        """``complete`` for asyncio, on the event loop itself (no worker thread)."""
        state = self._state
        if state.closed or state.ended:
            state.check()
        pending, shown = self._send(request)
        if isinstance(pending, ReplayError):
            raise pending
        return self._answer(request, await self._receive(pending), shown)

    def _answer(
        self, request: RequestLike, reply: bytes | ReplayError, shown: str | None
    ) -> dict[str, Any]:
        """The response ``reply`` carries, or raise what it means (explained, for a miss)."""
        if isinstance(reply, bytes):
            result = _decode_reply(reply, shown, self._state)
            if isinstance(result, dict):
                return result
            reply = self._explained(request, result)
        raise reply

    def complete_many(self, requests: Iterable[RequestLike]) -> list[Result]:
        """Answer a batch: one element per request, in order, each the response dict or
        the ``ReplayError`` that ``complete`` would have raised for it (``ReplayMiss``,
        ``SequenceExhausted``, ``RequestError`` for an invalid request, which is never
        sent, ``ProviderClosed``, ``ActorLost``). Never raises a ``ReplayError``.
        """
        batch = list(requests)
        state = self._state
        if not batch:
            return []
        if state.closed or state.ended:
            error = state.error()
            assert error is not None
            return [fresh(error) for _ in batch]
        results = self._batch(batch)
        if self._explain is not None:
            for i, result in enumerate(results):
                if type(result) is ReplayMiss:
                    results[i] = self._explained(batch[i], result)
        return results

    def _explained(self, request: RequestLike, error: ReplayError) -> ReplayError:
        """``error``, or for a miss the explained ``ReplayMiss`` when this handle has an
        explainer (only a miss pays for the lookup, on the caller's side).

        In private mode the hash is computed again here, in a frame that is gone before
        the caller raises: the explanation goes to the inspection record only.
        """
        explain = self._explain
        if explain is None or type(error) is not ReplayMiss:
            return error
        shown = error.request_hash
        return explain(request, shown if shown is not None else request_hash(request))

    # -- what a backend supplies ------------------------------------------------------

    def _ask(self, request: RequestLike) -> tuple[bytes | ReplayError, str | None]:
        """Send one ``COMPLETE`` and wait: its reply or the error, and the hash the
        error may show (None in private mode)."""
        raise NotImplementedError

    def _send(self, request: RequestLike) -> tuple[Any, str | None]:
        """Send one ``COMPLETE`` without waiting: what ``_receive`` awaits (or the
        error), and the hash the error may show."""
        raise NotImplementedError

    async def _receive(self, pending: Any) -> bytes | ReplayError:
        """The reply ``_send``'s request gets, or the error."""
        raise NotImplementedError

    def _batch(self, batch: Sequence[RequestLike]) -> list[Result]:
        """Every element's answer (decoded) or error, in order; never raises."""
        raise NotImplementedError

    def release(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()
