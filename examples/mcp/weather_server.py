"""An MCP tool server written with the MCP Python SDK: the server docs/mcp.md freezes.

    python examples/mcp/weather_server.py

Speaks MCP over stdio: one tool (``forecast``), one resource and one prompt.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

app = MCPServer("weather")


@app.tool()
def forecast(city: str) -> str:
    """Tomorrow's weather for a city."""
    return f"{city}: sunny, 21 °C"


@app.resource("notes://packing")
def packing() -> str:
    """What to pack."""
    return "sunglasses"


@app.prompt()
def plan(city: str) -> str:
    """A prompt to plan a day out."""
    return f"Plan a day out in {city}."


if __name__ == "__main__":
    app.run()
