"""The front door's lifecycle: one acquisition, one uvicorn server, the ready line.

Runs in: the process that serves, on its main thread's event loop (``replay-actor
serve``, or ``replay-actor run`` beside its child). :class:`FrontDoor` owns

- the provider (``open_provider(manifest)``, so replay, live or record on any backend),
  acquired by this process: the cursor actor watches it, so if the process dies the
  acquisition dies with it (docs/architecture.md);
- the listening socket (bound here, before the server starts, so the URL is known even
  for ``--port 0``) and the uvicorn server on it, with its signal handling left to us:
  uvicorn re-raises a captured SIGTERM after shutdown, which would end ``serve`` with a
  signal instead of exiting 0 after releasing the provider;
- the random token, and the ready line ``{"url", "openai_base_url",
  "anthropic_base_url", "gemini_base_url", "token"}``: a base URL for each family that
  declares one (``vendors.FAMILIES``, ``ready``);
- with ``tools`` (``replay-actor run`` of a replay or record manifest), the proxy's
  other hosts: their exchanges (:mod:`.tools`) and ``CONNECT`` tunnels (:mod:`.tunnel`,
  through uvicorn's HTTP/1.1 protocol with tunnels).

The base URLs are what each vendor's SDK joins its own paths to: openai posts
``{base}/chat/completions`` and ``{base}/responses`` (so its base ends in ``/v1``),
anthropic ``{base}/v1/messages`` and google-genai
``{base}/v1beta/models/{model}:generateContent`` (so theirs are the bare URL).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import ipaddress
import json
import os
import secrets
import signal
import socket
import sys
from collections.abc import Callable, Collection, Iterator
from typing import TYPE_CHECKING, Any, Final, TextIO

from .._interface import Attributed
from ..serving import AsyncServing, FailureHook, Outcomes
from ..vendors import FAMILIES
from .app import MAX_BODY_BYTES, FrontDoorApp
from .ignore import IgnoredHosts
from .protocol import http_protocol
from .proxy import ProxyRefusal

if TYPE_CHECKING:
    import uvicorn

    from .._interface import Provider
    from ..manifest import ManifestLike
    from .tools import ToolSettings

__all__ = [
    "DEFAULT_HOST",
    "FrontDoor",
    "ready_line",
    "serve_forever",
    "tune_collector",
]

DEFAULT_HOST: Final = "127.0.0.1"
#: Connections waiting to be accepted: well above the default 5, so a burst of
#: concurrent clients is queued rather than refused.
_BACKLOG: Final = 4096
#: How long a shutdown waits for requests in flight before cancelling them (a stalled
#: client must not keep a finished run alive).
_GRACE: Final = 5.0
#: The ready line's base URLs: (key, path below the front door's URL), by family.
_READY: Final = tuple(family.ready for family in FAMILIES if family.ready)


#: Container allocations between two young collections while serving (CPython's default
#: is 700): a request's decoded body alone allocates hundreds, and with 64 requests in
#: flight every young collection walked all of theirs. Their objects are freed by
#: reference counting, not by the collector (docs/front-door.md, "Under load").
_YOUNG_COLLECTION: Final = 50_000


def tune_collector() -> None:
    """The serving process's garbage collector, set once before it serves (``serve``,
    ``run``; never a library caller's process): everything loaded so far (modules, the
    manifest, the provider) is frozen out of every later collection (``gc.freeze``), and
    young collections come every ``_YOUNG_COLLECTION`` allocations instead of 700."""
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(_YOUNG_COLLECTION, middle, old)


def _bind(host: str, port: int) -> socket.socket:
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    except ValueError:
        family = socket.AF_INET  # a name: resolved by bind, as IPv4
    # proto IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY on accepted connections only
    # when the socket says it is TCP, and without it every answer written as headers
    # then body waits ~40 ms for the client's delayed ACK (Nagle).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(_BACKLOG)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def _server_class() -> type[uvicorn.Server]:
    import uvicorn

    class _Server(uvicorn.Server):
        """uvicorn's server with the signals left to the front door (see the module
        docstring) and a way to wait until it listens."""

        def __init__(self, config: uvicorn.Config) -> None:
            super().__init__(config)
            self.listening = asyncio.Event()

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            self.listening.set()

    return _Server


class FrontDoor:
    """``FrontDoor(provider, host="127.0.0.1", port=0)``: the front door over an open
    provider, which it releases when it closes (unless ``release_on_close=False``).
    ``await start()``, then ``info`` is the ready line's object; ``stop()`` asks it to
    end; ``await wait_closed()`` ends it. ``outcomes`` counts every answer (the
    ``run`` summary); a proxied request is refused (:mod:`.proxy`) and reported to
    ``report_blocked`` with its host, unless :meth:`ignore` named its host;
    ``on_failure`` is told of every call the provider failed (the miss reporter,
    :mod:`.misses`)."""

    def __init__(  # noqa: PLR0913 - a keyword per part: bounds, counts, hooks, tools
        self,
        provider: Provider,
        host: str = DEFAULT_HOST,
        port: int = 0,
        *,
        max_body_bytes: int = MAX_BODY_BYTES,
        outcomes: Outcomes | None = None,
        release_on_close: bool = True,
        report_blocked: Callable[[str], None] = lambda host: None,
        on_failure: FailureHook | None = None,
        tools: ToolSettings | None = None,
    ) -> None:
        try:
            import uvicorn
        except ImportError as exc:  # pragma: no cover - the [serve] extra is missing
            raise ImportError(
                "the front door needs uvicorn: pip install 'replay-actor[serve]'"
            ) from exc
        self.token: str = secrets.token_urlsafe(32)
        self.outcomes = Outcomes() if outcomes is None else outcomes
        self._serving = AsyncServing(
            provider,
            api=None,
            release_on_close=release_on_close,
            outcomes=self.outcomes,
            on_failure=on_failure,
        )
        self._sock = _bind(host, port)
        bound_host, bound_port = self._sock.getsockname()[:2]
        #: The bound address: a sealed child's namespace listens on the same one.
        self.address: tuple[str, int] = (bound_host, bound_port)
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        self.url: str = f"http://{shown}:{bound_port}"
        front = FrontDoorApp(self._serving, self.token, max_body_bytes=max_body_bytes)
        # With tools, other hosts' exchanges are served and CONNECT tunnels opened (the
        # tunnel takes a CONNECT's connection over); without, CONNECT is refused.
        exchanges, http = (
            (None, http_protocol())
            if tools is None
            else tools.serve(self._serving, front, self._ignored)
        )
        app = self._proxy = ProxyRefusal(
            front,
            (f"{shown}:{bound_port}", f"localhost:{bound_port}"),
            self._blocked,
            report_blocked,
            tools=exchanges,
        )
        config = uvicorn.Config(
            app,
            http=http,
            # No websockets are served: not importing a websocket library saves ~20 ms
            # of every run's start-up.
            ws="none",
            # No reverse proxy stands in front of it: a client's X-Forwarded-* headers are
            # not trusted (uvicorn trusts them from 127.0.0.1 by default), and no
            # middleware runs per request.
            proxy_headers=False,
            lifespan="off",
            access_log=False,
            log_level="warning",
            backlog=_BACKLOG,
            timeout_graceful_shutdown=int(_GRACE),
            # No "server" header: the answers are the vendors' own shapes.
            server_header=False,
        )
        self._server = _server_class()(config)
        self._task: asyncio.Task[None] | None = None

    def _blocked(self, host: str) -> None:
        # Counted; a provider that records where calls came from (the run log's) is
        # told of the refusal too.
        self._serving.refused("blocked", host)

    def ignore(self, hosts: Collection[str]) -> None:
        """Answer proxied requests for ``hosts`` (the manifest's ``provider.ignore``) as
        ignored: refused at once, counted as ``ignored``, not a failure (:mod:`.ignore`)."""
        if hosts:
            self._proxy.ignore = IgnoredHosts(hosts, self.outcomes, self._log_ignored)

    def _ignored(self, authority: str) -> bytes | None:
        """A tunnel's raw refusal when the manifest ignores its host (None: it does not)."""
        ignore = self._proxy.ignore
        return ignore.raw_answer(authority) if ignore and ignore.matches(authority) else None

    def _log_ignored(self, host: str) -> None:
        provider = self._serving.provider
        if isinstance(provider, Attributed):
            provider.refused("ignored", host)

    @property
    def info(self) -> dict[str, str]:
        """The ready line's object: the URL, each SDK's base URL (a family's ``ready``
        key and path, in the families' order), and the token."""
        bases = {key: self.url + below for key, below in _READY}
        return {"url": self.url, **bases, "token": self.token}

    async def start(self, listener: socket.socket | None = None) -> None:
        """Start serving; returns once the socket accepts requests. ``listener``: serve
        on it instead of the bound socket (a sealed child's, on the same address), which
        is closed: then nothing outside the child's namespace reaches the front door."""
        server: Any = self._server
        if listener is not None:
            self._sock.close()
            self._sock = listener
        self._task = asyncio.create_task(server.serve(sockets=[self._sock]))
        listening = asyncio.create_task(server.listening.wait())
        done, _ = await asyncio.wait({self._task, listening}, return_when=asyncio.FIRST_COMPLETED)
        if self._task in done:  # it ended before listening: its exception says why
            listening.cancel()
            await self._task
            raise RuntimeError("the front door's server stopped before it listened")

    def stop(self) -> None:
        """Ask the server to stop (safe from a signal handler on the loop)."""
        self._server.should_exit = True

    async def wait_closed(self) -> None:
        """Stop serving, then release the provider (always, even if serving failed)."""
        self.stop()
        try:
            if self._task is not None:
                await self._task
        finally:
            self._sock.close()
            await self._serving.aclose()

    @property
    def task(self) -> asyncio.Task[None] | None:
        return self._task


def ready_line(info: dict[str, str]) -> str:
    return json.dumps(info, separators=(", ", ": "))


async def _serve(
    provider: Provider,
    address: tuple[str, int],
    out: TextIO,
    on_failure: FailureHook | None,
    ignore: Collection[str],
) -> None:
    door = FrontDoor(provider, *address, on_failure=on_failure)
    door.ignore(ignore)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, door.stop)
    try:
        await door.start()
        out.write(ready_line(door.info) + "\n")
        out.flush()
        assert door.task is not None
        await asyncio.shield(door.task)
    finally:
        await door.wait_closed()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def serve_forever(
    manifest: ManifestLike,
    host: str = DEFAULT_HOST,
    port: int = 0,
    *,
    log: str | os.PathLike[str] | None = None,
) -> int:
    """``replay-actor serve``: acquire, serve until SIGINT/SIGTERM, release; 0.
    ``log``: the run log's path (docs/attribution.md), instead of the manifest's. A
    manifest file is read once, here."""
    from ..manifest import open_provider, read_manifest
    from .misses import reporter_for

    read = read_manifest(manifest)
    provider = open_provider(read, log=log)
    try:
        tune_collector()
        asyncio.run(_serve(provider, (host, port), sys.stdout, reporter_for(read), read.ignore))
    finally:
        provider.release()  # idempotent: already released unless serving failed early
    return 0
