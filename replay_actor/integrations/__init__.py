"""Integrations: where evaluations run, over any provider.

HTTP transports and vendor SDK clients (docs/sdk.md); the Inspect AI model provider
(docs/inspect.md), the pydantic-ai model (docs/pydantic-ai.md) and the pytest plugin
(docs/pytest.md). Each module imports its third-party package (httpx2, httpx, openai,
anthropic, inspect_ai, pydantic_ai, pytest) at its own import, never at ``import
replay_actor``; frameworks find theirs through their own entry points (``inspect_ai``,
``pytest11``) or an explicit import (``replay_actor.pydantic_ai``).
"""
