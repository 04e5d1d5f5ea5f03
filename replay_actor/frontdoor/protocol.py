"""The front door's HTTP/1.1 protocol: uvicorn's on httptools (llhttp, in C), taught to
hand a proxied request's whole target to the application; h11 where httptools is not
installed (docs/front-door.md, "Under load").

Runs in: the process that serves (``replay-actor serve``, ``replay-actor run``), on its
event loop, under uvicorn. :mod:`.server` serves with it, and :mod:`.tunnel` teaches it
to open a ``CONNECT``'s tunnel when ``run`` freezes tools.
"""

from __future__ import annotations

import asyncio
import urllib.parse

__all__ = ["http_protocol"]


def http_protocol() -> type[asyncio.Protocol] | str:
    """uvicorn's HTTP protocol for the front door: httptools' (C, llhttp), about half of
    h11's cost a request (docs/front-door.md, "Under load"), taught to hand a proxied
    request's whole target to the application as h11 does (``ProxyRefusal`` names its
    host); h11 where httptools is not installed."""
    try:
        import httptools  # noqa: F401
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        return "h11"

    class _HttpTools(HttpToolsProtocol):
        def on_headers_complete(self) -> None:
            target = self.url
            if target[:1] == b"/":
                super().on_headers_complete()
                return
            # An absolute-form target (a proxied request) or a CONNECT's authority: the
            # parser would keep only the path, or refuse it. The request's scope says
            # what h11's would (its task has not started yet).
            self.url = b"/"
            super().on_headers_complete()
            raw_path, _, query = target.partition(b"?")
            self.scope["path"] = urllib.parse.unquote(raw_path.decode("ascii", "replace"))
            self.scope["raw_path"] = raw_path
            self.scope["query_string"] = query

        def _unsupported_upgrade_warning(self) -> None:
            # A CONNECT is an "upgrade" to llhttp: the application refuses it (403).
            if self.scope.get("method") != "CONNECT":
                super()._unsupported_upgrade_warning()

    return _HttpTools
