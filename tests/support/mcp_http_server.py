"""An MCP server over streamable HTTP, on HTTPS at ``127.0.0.2``: the official MCP Python
SDK's ``MCPServer`` (``mcp`` 2.x) under uvicorn, in a thread (docs/tools.md, "MCP over
HTTP").

Its tools: ``forecast(city)`` (a sentence that names the server's ``edition``, so a test
can tell a recorded answer from a live one) and ``add(a, b)``. The certificate is a
:class:`~tests.support.tool_server.TestAuthority`'s, trusted by ``run`` through its own
``SSL_CERT_FILE``.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from types import TracebackType
from typing import TYPE_CHECKING

import pytest

from tests.support.tool_server import TOOL_HOST, TestAuthority

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer


def _server(edition: int) -> MCPServer:
    # Imported here: the suite's collection (conftest) does not pay for the MCP SDK.
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("weather")

    @server.tool()
    def forecast(city: str) -> str:
        """The forecast for a city."""
        return f"{city}: sunny, 21C (edition {edition})"

    @server.tool()
    def add(a: int, b: int) -> int:
        """The sum of two numbers."""
        return a + b

    return server


class MCPHTTPServer:
    """The MCP server and its thread; a context manager. ``url`` is its endpoint."""

    def __init__(self, authority: TestAuthority, edition: int = 1) -> None:
        import uvicorn

        # host: the address it serves, so the SDK's DNS-rebinding guard admits it.
        app = _server(edition).streamable_http_app(host=TOOL_HOST)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind((TOOL_HOST, 0))
        self._sock.listen(64)
        self.url = f"https://{TOOL_HOST}:{self._sock.getsockname()[1]}/mcp"
        config = uvicorn.Config(
            app,
            ssl_certfile=str(authority.cert),
            ssl_keyfile=str(authority.key),
            log_level="warning",
            lifespan="on",
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [self._sock]},
            name="mcp-http-server",
            daemon=True,
        )
        self._thread.start()
        started = threading.Event()
        for _ in range(200):  # up to 10 s
            if self._server.started:
                started.set()
                break
            started.wait(0.05)
        assert started.is_set(), "the MCP server did not start"

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=15.0)
        self._sock.close()

    def __enter__(self) -> MCPHTTPServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


@pytest.fixture
def mcp_http_server(tool_authority: TestAuthority) -> Iterator[MCPHTTPServer]:
    """A running MCP server for one test, stopped (and its thread joined) afterwards."""
    server = MCPHTTPServer(tool_authority)
    try:
        yield server
    finally:
        server.close()
    assert not server.alive
