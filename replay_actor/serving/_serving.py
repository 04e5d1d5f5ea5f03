"""The serving classes the transports and the front door hold: one HTTP request in, the
provider asked exactly once, one answer out, sync (:class:`Serving`) or async
(:class:`AsyncServing`, awaiting ``acomplete``).

Runs in: whichever process serves (a transport's caller, or the front door's event
loop). Each holds an :class:`~._exchange.Exchange` (routing and answers), the provider,
and what is told of each call: the counts (:class:`~._outcomes.Outcomes`, the front
door's summary), a failure hook (the front door's miss reporter) and, when the provider
has the ``Attributed`` capability (a run log, docs/attribution.md), where each call came
from and which requests were refused before any call. A failure is an answer, never an
exception: the SDKs would retry an exception as a connection error.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import Token
from typing import TYPE_CHECKING, Any, Final, TypeVar

from .._interface import Attributed
from .._kinds import EMBEDDING
from .._response import RAW_VECTORS, Unexpressible
from ..attribution.provider import outcome_word
from ._answer import Answer, Headers, _envelope_vendor
from ._exchange import Api, Call, Exchange, MissHint, _failure
from ._outcomes import Kind, Outcomes
from .batches import BatchWork

if TYPE_CHECKING:
    from .._interface import Provider

__all__ = ["AsyncServing", "FailureHook", "Serving", "failure_answer", "outcome_of"]

_Rendered = TypeVar("_Rendered")

#: ``on_failure(request, exc)``: the neutral request a provider call failed for, and why.
FailureHook = Callable[[dict[str, Any], BaseException], None]

#: The run log's outcome word -> the summary's kind: one classification of a failed call
#: (``attribution.provider.outcome_word``), two vocabularies.
_SUMMARY_KIND: Final[dict[str, Kind]] = {
    "miss": "missed",
    "exhausted": "exhausted",
    "invalid": "invalid",
    "failed": "failed",
}


def outcome_of(exc: BaseException) -> Kind:
    """The summary's kind of a call that failed with ``exc`` (``_outcomes``)."""
    return _SUMMARY_KIND[outcome_word(exc)]


def failure_answer(exc: BaseException, hint: MissHint | None = None) -> Answer:
    """The answer to a failed call that no vendor shape read (a tool's HTTP exchange,
    docs/tools.md): the status and error type a vendor's call gets for the same failure
    (the package's table), in OpenAI's envelope, ``{"error": {"message", "type"}}``; a
    miss's message ends with ``hint``'s ``add`` command, as a vendor call's does."""
    return _failure(_envelope_vendor("openai"), exc, hint)


def _raw_vectors(call: Call) -> Token[bool] | None:
    """For an embedding request, let the provider hand its vectors over raw (float32,
    ``_response.RAW_VECTORS``): the vendor shapes build their answers from them without
    a JSON round trip. The token to reset, or None."""
    if call.request.get("kind") != EMBEDDING:
        return None
    return RAW_VECTORS.set(True)


class _Serving:
    """What every transport class holds, whatever its HTTP library: the vendor API's
    routing (``Exchange``), the provider, and whether closing releases it."""

    def __init__(
        self,
        provider: Provider,
        api: Api | None = "openai",
        *,
        release_on_close: bool = True,
        outcomes: Outcomes | None = None,
        on_failure: FailureHook | None = None,
    ) -> None:
        self._exchange = Exchange(api)
        #: What a miss's error message says to do (the fixture's ``add`` command): the
        #: failure hook's own when it has one (the front door's miss reporter), so the
        #: error and the reporter's lines agree; an SDK client sets it after construction.
        hint = getattr(on_failure, "hint", None)
        self.hint: MissHint | None = hint if isinstance(hint, MissHint) else None
        #: Told of each call the provider failed (the front door's miss reporter); it
        #: must not raise.
        self._on_failure = on_failure
        self._provider = provider
        # A provider that records where each call came from (the run log's,
        # docs/attribution.md) is told so, and of the requests refused before any call.
        self._attributed = provider if isinstance(provider, Attributed) else None
        self._release_on_close = release_on_close
        #: Counts each answer's kind when given (the front door's summary).
        self.outcomes = outcomes

    def _count(self, kind: Kind) -> None:
        if self.outcomes is not None:
            self.outcomes.add(kind)

    def _bookkept(self, answer: Answer, path: str) -> Answer:
        """A batch endpoint's own answer (an upload, a retrieval): a refusal counts as an
        invalid call, like a request refused before the provider."""
        if answer.status >= 400:
            self.refused("invalid", path)
        return answer

    def _batch_refused(self, work: BatchWork, path: str) -> None:
        for _ in range(work.refused):
            self.refused("invalid", path)

    def _failed(self, call: Call, exc: Exception) -> Answer:
        self._count(outcome_of(exc))
        if self._on_failure is not None:
            self._on_failure(call.request, exc)
        return call.fail(exc, self.hint)

    def refused(self, kind: Kind, where: str | None = None) -> None:
        """Count (and log) a request answered before any provider call: ``invalid``
        (``where``: its path) or ``blocked`` (``where``: the host it was meant for)."""
        self._count(kind)
        if self._attributed is not None:
            self._attributed.refused(kind, where)

    def _counted(self, answer: Answer) -> Answer:
        # The provider answered; the vendor's shape may still fail to express it.
        self._count("served" if answer.status == 200 else "failed")
        return answer

    @property
    def provider(self) -> Provider:
        return self._provider

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._exchange.api} {self._provider!r}>"


class Serving(_Serving):
    """A sync transport's work: one request in, one answer out, the provider asked once
    (``complete``); a failure is an answer, never an exception (the SDKs would retry an
    exception as a connection error)."""

    def serve(
        self,
        method: str,
        path: str,
        body: bytes,
        headers: Headers | None = None,
        query: str = "",
    ) -> Answer:
        """``headers`` may carry ``x-replay-scope``; ``query`` is the URL's (only the
        batch list endpoints read it: their pages)."""
        work = self._exchange.batch(method, path, body, headers, query)
        if work is not None:
            if isinstance(work, Answer):
                return self._bookkept(work, path)
            self._batch_refused(work, path)
            lines = work.path or path
            return work.finish([self._ask(line, lines) for line in work.lines])
        return self._ask(self._exchange.prepare(method, path, body, headers), path)

    def _ask(self, prepared: Call | Answer, path: str) -> Answer:
        if isinstance(prepared, Answer):
            self.refused("invalid", path)
            return prepared
        raw = _raw_vectors(prepared)
        try:
            if self._attributed is not None:
                via = (prepared.vendor.name, path)
                response = self._attributed.complete_via(prepared.request, via)
            else:
                response = self._provider.complete(prepared.request)
        except Exception as exc:
            return self._failed(prepared, exc)
        finally:
            if raw is not None:
                RAW_VECTORS.reset(raw)
        return self._counted(prepared.answer(response))

    def close(self) -> None:
        if self._release_on_close:
            self._provider.release()


class AsyncServing(_Serving):
    """The async form of :class:`Serving`: awaits ``provider.acomplete`` (no thread)."""

    async def serve(
        self,
        method: str,
        path: str,
        body: bytes,
        headers: Headers | None = None,
        query: str = "",
    ) -> Answer:
        """``headers`` and ``query`` as :meth:`Serving.serve`."""
        work = self._exchange.batch(method, path, body, headers, query)
        if work is not None:
            if isinstance(work, Answer):
                return self._bookkept(work, path)
            self._batch_refused(work, path)
            # Line by line, in order: a sequence's elements go to the lines as they
            # would to the same calls sent one after another.
            lines = work.path or path
            return work.finish([await self._ask(line, lines) for line in work.lines])
        return await self._ask(self._exchange.prepare(method, path, body, headers), path)

    async def _ask(self, prepared: Call | Answer, path: str) -> Answer:
        if isinstance(prepared, Answer):
            self.refused("invalid", path)
            return prepared
        raw = _raw_vectors(prepared)
        try:
            if self._attributed is not None:
                via = (prepared.vendor.name, path)
                response = await self._attributed.acomplete_via(prepared.request, via)
            else:
                response = await self._provider.acomplete(prepared.request)
        except Exception as exc:
            return self._failed(prepared, exc)
        finally:
            if raw is not None:
                RAW_VECTORS.reset(raw)
        return self._counted(prepared.answer(response))

    async def ask(
        self,
        request: dict[str, Any],
        via: tuple[str, str],
        render: Callable[[dict[str, Any]], _Rendered],
    ) -> _Rendered | Exception:
        """Ask the provider once for a request read elsewhere (a tool's HTTP exchange,
        docs/tools.md), ``via`` where it came from: ``render(response)``, or the exception
        the call (or ``render``, which may raise ``Unexpressible``) failed with. Counted,
        logged and reported as every call is."""
        try:
            if self._attributed is not None:
                response = await self._attributed.acomplete_via(request, via)
            else:
                response = await self._provider.acomplete(request)
        except Exception as exc:
            self._count(outcome_of(exc))
            if self._on_failure is not None:
                self._on_failure(request, exc)
            return exc
        try:
            rendered = render(response)
        except Unexpressible as exc:
            self._count("failed")
            return exc
        self._count("served")
        return rendered

    async def aclose(self) -> None:
        if self._release_on_close:
            self._provider.release()
