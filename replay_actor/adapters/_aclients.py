"""The async HTTP clients a live adapter posts with: one pooled client per event loop,
aiohttp's when it is installed, else httpx2's (docs/manifest.md, "Live adapters").

Runs in: the caller (a live or record provider's ``acomplete``: the front door's event
loop under ``replay-actor run`` and ``serve``, or a library caller's loop).

Why two: an async call is where a recording spends its CPU. At 64 calls in flight,
httpx2's ``AsyncClient`` (httpcore2's pool, h11, anyio) costs about 1 ms of CPU a call
on this project's benchmark machine, aiohttp's ``ClientSession`` (its C parser, its own
pool) about 0.3 ms, against the same loopback vendor (docs/benchmarks.md, "P19"): the
front door relays every recorded call, so that difference is most of a recording's
overhead. Both clients are given the same settings, so the choice changes the cost,
never the outcome:

- the TLS trust of the sync client: httpx2's ``create_ssl_context()`` (certifi, or
  ``SSL_CERT_FILE``/``SSL_CERT_DIR``), never another store;
- the environment's proxies (``HTTP(S)_PROXY``, ``NO_PROXY``), no redirects followed,
  names resolved by ``getaddrinfo`` (as httpx2 does; aiohttp keeps no cookies, which
  no vendor API reads);
- the attempt's deadline is the adapter's ``asyncio.timeout`` around the whole post
  (connect, send, headers, body), the connection bounded by ``connect_timeout`` within
  it; a body is read only up to its ceiling (``ceiling``).

An attempt gives an :class:`Answer` or raises one of ``client.errors`` (the adapter
names only its type) or ``TimeoutError``. A client belongs to the loop it first ran on
(its connections are that loop's sockets): :class:`LoopClients` keeps one per loop and
process, closed by that loop's own shutdown.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Final, NamedTuple, Protocol

__all__ = [
    "ERROR_BODY_CAP",
    "KEEPALIVE",
    "Answer",
    "AsyncHTTP",
    "LoopClients",
    "ceiling",
    "make_async_client",
]

#: An error body is read only this far: all it may give is a short code.
ERROR_BODY_CAP: Final = 64 * 1024
#: Idle connections an async client keeps per event loop (a recording's concurrency);
#: the number of connections open at once is not capped, as a client per call was not.
KEEPALIVE: Final = 128
#: Each read of a body: a chunk of at most this many bytes.
_CHUNK: Final = 64 * 1024


class Answer(NamedTuple):
    """What one attempt received: the status, its headers (case-insensitive ``get``),
    and the body (read up to the ceiling; ``None`` when the body was larger than that)."""

    status: int
    headers: Mapping[str, str]
    content: bytes | None

    def __repr__(self) -> str:
        # Frames holding an answer are printed by reporters (capture_locals, Sentry);
        # its headers and body may echo the key, so only the status is shown.
        return f"<answer HTTP {self.status}>"


def ceiling(status: int, headers: Mapping[str, str], max_bytes: int) -> int | None:
    """How much of a response's body to read: ``max_bytes`` for a 2xx, ``ERROR_BODY_CAP``
    otherwise; ``None`` (none of it) when its ``Content-Length`` is already larger."""
    limit = max_bytes if 200 <= status < 300 else ERROR_BODY_CAP
    declared = headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    return limit


async def _capped(chunks: AsyncIterator[bytes], limit: int | None) -> bytes | None:
    """The body from ``chunks``, or None: none of it is read when ``limit`` is None, and
    the reading stops as soon as it passes ``limit`` (the rest is never read)."""
    if limit is None:
        return None
    buffer = bytearray()
    async for chunk in chunks:
        buffer += chunk
        if len(buffer) > limit:
            return None
    return bytes(buffer)


class AsyncHTTP(Protocol):
    """One event loop's pooled client, whichever library it is made with."""

    #: What a failed attempt raises besides ``TimeoutError``: the library's base error.
    errors: type[BaseException] | tuple[type[BaseException], ...]

    async def post(self, body: bytes, url: str, max_bytes: int) -> Answer:
        """POST ``body`` to ``url``, the body read up to its ``ceiling``."""
        ...

    async def aclose(self) -> None: ...


class _Aiohttp:
    """aiohttp's ``ClientSession``: the fast one."""

    def __init__(
        self, aiohttp: Any, headers: dict[str, str], connect_timeout: float, ssl: Any
    ) -> None:
        self.errors = aiohttp.ClientError
        connector = aiohttp.TCPConnector(
            limit=0,  # no cap on connections at once, as httpx2's max_connections=None
            ssl=ssl,
            resolver=aiohttp.ThreadedResolver(),  # getaddrinfo, as httpx2 (not aiodns)
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            headers=headers,
            # The whole attempt is bounded by the adapter's asyncio.timeout.
            timeout=aiohttp.ClientTimeout(
                total=None, connect=connect_timeout, sock_connect=connect_timeout
            ),
            cookie_jar=aiohttp.DummyCookieJar(),
            # Not per request: with trust_env, aiohttp reads the proxy variables and
            # ~/.netrc in a worker thread for every request (0.7 ms of CPU a call at 64
            # in flight). The proxy is looked up once per URL instead (``_proxy``).
            trust_env=False,
        )
        self._aiohttp = aiohttp
        self._proxies: dict[str, tuple[Any, Any]] = {}

    def _proxy(self, url: str) -> tuple[Any, Any]:
        """The environment's proxy for ``url`` and its credentials, or ``(None, None)``:
        ``HTTP(S)_PROXY`` and ``NO_PROXY`` as httpx2 reads them, looked up once."""
        found = self._proxies.get(url)
        if found is None:
            import yarl

            try:
                found = self._aiohttp.helpers.get_env_proxy_for_url(yarl.URL(url))
            except LookupError:
                found = (None, None)
            self._proxies[url] = found
        return found

    async def post(self, body: bytes, url: str, max_bytes: int) -> Answer:
        proxy, proxy_auth = self._proxy(url)
        async with self._session.post(
            url, data=body, allow_redirects=False, proxy=proxy, proxy_auth=proxy_auth
        ) as response:
            limit = ceiling(response.status, response.headers, max_bytes)
            # Left unread past the ceiling, the connection is closed, not pooled.
            content = await _capped(response.content.iter_chunked(_CHUNK), limit)
            return Answer(response.status, response.headers, content)

    async def aclose(self) -> None:
        await self._session.close()


class _Httpx:
    """httpx2's ``AsyncClient``: where aiohttp is not installed."""

    def __init__(self, httpx: Any, headers: dict[str, str], timeout: Any, ssl: Any) -> None:
        self.errors = httpx.HTTPError
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=KEEPALIVE)
        self._client = httpx.AsyncClient(
            timeout=timeout, headers=headers, follow_redirects=False, limits=limits, verify=ssl
        )

    async def post(self, body: bytes, url: str, max_bytes: int) -> Answer:
        async with self._client.stream("POST", url, content=body) as response:
            limit = ceiling(response.status_code, response.headers, max_bytes)
            content = await _capped(response.aiter_bytes(), limit)
            return Answer(response.status_code, response.headers, content)

    async def aclose(self) -> None:
        await self._client.aclose()


def make_async_client(
    httpx: Any, headers: dict[str, str], timeout: Any, *, prefer_aiohttp: bool = True
) -> AsyncHTTP:
    """A pooled async client for the running loop: aiohttp's when it is importable (and
    ``prefer_aiohttp``), else httpx2's; either with httpx2's TLS trust. ``timeout`` is
    the adapter's ``httpx2.Timeout`` (its ``connect`` bounds a connection)."""
    ssl = httpx.create_ssl_context()
    if prefer_aiohttp:
        try:
            import aiohttp
        except ImportError:
            pass
        else:
            return _Aiohttp(aiohttp, headers, timeout.connect, ssl)
    return _Httpx(httpx, headers, timeout, ssl)


async def _closed_at_shutdown(client: AsyncHTTP) -> AsyncIterator[None]:
    """Suspended once started, this async generator is closed by the event loop's
    ``shutdown_asyncgens`` (``asyncio.run`` calls it before closing the loop), and then
    closes ``client`` on that loop: the only moment its connections can be closed
    cleanly, since a loop's sockets cannot be closed from outside it."""
    try:
        yield
    finally:
        await client.aclose()


class LoopClients:
    """One pooled client per running event loop (and process).

    A client belongs to the loop it first ran on (its connections are that loop's
    sockets), so each loop gets its own, kept while the loop runs and closed by the
    loop's shutdown (``_closed_at_shutdown``). A loop found closed drops its client.
    """

    def __init__(self, make: Callable[[], AsyncHTTP]) -> None:
        self._make = make
        self._lock = threading.Lock()
        self._clients: dict[tuple[int, asyncio.AbstractEventLoop], tuple[AsyncHTTP, Any]] = {}

    async def get(self) -> AsyncHTTP:
        loop = asyncio.get_running_loop()
        key = (os.getpid(), loop)
        with self._lock:
            found = self._clients.get(key)
            if found is not None:
                return found[0]
            self._forget_closed()
            client = self._make()
            closer = _closed_at_shutdown(client)
            self._clients[key] = (client, closer)
        await closer.__anext__()  # now suspended: the loop's shutdown will close it
        return client

    def _forget_closed(self) -> None:
        pid = os.getpid()
        for key in [k for k in self._clients if k[0] != pid or k[1].is_closed()]:
            del self._clients[key]

    def close(self) -> None:
        """Drop the clients of closed loops (a running loop closes its own at shutdown)."""
        with self._lock:
            self._forget_closed()
