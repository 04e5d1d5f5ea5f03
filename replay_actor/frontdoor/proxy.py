"""The front door as the sealed run's proxy: every proxied request is refused, named and
counted (docs/front-door.md, "The seal").

Runs in: the process that serves (``replay-actor run``), on its event loop, under
uvicorn, in front of :class:`~.app.FrontDoorApp`. Under a sealed run the child's proxy
variables (:func:`proxy_variables`) point at the front door, so a client that honours
them (most HTTP libraries: Python's, curl, Go's, Node's with ``NODE_USE_ENV_PROXY=1``)
sends every request for another host here instead of to the host:

- ``CONNECT host:443`` (an ``https://`` URL through a proxy) and an absolute-form request
  ``POST http://host/...`` for any other host are answered 403 with ``x-should-retry:
  false`` and a message naming the host; each counts as ``blocked``, and each host is
  reported once on stderr (``report``), so a client that swallows the error still
  leaves a trace and a non-zero exit;
- an absolute-form request for the front door itself (a client that proxies even the
  addresses ``NO_PROXY`` lists) is served as if it had come directly.

The absolute form is seen only because the front door runs uvicorn on h11, which hands
the request target to the application as it came (httptools keeps only the path).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, MutableMapping
from typing import Any, Final
from urllib.parse import urlsplit

import msgspec

from ..serving import Outcomes
from .app import Receive, Scope, Send

__all__ = ["ProxyRefusal", "proxy_variables"]

_PROXY_NAMES: Final = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")


def proxy_variables(url: str, no_proxy: str) -> dict[str, str]:
    """Every proxy variable (both cases) pointing at ``url``, ``NO_PROXY`` set to
    ``no_proxy``, and Node's switch that makes its built-in ``fetch`` read them."""
    env: dict[str, str] = {}
    for name in _PROXY_NAMES:
        env[name] = env[name.lower()] = url
    env["NO_PROXY"] = env["no_proxy"] = no_proxy
    env["NODE_USE_ENV_PROXY"] = "1"
    return env


ASGIApp = Callable[[Scope, Receive, Send], Any]


class ProxyRefusal:
    """``ProxyRefusal(app, authorities, outcomes, report)``: ``app`` behind a proxy that
    refuses every host but the front door's own ``authorities`` (``"127.0.0.1:8080"``);
    ``logged(host)`` is told of each refusal (the run log)."""

    def __init__(
        self,
        app: ASGIApp,
        authorities: Collection[str],
        outcomes: Outcomes,
        report: Callable[[str], None],
        *,
        logged: Callable[[str], None] = lambda host: None,
    ) -> None:
        self._app = app
        self._logged = logged  # the run log's line for each refusal (docs/attribution.md)
        self._authorities = frozenset(a.lower() for a in authorities)
        self._outcomes = outcomes
        self._report = report
        self._reported: set[str] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        target: str = scope.get("raw_path", b"").decode("latin-1") or scope["path"]
        if scope["method"] == "CONNECT":
            await self._refuse(send, target, f"CONNECT {target}")
            return
        if target.startswith("/"):
            await self._app(scope, receive, send)
            return
        parts = urlsplit(target)
        authority = parts.netloc.rpartition("@")[2].lower()
        if authority in self._authorities:
            path = parts.path or "/"
            scope = {**scope, "path": path, "raw_path": path.encode("latin-1")}
            await self._app(scope, receive, send)
            return
        await self._refuse(send, authority or target, f"{scope['method']} {target}")

    async def _refuse(self, send: Send, host: str, request: str) -> None:
        self._outcomes.add("blocked")
        self._logged(host)
        if host not in self._reported:
            self._reported.add(host)
            self._report(host)
        message = (
            f"replay-actor run is sealed: {request} was refused; only the front door "
            "answers (docs/front-door.md, 'The seal')"
        )
        body = msgspec.json.encode({"error": {"type": "replay_blocked", "message": message}})
        headers: list[tuple[bytes, bytes]] = [
            (b"content-type", b"application/json"),
            (b"x-should-retry", b"false"),
            (b"content-length", str(len(body)).encode()),
        ]
        start: MutableMapping[str, Any] = {
            "type": "http.response.start",
            "status": 403,
            "headers": headers,
        }
        await send(start)
        await send({"type": "http.response.body", "body": body})
