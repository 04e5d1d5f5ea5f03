"""The MCP server behind a recording or live relay: its process and its stdio connection.

Runs in: the ``replay-actor mcp`` process, on its event loop (``call_blocking`` from any
other thread).

The server is started with the MCP SDK's own stdio client transport
(``mcp.client.stdio.stdio_client``): the process in a session of its own, its stderr
passed through, and at the end its stdin closed, a grace period, then SIGTERM and SIGKILL
to its whole process group, the shutdown the MCP specification describes. It gets this
process's whole environment (the SDK's default is a short list of variables).

What goes to the server and what comes back::

    relay -> call(method, params, id)  -> the request, with the client's own id
    server's answer with that id       -> the waiting call: {"result"} | {"error"}
    server's requests, notifications   -> straight to the client (sampling, elicitation,
                                          roots, progress, log messages: never recorded)
    client's notifications, answers    -> notify() / respond(): straight to the server

The client's own id is kept, so its progress tokens (often that id) and its
cancellations reach the server unchanged; the link's own calls use ids of their own
(``replay-actor-N``).

The handshake: a recording answers ``initialize`` from the fixture when the fixture
already holds it, and the server, never asked, would refuse what follows. So the link
remembers the client's ``initialize`` parameters (``remember_initialize``), and before
the first other request that reaches the server it sends that ``initialize`` itself and
then ``notifications/initialized``; the client's own ``notifications/initialized`` goes
through only when its ``initialize`` did. Stateless requests (``server/discover`` and the
per-request envelope of protocol 2026-07-28) need no handshake and get none.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TextIO

import anyio
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.message import SessionMessage
from mcp_types import (
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
)

from .._errors import LiveProviderError

if TYPE_CHECKING:  # the stream types the SDK's transports are typed with
    from mcp.client._transport import ReadStream, WriteStream
from .request import stored_answer
from .stdio import say

__all__ = ["ServerLink"]

_INITIALIZED: Final = "notifications/initialized"


def _stderr() -> TextIO:
    """Where the server's stderr goes: this process's own (pytest may have replaced
    ``sys.stderr`` with an object that has no descriptor)."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return sys.__stderr__ if sys.__stderr__ is not None else sys.stderr
    return sys.stderr


def _request(
    method: str, params: Mapping[str, Any] | None, request_id: RequestId
) -> JSONRPCRequest:
    if params is None:  # absent, not null
        return JSONRPCRequest(jsonrpc="2.0", id=request_id, method=method)
    return JSONRPCRequest(jsonrpc="2.0", id=request_id, method=method, params=dict(params))


class ServerLink:
    """The server started from ``command``; ``forward(message)`` hands the server's own
    requests and notifications to the client. ``connected()`` runs it."""

    def __init__(self, command: Sequence[str], forward: Callable[[JSONRPCMessage], None]) -> None:
        if not command:
            raise ValueError("an MCP server command is required")
        self.command = list(command)
        self._forward = forward
        self._write: WriteStream[SessionMessage] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: dict[RequestId, asyncio.Future[JSONRPCResponse | JSONRPCError]] = {}
        self._ids = itertools.count(1)
        self._lock = anyio.Lock()
        self._initialize: dict[str, Any] | None = None
        #: Set when the client's own initialize, on its way to the server, is answered.
        self._initializing: anyio.Event | None = None
        self._initialized = False
        self._initialized_sent = False
        #: Why the server can no longer answer (None while it can).
        self.lost: str | None = None
        self._on_lost: Callable[[], None] = lambda: None

    # -- running ---------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def connected(self, on_lost: Callable[[], None]) -> AsyncIterator[None]:
        """Start the server and read its answers until the block ends; then stop it (the
        SDK's shutdown). ``on_lost`` is called if the server stops first. Raises
        ``OSError`` if the command cannot be started."""
        self._on_lost = on_lost
        params = StdioServerParameters(
            command=self.command[0], args=self.command[1:], env=dict(os.environ)
        )
        async with stdio_client(params, errlog=_stderr()) as (read, write):
            self._write = write
            self._loop = asyncio.get_running_loop()
            async with anyio.create_task_group() as group:
                group.start_soon(self._read, read)
                try:
                    yield
                finally:
                    group.cancel_scope.cancel()
                    self._end("the relay is closing")

    async def _read(self, read: ReadStream[SessionMessage | Exception]) -> None:
        async for item in read:
            if isinstance(item, Exception):
                say("the MCP server wrote a line that is not a JSON-RPC message; ignored")
                continue
            message = item.message
            if isinstance(message, JSONRPCResponse | JSONRPCError):
                waiter = None if message.id is None else self._pending.pop(message.id, None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(message)
            else:
                self._forward(message)
        self._end("the MCP server stopped answering (its output closed)")
        self._on_lost()

    def _end(self, why: str) -> None:
        if self.lost is None:
            self.lost = why
        pending, self._pending = self._pending, {}
        for waiter in pending.values():
            if not waiter.done():
                waiter.set_exception(LiveProviderError(self.lost))

    # -- the client's messages -------------------------------------------------------------

    def remember_initialize(self, params: Mapping[str, Any] | None) -> None:
        """The client's ``initialize`` parameters, for a handshake the server still owes."""
        self._initialize = dict(params or {})

    async def notify(self, message: JSONRPCNotification) -> None:
        """Hand a client's notification to the server (``notifications/initialized`` only
        when the server received the client's ``initialize``)."""
        if message.method == _INITIALIZED:
            if not self._initialized or self._initialized_sent:
                return
            self._initialized_sent = True
        await self._send(message)

    async def respond(self, message: JSONRPCResponse | JSONRPCError) -> None:
        """Hand the client's answer to one of the server's requests back to the server."""
        await self._send(message)

    async def _send(self, message: JSONRPCMessage) -> None:
        if self._write is None or self.lost is not None:
            raise LiveProviderError(self.lost or "the MCP server is not running")
        try:
            await self._write.send(SessionMessage(message))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._end("the MCP server stopped reading its input")
            raise LiveProviderError("the MCP server stopped reading its input") from None

    # -- calls -----------------------------------------------------------------------------

    async def call(
        self, method: str, params: Mapping[str, Any] | None, request_id: RequestId | None = None
    ) -> dict[str, Any]:
        """Ask the server; its answer as the fixture keeps it (``{"result"}`` or
        ``{"error"}``). Raises ``LiveProviderError`` when the server cannot answer."""
        if method == "initialize":
            return stored_answer(await self._initialize_as_asked(params, request_id))
        if self._initialize is not None and not self._initialized:
            await self._handshake()
        return stored_answer(await self._exchange(method, params, request_id))

    async def _initialize_as_asked(
        self, params: Mapping[str, Any] | None, request_id: RequestId | None
    ) -> JSONRPCResponse | JSONRPCError:
        """The client's own initialize, which the server then owes no other."""
        self._initializing = event = anyio.Event()
        try:
            answer = await self._exchange("initialize", params, request_id)
            if isinstance(answer, JSONRPCResponse):
                self._initialized = True
            return answer
        finally:
            event.set()

    def call_blocking(
        self, method: str, params: Mapping[str, Any] | None, request_id: RequestId | None = None
    ) -> dict[str, Any]:
        """``call`` from a thread other than the event loop's (a provider's sync path)."""
        loop = self._loop
        if loop is None:
            raise LiveProviderError("the MCP server is not running")
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            raise LiveProviderError(
                "the MCP adapter cannot block its own event loop: use acomplete"
            )
        future = asyncio.run_coroutine_threadsafe(self.call(method, params, request_id), loop)
        try:
            return future.result()
        except Exception as exc:
            if isinstance(exc, LiveProviderError):
                raise
            raise LiveProviderError(self.lost or "the MCP call was abandoned") from None

    async def _handshake(self) -> None:
        async with self._lock:
            if self._initializing is not None:  # the client's own is on its way
                await self._initializing.wait()
            if self._initialized:
                return
            answer = await self._exchange("initialize", self._initialize, None)
            if isinstance(answer, JSONRPCError):
                raise LiveProviderError(
                    f"the MCP server refused initialize (JSON-RPC error {answer.error.code})"
                )
            self._initialized = True
            self._initialized_sent = True
            await self._send(JSONRPCNotification(jsonrpc="2.0", method=_INITIALIZED))

    async def _exchange(
        self, method: str, params: Mapping[str, Any] | None, request_id: RequestId | None
    ) -> JSONRPCResponse | JSONRPCError:
        if self._loop is None:
            raise LiveProviderError("the MCP server is not running")
        if request_id is None or request_id in self._pending:
            request_id = f"replay-actor-{next(self._ids)}"
        waiter: asyncio.Future[JSONRPCResponse | JSONRPCError] = self._loop.create_future()
        self._pending[request_id] = waiter
        try:
            await self._send(_request(method, params, request_id))
            return await waiter
        finally:
            if self._pending.get(request_id) is waiter:
                del self._pending[request_id]
