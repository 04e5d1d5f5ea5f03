"""Integrations: HTTP transports and vendor SDK clients over any provider (docs/sdk.md).

Each module imports its third-party package (httpx2, httpx, openai, anthropic) at its own
import, never at ``import replay_actor``.
"""
