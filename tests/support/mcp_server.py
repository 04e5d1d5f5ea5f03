"""A small MCP tool server written with the MCP Python SDK (``MCPServer``), over stdio:
the server ``replay-actor mcp`` records in tests/mcp/.

    python tests/support/mcp_server.py [--started FILE]

``--started FILE`` appends the server's pid to FILE when it starts, so a test can prove
that a replay never started it and that no server outlived the relay. Its answers change
from run to run (``tick`` counts the calls of this process, ``now`` is the clock), as a
real tool's do; ``ask`` asks the client (an elicitation, a request of the server's own),
``wait`` takes its time and ``crash`` ends the server in the middle of a call.
"""

from __future__ import annotations

import argparse
import itertools
import os
import time

import anyio
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

app = MCPServer("weather")
_ticks = itertools.count(1)


@app.tool()
def forecast(city: str, days: int = 1) -> str:
    """The weather for a city."""
    return f"{city}: sunny for {days} day(s)"


@app.tool()
def tick() -> int:
    """How many times this tool was called in this server process."""
    return next(_ticks)


@app.tool()
def now() -> float:
    """The server's clock."""
    return time.time()


@app.tool()
async def count(n: int, ctx: Context) -> int:
    """Doubles ``n``, reporting progress on the way."""
    await ctx.report_progress(1, 2)
    return n * 2


class _Name(BaseModel):
    name: str


@app.tool()
async def ask(ctx: Context) -> str:
    """Asks the client for a name (an elicitation) and greets it."""
    answer = await ctx.elicit("Whom shall I greet?", schema=_Name)
    return f"Hello {answer.data.name}" if answer.action == "accept" else "nobody"


@app.tool()
async def wait(seconds: float) -> str:
    """Answers after ``seconds``."""
    await anyio.sleep(seconds)
    return "waited"


@app.tool()
def crash() -> str:
    """Ends the server at once, in the middle of the call."""
    os._exit(3)


@app.resource("notes://today")
def today() -> str:
    """Today's note."""
    return "buy milk"


@app.prompt()
def greet(name: str) -> str:
    """A greeting prompt."""
    return f"Say hello to {name}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--started", default=None)
    args, _ = parser.parse_known_args()  # anything else (a planted secret) is ignored
    if args.started is not None:
        with open(args.started, "a", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()}\n")
    app.run()


if __name__ == "__main__":
    main()
