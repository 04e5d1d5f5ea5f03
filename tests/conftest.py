"""Fixtures shared by the whole suite (their helpers live in tests/support/).

- ``no_leaks`` (support/procs.py): no child process and no cursor actor outlives a
  test; every test that starts processes uses it.
- ``chat`` (support/chat_server.py): an OpenAI-compatible chat server on 127.0.0.1 for
  one test, for the live and record providers; ``claude`` (support/anthropic_server.py):
  the same for Anthropic's messages API; ``responses_server``
  (support/responses_server.py): the same for the OpenAI Responses API;
  ``gemini_server`` (support/gemini_server.py): the same for Google's Gemini API.
"""

from __future__ import annotations

from tests.support.anthropic_server import claude
from tests.support.chat_server import chat
from tests.support.gemini_server import gemini_server
from tests.support.procs import no_leaks
from tests.support.responses_server import responses_server

__all__ = ["chat", "claude", "gemini_server", "no_leaks", "responses_server"]
