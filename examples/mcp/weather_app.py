"""An application that uses an MCP server through ``replay-actor mcp`` (docs/mcp.md).

    python examples/mcp/weather_app.py examples/mcp/replay.toml [CITY]

Its MCP configuration names ``replay-actor mcp MANIFEST -- python weather_server.py``
where it named the server; nothing else changes. It prints what the server answered.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import TextContent, TextResourceContents

HERE = Path(__file__).parent


async def main(manifest: str, city: str) -> None:
    server = StdioServerParameters(
        command="replay-actor",
        args=["mcp", manifest, "--", sys.executable, str(HERE / "weather_server.py")],
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = await session.list_tools()
        print("tools:", [tool.name for tool in tools.tools])
        answer = await session.call_tool("forecast", {"city": city})
        print("forecast:", answer.structured_content["result"])
        note = (await session.read_resource("notes://packing")).contents[0]
        assert isinstance(note, TextResourceContents)
        print("packing:", note.text)
        prompt = (await session.get_prompt("plan", {"city": city})).messages[0].content
        assert isinstance(prompt, TextContent)
        print("prompt:", prompt.text)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "Lisbon")
