"""``Relay``: one MCP client's session, each of its messages answered, passed on or dropped.

Runs in: the ``replay-actor mcp`` process, on its event loop.

What each message the client sends becomes (docs/mcp.md, "What the relay does")::

    request ping                -> answered here: {} (never recorded, never counted)
    any other request           -> the provider, as the neutral mcp request: its answer
                                   with the client's id; a miss or an exhausted sequence
                                   a JSON-RPC error whose message is the miss and its fix
    notification                -> replay: dropped (nothing is listening); record, live:
                                   to the server (notifications/cancelled also stops the
                                   relay's own wait for that request)
    answer to a server request  -> replay: dropped; record, live: to the server
    a line that is no message   -> a JSON-RPC error with a null id, counted invalid

Each request is answered in a task of its own, started in the order the requests came,
so a slow tool call never holds up a quick one, and identical requests take a sequence's
elements in that order. Every answer is counted in ``outcomes`` as ``run`` counts its
calls, and every miss is said on stderr by the front door's miss reporter (once per
distinct request, with its ``add`` command, the request saved to the sidecar).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

import anyio
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
)

from .._errors import ReplayError, ReplayMiss, RequestError, SequenceExhausted
from .._interface import Attributed
from ..serving import Outcomes
from .request import (
    EXHAUSTED_CODE,
    LOCAL_METHODS,
    MISS_CODE,
    NOT_AN_ANSWER,
    RELAYED,
    answer_of,
    error_message,
    neutral_request,
)
from .stdio import BadLine, ClientOut

if TYPE_CHECKING:
    from .._interface import Provider
    from ..frontdoor.misses import MissReporter
    from .link import ServerLink

__all__ = ["Relay"]

_CANCELLED = "notifications/cancelled"


class Relay:
    """``Relay(provider, out, link=None, server=None, reporter=None, private=False)``:
    serves one client (``serve``), answering from ``provider`` (a replay, record or live
    provider of the ``mcp`` kind) and writing to ``out``; ``link`` is the server behind a
    record or live provider (None: replay, no server)."""

    def __init__(
        self,
        provider: Provider,
        out: ClientOut,
        *,
        link: ServerLink | None = None,
        server: str | None = None,
        reporter: MissReporter | None = None,
    ) -> None:
        self._provider = provider
        self._out = out
        self._link = link
        self._server = server
        self._reporter = reporter
        self._private = reporter is not None and reporter.private
        self._inflight: dict[RequestId, anyio.CancelScope] = {}
        self.outcomes = Outcomes()

    async def serve(self, messages: AsyncGenerator[JSONRPCMessage | BadLine]) -> None:
        """Answer ``messages`` until the client closes its end; then wait for the answers
        still owed (a signal to the process ends them sooner). A client that closed its
        input (our stdout) reads no answer: then nothing more is waited for."""
        async with anyio.create_task_group() as group, contextlib.aclosing(messages):
            async for item in messages:
                if self._out.gone:
                    break
                group.start_soon(self._take, item)
            if self._out.gone:
                group.cancel_scope.cancel()

    async def _take(self, item: JSONRPCMessage | BadLine) -> None:
        if isinstance(item, BadLine):
            await self._bad_line(item)
        elif isinstance(item, JSONRPCRequest):
            await self._answer(item)
        elif isinstance(item, JSONRPCNotification):
            await self._notified(item)
        else:
            await self._answered(item)

    # -- what the client sends -------------------------------------------------------------

    async def _bad_line(self, item: BadLine) -> None:
        self.outcomes.add("invalid")
        self._out.send(error_message(None, item.code, item.reason))

    async def _answer(self, request: JSONRPCRequest) -> None:
        if request.method in LOCAL_METHODS:
            self._out.send(JSONRPCResponse(jsonrpc="2.0", id=request.id, result={}))
            return
        if request.method == "initialize" and self._link is not None:
            self._link.remember_initialize(request.params)
        with anyio.CancelScope() as scope:
            self._inflight[request.id] = scope
            try:
                answer = await self._ask(request)
            finally:
                if self._inflight.get(request.id) is scope:
                    del self._inflight[request.id]
        if not scope.cancelled_caught:  # a cancelled request is never answered
            self._out.send(answer)

    async def _notified(self, note: JSONRPCNotification) -> None:
        if note.method == _CANCELLED and note.params is not None:
            cancelled = note.params.get("requestId")
            scope = self._inflight.get(cancelled) if isinstance(cancelled, int | str) else None
            if scope is not None:
                scope.cancel()
        if self._link is not None:
            with contextlib.suppress(ReplayError):  # the server is gone: said when it went
                await self._link.notify(note)

    async def _answered(self, message: JSONRPCResponse | JSONRPCError) -> None:
        if self._link is not None:
            with contextlib.suppress(ReplayError):
                await self._link.respond(message)

    # -- asking the provider ---------------------------------------------------------------

    async def _ask(self, request: JSONRPCRequest) -> JSONRPCResponse | JSONRPCError:
        neutral = neutral_request(request.method, request.params, self._server)
        token = RELAYED.set(request)
        try:
            stored = await self._complete(neutral, request.method)
        except (ReplayMiss, SequenceExhausted) as exc:
            return self._missed(neutral, exc, request.id)
        except RequestError as exc:
            self.outcomes.add("invalid")
            why = "invalid request" if self._private else str(exc)
            return error_message(request.id, INVALID_PARAMS, f"replay-actor: {why}")
        except ReplayError as exc:  # the server or the actor lost, the provider closed
            self.outcomes.add("failed")
            return error_message(request.id, INTERNAL_ERROR, f"replay-actor: {exc}")
        finally:
            RELAYED.reset(token)
        answer = answer_of(stored, request.id)
        if answer is None:
            self.outcomes.add("failed")
            return error_message(request.id, INTERNAL_ERROR, f"replay-actor: {NOT_AN_ANSWER}")
        self.outcomes.add("served")
        return answer

    async def _complete(self, neutral: dict[str, Any], method: str) -> dict[str, Any]:
        provider = self._provider
        if isinstance(provider, Attributed):  # the run log: kind mcp, the method as path
            return await provider.acomplete_via(neutral, ("mcp", method))
        return await provider.acomplete(neutral)

    def _missed(
        self,
        neutral: dict[str, Any],
        exc: ReplayMiss | SequenceExhausted,
        request_id: RequestId,
    ) -> JSONRPCError:
        missed = isinstance(exc, ReplayMiss)
        self.outcomes.add("missed" if missed else "exhausted")
        data: dict[str, Any] = {"type": "replay_miss" if missed else "replay_exhausted"}
        if self._reporter is None:
            message = str(exc)
        else:
            self._reporter(neutral, exc)
            message = self._reporter.advice(neutral, exc)
        if exc.request_hash is not None:  # None in private mode
            data["request_hash"] = exc.request_hash
        return error_message(request_id, MISS_CODE if missed else EXHAUSTED_CODE, message, data)
