"""``replay-actor mcp MANIFEST -- SERVER_COMMAND``: a stand-in for a stdio MCP server
(docs/mcp.md).

Runs in: the ``replay-actor mcp`` process, all on its main thread's event loop (the
client's stdin is read by a daemon thread, ``stdio.py``).

The manifest's kind decides what answers::

    replay   the fixture alone: SERVER_COMMAND is never started
    record   the fixture, then the server (started here), each new answer recorded
    live     the server, nothing recorded

Record and live open the manifest's provider with its live table replaced by the
``mcp`` adapter (``adapter.py``) on the server this process started, so recording goes
through the recorder like any other (``open_provider``); a record manifest needs no
``[provider.live]`` table of its own, and the one it has (the model's) is not used.

The process ends when the client closes its stdin (after the answers still owed), when
the server stops answering, or on SIGINT, SIGTERM or SIGHUP; the server is then stopped
the SDK's way (stdin closed, a grace period, SIGTERM and SIGKILL to its process group),
and one summary line goes to stderr, as ``run`` writes it without the seal::

    replay-actor: 5 served, 1 missed, 0 exhausted, 0 blocked; fixture sha256:…

The exit status: 127 or 126 when SERVER_COMMAND cannot be started (as a shell says),
128 + N after signal N, else 4 when any request failed closed (a miss, an exhausted
sequence, an invalid line, the server lost), unless ``allow_misses``; else 0.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import tomllib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import anyio

from .._errors import ManifestError, ReplayError
from ..frontdoor.misses import reporter_for
from ..frontdoor.run import exec_failure
from ..frontdoor.summary import exit_status, summary_line
from ..manifest import AdapterTable, Manifest, open_provider, read_manifest
from .relay import Relay
from .request import ADAPTER
from .stdio import ClientOut, client_messages, say

if TYPE_CHECKING:
    from .._interface import Provider
    from ..manifest import ManifestLike
    from .link import ServerLink

__all__ = ["PROG", "read_mcp_manifest", "run_mcp"]

PROG: Final = "replay-actor mcp"
_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: The placeholder live table of a record or live manifest that has none (replaced at
#: once by the one on the started server).
_NO_LIVE: Final = {"adapter": ADAPTER, "model": "server"}
_LIVE_KEYS: Final = ("provider.live", "provider.adapter", "provider.model")
_PATH_KEYS: Final = ("fixture", "inspection", "log")


def read_mcp_manifest(manifest: ManifestLike) -> Manifest:
    """``read_manifest``, except that the server is the live side of a record or live
    manifest: a record manifest may leave out ``[provider.live]``, a live one its
    ``adapter`` and ``model``. Raises ``ManifestError`` naming the key."""
    try:
        return read_manifest(manifest)
    except ManifestError as exc:
        if exc.key not in _LIVE_KEYS or not str(exc).endswith("is required"):
            raise
    if isinstance(manifest, Mapping):
        data: Any = manifest
        base = os.getcwd()
    else:  # a path (a Manifest is always complete): read once already, so it parses
        assert not isinstance(manifest, Manifest)
        path = os.path.abspath(os.fspath(manifest))
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
        base = os.path.dirname(path)
    table = dict(data["provider"])
    for key in _PATH_KEYS:  # relative to the manifest's folder, as read_manifest resolves
        value = table.get(key)
        if isinstance(value, str) and value:
            table[key] = os.path.join(base, os.path.expanduser(value))
    if table.get("kind") == "live":
        table = {**_NO_LIVE, **table}
    else:
        table["live"] = _NO_LIVE
    return read_manifest({"provider": table})


def _server_name(name: str | None, command: Sequence[str]) -> str:
    """What the snapshot and the summary call the server: ``--name``, else the command's
    program (never its arguments, which may hold a secret)."""
    return name if name is not None else os.path.basename(command[0])


class _Session:
    """One run of the relay: the server when there is one, the signals, the status."""

    def __init__(self, relay: Relay, link: ServerLink | None) -> None:
        self.relay = relay
        self.link = link
        self.status = 0

    async def run(self) -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(self._signals, group.cancel_scope)
            await self._serve(group.cancel_scope)
            group.cancel_scope.cancel()

    async def _signals(self, scope: anyio.CancelScope) -> None:
        with anyio.open_signal_receiver(*_SIGNALS) as received:
            async for signum in received:
                self.status = 128 + signum
                scope.cancel()
                return

    async def _serve(self, scope: anyio.CancelScope) -> None:
        link = self.link
        if link is None:
            await self.relay.serve(client_messages())
            return
        async with contextlib.AsyncExitStack() as stack:
            try:
                await stack.enter_async_context(link.connected(lambda: self._lost(scope)))
            except OSError as exc:
                self.status = exec_failure(link.command, os.environ, exc, PROG)
                return
            await self.relay.serve(client_messages())

    def _lost(self, scope: anyio.CancelScope) -> None:
        """The server stopped answering before the client was done: its answers owed are
        failures already; end the session, so the client sees the connection close."""
        assert self.link is not None and self.link.lost is not None
        say(self.link.lost)
        self.relay.outcomes.add("failed")
        scope.cancel()


def _snapshot(provider: Provider) -> dict[str, Any] | None:
    try:
        return provider.snapshot()
    except ReplayError:
        return None


def run_mcp(
    manifest: ManifestLike,
    command: Sequence[str],
    *,
    name: str | None = None,
    log: str | os.PathLike[str] | None = None,
    allow_misses: bool = False,
) -> int:
    """``replay-actor mcp``: relay stdin and stdout to the manifest's answers; the exit
    status (the module docstring's rule). ``name`` tells apart servers that share a
    fixture (hashed as ``server``); ``log`` is the run log's path, instead of the
    manifest's."""
    if not command:
        raise ValueError("replay-actor mcp needs a SERVER_COMMAND after --")
    read = read_mcp_manifest(manifest)
    out = ClientOut()
    link: ServerLink | None = None
    if read.kind != "replay":  # the SDK's client stack, only where a server runs
        from .adapter import adapter_options
        from .link import ServerLink

        link = ServerLink(command, out.send)
        table = AdapterTable(
            adapter=ADAPTER, model=_server_name(name, command), options=adapter_options(link)
        )
        read = read.replace(live=table)
    provider = open_provider(read, log=log)
    try:
        relay = Relay(provider, out, link=link, server=name, reporter=reporter_for(read))
        session = _Session(relay, link)
        anyio.run(session.run)
        print(summary_line(relay.outcomes, _snapshot(provider), None), file=sys.stderr)
        return exit_status(session.status, relay.outcomes, allow_misses=allow_misses)
    finally:
        provider.release()
