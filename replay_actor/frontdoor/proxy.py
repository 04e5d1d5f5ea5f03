"""The front door as the sealed run's proxy: every proxied request is refused, named and
counted (docs/front-door.md, "The seal").

Runs in: the process that serves (``replay-actor run``), on its event loop, under
uvicorn, in front of :class:`~.app.FrontDoorApp`. Under a sealed run the child's proxy
variables (:func:`proxy_variables`) point at the front door, so a client that honours
them (most HTTP libraries: Python's, curl, Go's, Node's with ``NODE_USE_ENV_PROXY=1``)
sends every request for another host here instead of to the host:

- a request for a host the manifest ignores (``provider.ignore``) is answered by
  :mod:`.ignore` first: refused at once, counted as ``ignored``, not a failure;
- ``CONNECT host:443`` (an ``https://`` URL through a proxy) and an absolute-form request
  ``POST http://host/...`` for any other host are answered 403 with ``x-should-retry:
  false`` and a message naming the host and the way out (``provider.ignore``, or
  recording the host); each counts as ``blocked``, and each host is reported once on
  stderr (``report``), so a client that swallows the error still leaves a trace and a
  non-zero exit;
- an absolute-form request for the front door itself (a client that proxies even the
  addresses ``NO_PROXY`` lists) is served as if it had come directly;
- when ``run`` freezes tools (``tools``: a replay or record manifest), an absolute-form
  request for another host is that host's exchange instead (:mod:`.tools`), and a
  ``CONNECT`` never reaches this application: the tunnel takes it (:mod:`.tunnel`).

The absolute form is seen only because the front door runs uvicorn on h11, which hands
the request target to the application as it came (httptools keeps only the path).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Collection, MutableMapping
from typing import Any, Final
from urllib.parse import urlsplit

import msgspec

from .app import Receive, Scope, Send
from .ignore import IgnoredHosts, host_of

__all__ = ["ProxyRefusal", "blocked_advice", "proxy_variables"]

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


def blocked_advice(authority: str) -> str:
    """The way out for a blocked host, as the stderr line and the 403 body say it."""
    return (
        f'if it is incidental (telemetry, an update check, a download), add "{host_of(authority)}" '
        "to provider.ignore in the manifest; if the application needs its answers, record "
        "them (docs/front-door.md, 'Incidental traffic')"
    )


class ProxyRefusal:
    """``ProxyRefusal(app, authorities, blocked, report)``: ``app`` behind a proxy that
    refuses every host but the front door's own ``authorities`` (``"127.0.0.1:8080"``);
    ``blocked(host)`` counts each refusal (and writes its run-log line), ``report(host)``
    says it on stderr once per host; ``tools(scheme, host, port)``, when given, is the
    application of another host's exchanges (:mod:`.tools`). ``ignore``, when set, answers
    the hosts the manifest ignores, before anything else is done with them."""

    #: The manifest's ignored hosts (:mod:`.ignore`), asked first about every other host.
    ignore: IgnoredHosts | None = None

    def __init__(
        self,
        app: ASGIApp,
        authorities: Collection[str],
        blocked: Callable[[str], None],
        report: Callable[[str], None],
        *,
        tools: Callable[[str, str, int], ASGIApp] | None = None,
    ) -> None:
        self._app = app
        self._tools = tools
        self._blocked = blocked
        self._authorities = frozenset(a.lower() for a in authorities)
        self._report = report
        self._reported: set[str] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        target: str = scope.get("raw_path", b"").decode("latin-1") or scope["path"]
        if scope["method"] == "CONNECT":
            await self._foreign(send, target, f"CONNECT {target}")
            return
        if target.startswith("/"):
            await self._app(scope, receive, send)
            return
        parts = urlsplit(target)
        authority = parts.netloc.rpartition("@")[2].lower()
        path = parts.path or "/"
        inner = {**scope, "path": path, "raw_path": path.encode("latin-1")}
        if authority in self._authorities:
            await self._app(inner, receive, send)
            return
        origin = self._origin(parts.scheme, authority)
        exchange = None
        if origin is not None and self._tools is not None:
            exchange = functools.partial(self._tools(*origin), inner, receive)
        await self._foreign(send, authority or target, f"{scope['method']} {target}", exchange)

    async def _foreign(
        self,
        send: Send,
        host: str,
        request: str,
        exchange: Callable[[Send], Awaitable[None]] | None = None,
    ) -> None:
        """A request meant for another host: ignored if the manifest says so, else a
        tool's ``exchange`` when the run freezes tools, else refused."""
        if self.ignore is not None and self.ignore.matches(host):
            await self.ignore.answer(send, host)
        elif exchange is not None:
            await exchange(send)
        else:
            await self._refuse(send, host, request)

    @staticmethod
    def _origin(scheme: str, authority: str) -> tuple[str, str, int] | None:
        from .tunnel import parse_authority

        if scheme not in ("http", "https"):
            return None
        parsed = parse_authority(authority, 443 if scheme == "https" else 80)
        return None if parsed is None else (scheme, *parsed)

    async def _refuse(self, send: Send, host: str, request: str) -> None:
        self._blocked(host)
        if host not in self._reported:
            self._reported.add(host)
            self._report(host)
        message = (
            f"replay-actor run is sealed: {request} was refused; only the front door "
            f"answers (docs/front-door.md, 'The seal'); {blocked_advice(host)}"
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
