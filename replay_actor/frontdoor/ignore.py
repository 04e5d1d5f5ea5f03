"""Incidental traffic: the hosts a manifest ignores (``provider.ignore``), refused at once
and counted as ``ignored`` (docs/front-door.md, "Incidental traffic").

Runs in: the process that serves (``replay-actor run`` or ``serve``), on its event loop:
the proxy (:mod:`.proxy`) asks :meth:`IgnoredHosts.matches` first about every request
meant for another host, before it refuses (or, for a host it may answer, anything
else), and lets :meth:`IgnoredHosts.answer` answer the ones that match.

Why a separate answer and not the seal's refusal: telemetry beacons (promptfoo's, sent
even with its switch off) and library downloads (Hugging Face's) are not calls of the
evaluation. Refused and counted as ``blocked`` they fail every complete replay (exit 4);
let through, they would reach the network. Ignored, they get the same quick refusal —
403 with ``x-should-retry: false``, so no client retries — but count apart, do not
fail the run, and are no sample or miss for ``compare`` (the run log's ``ignored``).

A pattern is a host name, an IPv4 address or a bracketed IPv6 one (``[::1]``), with an
optional ``:port``; without a port it matches every port. ``*.example.com`` matches
``example.com`` itself and every name below it (telemetry and download hosts move
between a domain and its subdomains). Names compare case-insensitively, a trailing dot
aside.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, MutableMapping
from typing import Any

import msgspec

from ..serving import Outcomes
from .app import Send

__all__ = ["IgnoredHosts", "host_of", "split_authority"]


def split_authority(authority: str) -> tuple[str, str | None]:
    """``"Host:443"`` -> ``("host", "443")``; ``"[::1]"`` -> ``("[::1]", None)``: the
    host lower-case without a trailing dot, and the port if one is given."""
    authority = authority.strip().lower()
    if authority.startswith("["):
        host, _, rest = authority.partition("]")
        host += "]"
        port = rest[1:] if rest.startswith(":") else None
    else:
        host, colon, port_text = authority.rpartition(":")
        if not colon or not port_text.isdigit():
            host, port_text = authority, ""
        port = port_text or None
    return host.removesuffix("."), port


def host_of(authority: str) -> str:
    """The host of an authority, without its port (what ``provider.ignore`` names)."""
    return split_authority(authority)[0]


class IgnoredHosts:
    """``IgnoredHosts(patterns, outcomes, logged)``: the manifest's ``ignore`` patterns
    (already checked by the manifest grammar); ``outcomes`` counts each answer as
    ``ignored``; ``logged(host)`` writes its run-log line."""

    def __init__(
        self,
        patterns: Collection[str],
        outcomes: Outcomes,
        logged: Callable[[str], None] = lambda host: None,
    ) -> None:
        self._exact: set[tuple[str, str | None]] = set()
        self._domains: set[tuple[str, str | None]] = set()
        for pattern in patterns:
            host, port = split_authority(pattern)
            if host.startswith("*."):
                self._domains.add((host[2:], port))
            else:
                self._exact.add((host, port))
        self._outcomes = outcomes
        self._logged = logged

    def __bool__(self) -> bool:
        return bool(self._exact or self._domains)

    def matches(self, authority: str) -> bool:
        """Whether a request for ``authority`` (``host``, ``host:port``) is ignored."""
        if not self:
            return False
        host, port = split_authority(authority)
        if (host, None) in self._exact or (host, port) in self._exact:
            return True
        name = host
        while True:
            if (name, None) in self._domains or (name, port) in self._domains:
                return True
            _, dot, name = name.partition(".")
            if not dot:
                return False

    def _refusal(self, authority: str) -> bytes:
        """Count and log one ignored request; the body of its 403."""
        host = host_of(authority)
        self._outcomes.add("ignored")
        self._logged(host)
        message = (
            f"replay-actor: requests for {host} are ignored (provider.ignore in the "
            "manifest); nothing was sent"
        )
        return msgspec.json.encode({"error": {"type": "replay_ignored", "message": message}})

    async def answer(self, send: Send, authority: str) -> None:
        """Refuse a request for an ignored host at once: 403 ``replay_ignored``,
        ``x-should-retry: false``, counted and logged as ``ignored``."""
        body = self._refusal(authority)
        start: MutableMapping[str, Any] = {
            "type": "http.response.start",
            "status": 403,
            "headers": [(name.encode(), value.encode()) for name, value in _headers(body)],
        }
        await send(start)
        await send({"type": "http.response.body", "body": body})

    def raw_answer(self, authority: str) -> bytes:
        """The same refusal as raw HTTP/1.1 bytes, closing the connection: for a
        ``CONNECT`` a tunnel would otherwise open (docs/tools.md)."""
        body = self._refusal(authority)
        lines = [b"HTTP/1.1 403 Forbidden"]
        lines += [f"{name}: {value}".encode() for name, value in _headers(body)]
        lines.append(b"connection: close")
        return b"\r\n".join(lines) + b"\r\n\r\n" + body


def _headers(body: bytes) -> list[tuple[str, str]]:
    return [
        ("content-type", "application/json"),
        ("x-should-retry", "false"),
        ("content-length", str(len(body))),
    ]
