"""Fixtures shared by the whole suite.

- ``no_leaks`` (tests/procs.py): no child process and no cursor actor outlives a test;
  every test that starts processes uses it.
- ``chat`` (tests/chat_server.py): an OpenAI-compatible chat server on 127.0.0.1 for one
  test, for the live and record providers; ``claude`` (tests/anthropic_server.py): the
  same for Anthropic's messages API; ``responses_server`` (tests/responses_server.py):
  the same for the OpenAI Responses API; ``gemini_server`` (tests/gemini_server.py): the
  same for Google's Gemini API.
"""

from __future__ import annotations

from tests.anthropic_server import claude
from tests.chat_server import chat
from tests.gemini_server import gemini_server
from tests.procs import no_leaks
from tests.responses_server import responses_server

__all__ = ["chat", "claude", "gemini_server", "no_leaks", "responses_server"]
