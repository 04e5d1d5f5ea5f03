"""``McpAdapter``: the live adapter of the ``mcp`` kind, the MCP server behind the relay.

Runs in: the ``replay-actor mcp`` process (record and live manifests).

A record manifest records through its live adapter, and ``replay-actor mcp`` records
through the same door as every other recording: ``open_provider`` of the manifest with
its live table replaced by this adapter (entry point ``mcp`` of the group
``replay_actor.adapters``), which asks the server the relay started::

    relay --provider.acomplete(neutral mcp request)--> RecordingProvider
        held by the fixture? its answer : live --> McpAdapter.acomplete --> ServerLink.call

So what the fixture held before is answered from it, every other call is recorded with
its request in the sidecar, and a live manifest passes every call through unrecorded,
with the recorder's guarantees and the run log unchanged.

The adapter forwards the client's own request when the relay hands it over
(``link.RELAYED``: its id, and its ``_meta`` that the neutral request leaves out), else
the neutral request's ``method`` and ``params``. It answers ``{"result": ...}`` or
``{"error": ...}``: an error the server answers is the server's answer, recorded like any
other (a client probing ``server/discover`` on an older server gets its "method not found"
again on replay). Its table is made by ``replay-actor mcp`` (``adapter_table``), never
written in a manifest: it holds the running server.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .._errors import ManifestError
from .link import ServerLink
from .request import RELAYED

__all__ = ["McpAdapter", "adapter_options"]

_LINK: Final = "link"


def adapter_options(link: ServerLink) -> dict[str, Any]:
    """The options of the adapter table ``replay-actor mcp`` gives a manifest."""
    return {_LINK: link}


class McpAdapter:
    """Asks the MCP server of a ``ServerLink`` (the ``Adapter`` protocol)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        for key in config:
            if key not in ("model", _LINK):
                raise ManifestError(f"{key} is not a key of the mcp adapter", key=str(key))
        link = config.get(_LINK)
        if not isinstance(link, ServerLink):
            raise ManifestError(
                "the mcp adapter is the server that `replay-actor mcp MANIFEST -- "
                "SERVER_COMMAND` starts; it cannot be named in a manifest",
                key="adapter",
            )
        self._link = link

    @staticmethod
    def _call(request: dict[str, Any]) -> tuple[str, Any, Any]:
        """What to send: the client's request as it came, or the neutral one's parts."""
        method: str = request["method"]
        relayed = RELAYED.get()
        if relayed is not None and relayed.method == method:
            return method, relayed.params, relayed.id
        return method, request.get("params"), None

    def complete(self, request: dict[str, Any]) -> dict[str, Any]:
        return self._link.call_blocking(*self._call(request))

    async def acomplete(self, request: dict[str, Any]) -> dict[str, Any]:
        return await self._link.call(*self._call(request))

    def close(self) -> None:
        """Nothing to free: the relay owns the server and stops it."""

    async def aclose(self) -> None:
        """Nothing to free: the relay owns the server and stops it."""
