"""Fixtures shared by the whole suite (their helpers live in tests/support/).

- ``no_leaks`` (support/procs.py): no child process and no cursor actor outlives a
  test; every test that starts processes uses it.
- ``chat`` (support/chat_server.py): an OpenAI-compatible chat server on 127.0.0.1 for
  one test, for the live and record providers; ``claude`` (support/anthropic_server.py):
  the same for Anthropic's messages API; ``responses_server``
  (support/responses_server.py): the same for the OpenAI Responses API;
  ``gemini_server`` (support/gemini_server.py): the same for Google's Gemini API;
  ``hostile`` (support/hostile_server.py): an OpenAI endpoint that trickles, echoes the
  key or answers 200 MiB, for the live adapters' HTTP clients.
- ``tool_authority``, ``search_api`` (support/tool_server.py): a test CA and a tool's HTTPS
  API on 127.0.0.2; ``mcp_http_server`` (support/mcp_http_server.py): an MCP server over
  streamable HTTP there (docs/tools.md).
"""

from __future__ import annotations

from tests.support.anthropic_server import claude
from tests.support.chat_server import chat
from tests.support.gemini_server import gemini_server
from tests.support.hostile_server import hostile
from tests.support.mcp_http_server import mcp_http_server
from tests.support.procs import no_leaks
from tests.support.responses_server import responses_server
from tests.support.tool_server import search_api, tool_authority

__all__ = [
    "chat",
    "claude",
    "gemini_server",
    "hostile",
    "mcp_http_server",
    "no_leaks",
    "responses_server",
    "search_api",
    "tool_authority",
]
