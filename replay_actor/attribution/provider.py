"""``LoggedProvider``: any provider, with every call written to a run log.

Runs in: the process that owns the provider. This is the run log's single choke point:
``open_provider`` wraps the provider it opens when the manifest says ``log = "FILE"``
(or ``run --log``/``serve --log`` say so), so every caller of that provider (the front
door, the in-process SDK transports, Inspect, pydantic-ai, the pytest plugin, a direct
``complete``) is logged alike, for replay, record and live providers. The serving layer
adds what only it knows, to any provider with the ``Attributed`` capability
(``_interface.py``): the vendor API and path (``complete_via``), and the requests it
refuses before any call (``refused``).

Cost on the replay path (P1): the request is walked once, here, for its hash and (the
first time the log's sidecar wants it) its canonical bytes; the hash is handed to the
wrapped provider through ``_request.HASHED`` so it is not hashed again; the fixture line and
sequence element come from :class:`FixtureIndex`, built once in this process when the
provider is opened (the actor's reply is not widened for it); the line is one ``write``.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

import msgspec

from .._errors import ReplayError, ReplayMiss, RequestError, SequenceExhausted
from .._interface import ReleasedOnExit
from .._request import HASHED, RequestLike, request_hash_and_canonical
from .log import RunLog
from .row import current_row

if TYPE_CHECKING:
    from .._interface import Provider

__all__ = ["FixtureIndex", "LoggedProvider", "outcome_word"]


class _Head(msgspec.Struct):
    request_hash: str
    # Raw with an empty default: msgspec takes no union with Raw; absent reads as b"".
    responses: msgspec.Raw = msgspec.Raw(b"")


_head: Final = msgspec.json.Decoder(_Head).decode


class FixtureIndex:
    """Each entry's line number and whether it is a sequence, by request hash, read from
    an accepted fixture in one pass (decoding only the entry's two keys)."""

    def __init__(self, fixture: str | os.PathLike[str]) -> None:
        self.fixture = os.fspath(fixture)
        self.lines: dict[str, tuple[int, bool]] = {}
        with open(fixture, "rb") as handle:
            for number, text in enumerate(handle, 1):
                if not text.strip():
                    continue
                try:
                    head = _head(text)
                except msgspec.DecodeError:  # the actor accepted it; changed since
                    continue
                self.lines.setdefault(head.request_hash, (number, bool(head.responses)))


def outcome_word(exc: BaseException) -> str:
    """The log's ``outcome`` for a call that raised ``exc``."""
    if isinstance(exc, ReplayMiss):
        return "miss"
    if isinstance(exc, SequenceExhausted):
        return "exhausted"
    if isinstance(exc, RequestError):
        return "invalid"
    return "failed"


def _scope(request: RequestLike) -> Any:
    if isinstance(request, dict):
        return request.get("scope")
    return getattr(request, "scope", None)


def _kind(request: RequestLike) -> str:
    kind = request.get("kind") if isinstance(request, dict) else getattr(request, "kind", None)
    return kind if isinstance(kind, str) else "chat"


class LoggedProvider(ReleasedOnExit):
    """``LoggedProvider(provider, log, index=None)``: ``provider``'s interface, each call
    logged to ``log`` (a :class:`RunLog`); ``release()`` releases the provider and closes
    the log. Any other attribute (``inspect``, ``actor_pid``…) is the provider's."""

    def __init__(
        self,
        provider: Provider,
        log: RunLog,
        index: FixtureIndex | None = None,
        *,
        elements: bool = True,
    ) -> None:
        self.provider = provider
        self.log = log
        self._index = index
        # A sequence's element is counted here, as this process sees the calls return;
        # a copy in another process shares the actor's cursors but not this count, so
        # it logs no element (``elements=False``) rather than a wrong one.
        self._elements = elements
        self._served: dict[str, int] = {}
        self._lock = threading.Lock()
        _LOGGED.add(self)

    def _forked(self) -> None:
        # A fork child shares the actor's cursors with its parent, not the count.
        self._elements = False
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name in ("provider", "log"):
            raise AttributeError(name)
        return getattr(self.provider, name)

    @property
    def closed(self) -> bool:
        return bool(self.provider.closed)

    # -- the calls ----------------------------------------------------------------------

    def _hash(self, request: RequestLike) -> str:
        # One walk of the request gives the hash and, the first time the sidecar wants
        # this request, the canonical bytes it keeps.
        digest, canonical = request_hash_and_canonical(request, self.log.wants_request)
        if canonical is not None:
            self.log.keep_request(digest, canonical)
        return digest

    def _where(self, digest: str) -> tuple[int | None, int | None]:
        if self._index is None:
            return None, None
        found = self._index.lines.get(digest)
        if found is None:
            return None, None
        line, sequence = found
        if not sequence or not self._elements:
            return line, None
        with self._lock:
            element = self._served.get(digest, 0)
            self._served[digest] = element + 1
        return line, element

    def _write(
        self, request: RequestLike, outcome: str, digest: str | None, via: tuple[str, str] | None
    ) -> None:
        line, element = (
            self._where(digest)
            if digest is not None and outcome == "served" and self._index is not None
            else (None, None)
        )
        vendor, path = via if via is not None else (None, None)
        if type(request) is dict:  # the common case, without _kind/_scope's generality
            kind = request.get("kind", "chat")
            fields = (
                kind if type(kind) is str else "chat",
                vendor,
                path,
                request.get("scope"),
                digest,
                line,
                element,
                current_row(),
            )
        else:
            fields = (
                _kind(request),
                vendor,
                path,
                _scope(request),
                digest,
                line,
                element,
                current_row(),
            )
        self.log.record(outcome, fields)

    @contextmanager
    def _logging(self, request: RequestLike, via: tuple[str, str] | None) -> Iterator[None]:
        """One call's log line around the ``with`` body that asks the provider, for the
        sync and async forms alike: ``invalid`` when it does not hash, the error's word when
        the body raises, ``served`` otherwise; the hash handed on in ``HASHED`` meanwhile."""
        try:
            digest = self._hash(request)
        except RequestError as exc:
            self._write(request, "invalid", None, via)
            raise exc from None
        token = HASHED.set((request, digest))
        try:
            yield
        except Exception as exc:
            self._write(request, outcome_word(exc), digest, via)
            raise
        finally:
            HASHED.reset(token)
        self._write(request, "served", digest, via)

    def complete_via(
        self, request: RequestLike, via: tuple[str, str] | None = None
    ) -> dict[str, Any]:
        """``complete``, logged with the vendor API and path it came through."""
        with self._logging(request, via):
            return self.provider.complete(request)

    async def acomplete_via(
        self, request: RequestLike, via: tuple[str, str] | None = None
    ) -> dict[str, Any]:
        """``acomplete``, logged with the vendor API and path it came through."""
        with self._logging(request, via):
            return await self.provider.acomplete(request)

    # The plain calls are the ``_via`` ones (one Python call less per call, P1L).
    complete = complete_via
    acomplete = acomplete_via

    def complete_many(self, requests: Iterable[RequestLike]) -> list[dict[str, Any] | ReplayError]:
        batch = list(requests)
        results = self.provider.complete_many(batch)
        for request, result in zip(batch, results, strict=True):
            try:
                digest: str | None = self._hash(request)
            except RequestError:
                digest = None
            if isinstance(result, ReplayError):
                self._write(request, outcome_word(result), digest, None)
            else:
                self._write(request, "served", digest, None)
        return results

    def refused(self, outcome: str, where: str | None = None) -> None:
        """Log a request answered before any call (``invalid``: ``where`` its path;
        ``blocked``: the host it was meant for): the ``Attributed`` capability."""
        self.log.refused(outcome, where)

    # -- the rest of the interface ------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        result: dict[str, Any] = self.provider.snapshot()
        return result

    def release(self) -> None:
        try:
            self.provider.release()
        finally:
            self.log.close()

    def __reduce__(self) -> Any:
        # A copy in another process logs to the same file (O_APPEND keeps lines whole).
        fixture = None if self._index is None else self._index.fixture
        log = self.log
        return (_reopen, (self.provider, log.path, log.private, log.provider, fixture))

    def __repr__(self) -> str:
        return f"<LoggedProvider {self.provider!r} -> {self.log!r}>"


#: Every logged provider of this process, for the fork child's ``_forked``.
_LOGGED: Final[weakref.WeakSet[LoggedProvider]] = weakref.WeakSet()


def _after_fork() -> None:
    for provider in list(_LOGGED):
        provider._forked()


os.register_at_fork(after_in_child=_after_fork)


def _reopen(
    provider: Provider, path: str, private: bool, kind: str | None, fixture: str | None
) -> LoggedProvider:
    index = None if fixture is None else FixtureIndex(fixture)
    log = RunLog(path, private=private, provider=kind)
    return LoggedProvider(provider, log, index, elements=False)
