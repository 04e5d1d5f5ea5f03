"""The client's side of the relay: JSON-RPC messages read from stdin, written to stdout.

Runs in: the ``replay-actor mcp`` process. Reading happens in a daemon thread, writing on
the event loop's thread.

The stdio transport of MCP is newline-delimited JSON-RPC, one message a line, UTF-8.
Each line is parsed and validated with the MCP SDK's own JSON-RPC models
(``mcp.types.jsonrpc_message_adapter``); a line that is not one message becomes
:class:`BadLine` (why, never the line's bytes). Lines longer than :data:`MAX_LINE_BYTES`
are skipped whole, to the next newline, and reported the same way.

Why a daemon thread and not the SDK's ``stdio_server()``: the SDK reads stdin in an
anyio worker thread, which the interpreter joins at exit, so a relay told to stop
(SIGTERM) by a client that keeps its end of the pipe open would never exit. A daemon
thread blocked in ``read`` ends with the process. Writes are synchronous ``os.write``
calls, each a whole line, so two answers never interleave.
"""

from __future__ import annotations

import errno
import io
import os
import sys
import threading
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Final

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.lowlevel import EventLoopToken
from anyio.streams.memory import MemoryObjectSendStream
from mcp_types import INVALID_REQUEST, PARSE_ERROR, JSONRPCMessage, jsonrpc_message_adapter
from pydantic import ValidationError

__all__ = ["MAX_LINE_BYTES", "BadLine", "ClientOut", "client_messages", "say"]

#: A longer line is not read into memory: it is skipped and answered as invalid.
MAX_LINE_BYTES: Final = 64 << 20
_CHUNK: Final = 1 << 16


def say(text: str) -> None:
    """One line on stderr, as every message of ``replay-actor mcp`` is."""
    print(f"replay-actor mcp: {text}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class BadLine:
    """A line that is not one JSON-RPC message: ``code`` is the JSON-RPC error code
    (parse error, or invalid request), ``reason`` says why without quoting the line."""

    code: int
    reason: str


def _parse(line: bytes) -> JSONRPCMessage | BadLine:
    try:
        message: JSONRPCMessage = jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValidationError as exc:
        if any(error["type"] == "json_invalid" for error in exc.errors()):
            return BadLine(PARSE_ERROR, "the line is not valid JSON")
    else:
        return message
    return BadLine(INVALID_REQUEST, "the line is not a JSON-RPC request, notification or response")


def _lines(stream: io.BufferedIOBase) -> list[bytes | None]:
    """The next lines from ``stream`` (None for one too long), or [] at the end."""
    line = stream.readline(MAX_LINE_BYTES + 1)
    if not line:
        return []
    if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
        while True:  # skip the rest of it, never holding more than one chunk
            rest = stream.readline(_CHUNK)
            if not rest or rest.endswith(b"\n"):
                return [None]
    return [line]


def _reader(
    fd: int, send: MemoryObjectSendStream[JSONRPCMessage | BadLine], token: EventLoopToken
) -> None:
    """The daemon thread: each line of ``fd``, parsed, into ``send`` on the event loop of
    ``token``; closes it at EOF."""
    stream = open(fd, "rb", closefd=False)  # noqa: SIM115 - the descriptor is not ours to close
    try:
        while batch := _lines(stream):
            for line in batch:
                if line is None:
                    item: JSONRPCMessage | BadLine = BadLine(
                        INVALID_REQUEST, "the line is too long"
                    )
                elif not line.strip():
                    continue  # a blank line says nothing
                else:
                    item = _parse(line)
                anyio.from_thread.run(send.send, item, token=token)
    except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError, RuntimeError):
        pass  # the relay is gone (RunFinishedError is a RuntimeError): nothing to tell
    finally:
        try:
            anyio.from_thread.run(send.aclose, token=token)
        except RuntimeError:
            pass


async def client_messages(fd: int = 0) -> AsyncGenerator[JSONRPCMessage | BadLine]:
    """The client's messages from ``fd`` (stdin), in order, until it closes it."""
    send, receive = anyio.create_memory_object_stream[JSONRPCMessage | BadLine](16)
    token = anyio.lowlevel.current_token()
    reader = threading.Thread(
        target=_reader, args=(fd, send, token), name="replay-actor mcp stdin", daemon=True
    )
    reader.start()
    async with receive:
        async for item in receive:
            yield item


class ClientOut:
    """Writes JSON-RPC messages to the client, one line each (``fd``: stdout).

    ``gone`` becomes True when the client closed its end (a broken pipe): later
    messages are dropped, and the relay ends.
    """

    def __init__(self, fd: int = 1) -> None:
        self._fd = fd
        self.gone = False

    def send(self, message: JSONRPCMessage) -> None:
        if self.gone:
            return
        data = (message.model_dump_json(by_alias=True, exclude_unset=True) + "\n").encode()
        view = memoryview(data)
        try:
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
        except OSError as exc:
            if exc.errno not in (errno.EPIPE, errno.EBADF):
                raise
            self.gone = True
