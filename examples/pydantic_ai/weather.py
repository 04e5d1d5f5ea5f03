"""An ordinary pydantic-ai agent with a tool; its model is chosen by whoever runs it
(docs/pydantic-ai.md)."""

from __future__ import annotations

from pydantic_ai import Agent

agent: Agent[None, str] = Agent(instructions="Answer with the tool's words.")


@agent.tool_plain(strict=True)
def get_weather(city: str) -> str:
    """The weather in a city."""
    return "sunny, 21 C" if city == "Paris" else "unknown"
