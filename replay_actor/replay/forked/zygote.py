"""The zygote: a warm, single-threaded process that forks this process's cursor actors.

Runs in: the zygote (``main``, ``FixtureCache``, ``_Holders``). The caller's handle on it,
``Zygote``, is ``replay/caller/zygote_client.py``; the two share no code but the control
messages (``core/control.py``: ``TOKEN SP config`` in, ``TOKEN SP pid`` out). The loop that
receives, forks, replies and reaps is ``forkloop.py``'s, shared with the holders.

Starting a fresh interpreter for every acquisition costs about a hundred milliseconds of
imports; an orchestrator acquiring for hundreds of runs should not pay it each time. So
the first acquisition in a process starts one zygote (``python -P -c``: it never imports
the caller's ``__main__``), which imports the actor's code once and then, per request,
forks an actor. Forking it is safe where forking the caller is not: the zygote has one
thread, no caller state and no handles of its own.

::

    acquirer --(token, config + the actor's socket end, SCM_RIGHTS)--> zygote
                                                                  | small fixture: cache,
                                                                  |  fork
                                                                  | large: forward to its
                                                                  |  holder (holder.py),
                                                                  |  relay its reply
    acquirer <--------------- READY / FE / ER ------------------ actor (serves as usual)

The zygote parses a small fixture (``CACHE_ENTRY_BYTES`` at most) before forking and
keeps it, keyed by path and ceilings, so acquiring it again costs a fork, not a parse;
the cached copy is used only while the file holds exactly the bytes it was parsed from
(``FixtureSet.same_file``, compared on every acquisition). The cache is bounded by bytes
and drops what nobody acquired recently (``FixtureCache``). A large fixture never enters
the zygote: a holder of its own keeps it and forks its actors (``holder.py``,
docs/architecture.md, "Large fixtures"), so the zygote's forks stay cheap.
``gc.freeze()`` keeps the inherited table out of the children's collections, so
copy-on-write pages stay shared.

The zygote ignores SIGCHLD (the kernel reaps its children: no actor ever lingers as a
zombie) and is the subreaper of its holders' actors. When its control channel reaches
EOF, that is when the acquiring process is gone, it forks no more, tells its holders to
go, and exits as soon as its last child has (each actor lives on under its own rules),
so an actor is never orphaned.
"""

from __future__ import annotations

import gc
import math
import os
import signal
import socket
import sys
import time
from collections import OrderedDict
from typing import Any, Final, NamedTuple, NoReturn

from ..._errors import ControlMessageError, FixtureError
from ...fixture import Ceilings, FixtureSet, load_shareable
from ..core import control
from ..core.control import Request
from ..core.protocol import ActorConfig
from . import forkloop
from .actor import set_process_name, trim_heap
from .holder import HolderRef, start_holder

__all__ = [
    "CACHE_BYTES",
    "CACHE_ENTRY_BYTES",
    "CACHE_IDLE",
    "HOLD_SECONDS",
    "HOLD_SECONDS_ENV",
    "MAX_HOLD_SECONDS",
    "TEST_DELAY_ENV",
    "FixtureCache",
    "hold_seconds",
    "main",
]

#: A fixture file larger than this is never parsed by the zygote: a holder keeps it
#: (``holder.py``), so the zygote answers every other acquisition at once and its heap
#: (which every fork copies the page tables of) stays small.
CACHE_ENTRY_BYTES: Final = 2 * 1024 * 1024
#: The cached fixtures' file sizes together stay under this (least recently used go).
CACHE_BYTES: Final = 8 * 1024 * 1024
#: A cached fixture nobody acquired for this long is dropped, in seconds.
CACHE_IDLE: Final = 30.0
#: A held large fixture nobody acquired for this long goes with its holder, in seconds
#: (``HOLD_SECONDS_ENV`` overrides it, 0 included: then it goes at its last release).
HOLD_SECONDS: Final = 30.0
HOLD_SECONDS_ENV: Final = "REPLAY_ACTOR_HOLD_SECONDS"
#: The longest a holder stays unused, in seconds (about 11.6 days): a larger value, which
#: would overflow ``poll``'s timeout, is clamped to it.
MAX_HOLD_SECONDS: Final = 1e6
_PR_SET_CHILD_SUBREAPER: Final = 36
#: Tests only: the path of a file holding a number of seconds. The zygote reads and
#: deletes it, then sleeps that long between forking an actor and replying, as a
#: descheduled or swapped-out zygote would.
TEST_DELAY_ENV: Final = "REPLAY_ACTOR_TEST_ZYGOTE_DELAY"


def _size(path: str) -> int | None:
    try:
        return os.stat(path).st_size
    except OSError:
        return None


class _Cached(NamedTuple):
    size: int  # the file's size when it was parsed (the cache's bound counts these)
    fixture: FixtureSet
    used: float  # time.monotonic() of the last acquisition


class FixtureCache:
    """The zygote's parsed small fixtures, used only while the file holds exactly the
    bytes that were parsed (``FixtureSet.same_file``: compared byte for byte on every
    acquisition, whatever the file's timestamps say).

    Bounded by bytes (file sizes: ``entry_bytes`` each, ``max_bytes`` together) and by
    time (an entry not acquired for ``idle`` seconds is dropped). A larger fixture goes
    to a holder of its own (``holder.py``), never into the zygote, where it would make
    every later fork copy its page tables.
    """

    def __init__(
        self,
        max_bytes: int = CACHE_BYTES,
        entry_bytes: int = CACHE_ENTRY_BYTES,
        idle: float = CACHE_IDLE,
    ) -> None:
        self._max_bytes = max_bytes
        self._entry_bytes = entry_bytes
        self._idle = idle
        self._entries: OrderedDict[tuple[str, str], _Cached] = OrderedDict()

    @staticmethod
    def key(config: ActorConfig) -> tuple[str, str]:
        """What a cached copy (or a holder) is for: the path and the ceilings."""
        return (config.fixture, repr(sorted(config.ceilings.items())))

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def bytes(self) -> int:
        """The cached fixtures' file sizes, together."""
        return sum(entry.size for entry in self._entries.values())

    def large(self, config: ActorConfig) -> bool:
        """True if the file is too large for this cache (its holder keeps it)."""
        size = _size(config.fixture)
        return size is not None and size > self._entry_bytes

    def take(self, config: ActorConfig) -> FixtureSet | None:
        """The fixture to fork an actor with: the cached copy if the file still holds
        exactly its bytes, else a fresh parse kept for next time; None when the file is
        too large to keep or is rejected (the actor then loads it and reports why)."""
        key = self.key(config)
        cached = self._entries.get(key)
        now = time.monotonic()
        if cached is not None:
            if cached.fixture.same_file(config.fixture):
                self._entries[key] = cached._replace(used=now)
                self._entries.move_to_end(key)
                return cached.fixture
            self._drop([key])  # stale: the file changed
        size = _size(config.fixture)
        if size is None or size > self._entry_bytes:
            return None
        try:
            fixture = load_shareable(config.fixture, ceilings=Ceilings(**config.ceilings))
        except FixtureError:
            return None  # the actor will load it itself and report the rejection
        fixture.snapshot()  # computed once here, inherited by every child
        self._entries[key] = _Cached(size, fixture, now)
        total = self.bytes
        evict = []
        for old_key, entry in self._entries.items():
            if total <= self._max_bytes or old_key == key:
                break
            evict.append(old_key)
            total -= entry.size
        for old_key in evict:
            del self._entries[old_key]
        gc.collect()
        trim_heap()  # what the parse freed must not count in every child's RSS
        gc.freeze()  # keep the table out of the children's collections
        return fixture

    def warm(self, config: ActorConfig) -> None:
        """Parse and keep the fixture now, unless a valid copy is cached or it is too
        large to keep."""
        self.take(config)

    def get(self, config: ActorConfig) -> FixtureSet | None:
        """The cached fixture if the file still holds exactly the bytes parsed."""
        cached = self._entries.get(self.key(config))
        if cached is None or not cached.fixture.same_file(config.fixture):
            return None
        return cached.fixture

    def next_expiry(self, now: float) -> float | None:
        """Seconds until the least recently used entry is due to go (None: empty)."""
        if not self._entries:
            return None
        oldest = min(entry.used for entry in self._entries.values())
        return max(0.0, oldest + self._idle - now)

    def expire(self, now: float) -> None:
        """Drop every entry nobody acquired for ``idle`` seconds."""
        self._drop([k for k, e in self._entries.items() if now - e.used >= self._idle])

    def _drop(self, keys: list[tuple[str, str]]) -> None:
        if not keys:
            return
        for key in keys:
            del self._entries[key]
        # The tables are acyclic, so dropping them frees them; hand the pages back.
        gc.collect()
        trim_heap()


def _test_delay() -> None:
    path = os.environ.get(TEST_DELAY_ENV)
    if not path:
        return
    try:
        with open(path) as f:
            seconds = float(f.read())
        os.unlink(path)
    except (OSError, ValueError):
        return
    time.sleep(seconds)


def hold_seconds(value: str | None) -> float:
    """How long an unused large fixture's holder stays, from ``HOLD_SECONDS_ENV``'s value
    (docs/architecture.md, "Large fixtures"): a number of seconds from 0 to
    ``MAX_HOLD_SECONDS``; a larger one (``inf`` included) is clamped to it, so that no
    wait is too long for ``poll``; unset, empty, not a number, NaN or negative: the
    default, ``HOLD_SECONDS``."""
    try:
        seconds = float(value or "")
    except ValueError:
        return HOLD_SECONDS
    if math.isnan(seconds) or seconds < 0:
        return HOLD_SECONDS
    return min(seconds, MAX_HOLD_SECONDS)


class _Holders:
    """The zygote's holders (``holder.py``): one per large fixture path and ceilings."""

    def __init__(self, channel: socket.socket, idle: float) -> None:
        self.channel = channel
        self.idle = idle
        self.by_key: dict[tuple[str, str], HolderRef] = {}
        self.live: dict[int, HolderRef] = {}  # fileno -> every holder not yet gone

    def channels(self) -> list[HolderRef]:
        return list(self.live.values())

    def forward(self, message: bytes, request: Request, fd: int) -> bool:
        """Hand the request to its fixture's holder (started if need be); False if no
        holder took it (the zygote then forks an actor that loads the file itself)."""
        key = FixtureCache.key(request.config)
        for _attempt in (1, 2):
            ref = self.by_key.get(key)
            if ref is None:
                others = [self.channel, *(r.channel for r in self.live.values())]
                ref = start_holder(key, request.config, self.idle, others)
                self.by_key[key] = ref
                self.live[ref.fd] = ref
            try:
                socket.send_fds(ref.channel, [message], [fd])
                ref.pending.add(request.token)
            except BlockingIOError:
                return False  # a holder that far behind: do not queue more on it
            except OSError:
                self._retire(ref)  # gone: a fresh one takes the request
                continue
            return True
        return False

    def readable(self, ref: HolderRef) -> None:
        """A message from a holder: a reply to relay, an offer to go, or its end."""
        try:
            message = ref.channel.recv(control.MAX_MESSAGE)
        except BlockingIOError:
            return
        except OSError:
            message = b""
        if not message:  # the holder is gone
            self._retire(ref)
            self.live.pop(ref.fd, None)
            ref.channel.close()
            for token in ref.pending:  # it will never answer these
                self._relay(control.encode_reply(token, None))
            return
        if message == control.IDLE:
            # Nothing more goes to it; what was forwarded before this is served first.
            self._retire(ref)
            try:
                ref.channel.send(control.EXIT)
            except OSError:
                pass
            return
        try:
            token = control.token_of(message)
        except ControlMessageError:
            return  # not a reply: nothing to relay
        ref.pending.discard(token)
        self._relay(message)  # TOKEN SP pid, for the acquirer, as the holder wrote it

    def _relay(self, message: bytes) -> None:
        try:
            self.channel.send(message)
        except OSError:
            pass

    def _retire(self, ref: HolderRef) -> None:
        if self.by_key.get(ref.key) is ref:
            del self.by_key[ref.key]

    def close(self) -> None:
        """The acquirer is gone: every holder forks no more and exits after its actors."""
        for ref in self.live.values():
            ref.channel.close()
        self.live.clear()
        self.by_key.clear()


class _Zygote:
    """The zygote's part of the fork-and-reap loop (``forkloop.Forker``): a cache of
    small fixtures to fork with, and holders for the large ones."""

    def __init__(self, channel: socket.socket) -> None:
        self.channel = channel
        self.cache = FixtureCache()
        self.holders = _Holders(channel, hold_seconds(os.environ.get(HOLD_SECONDS_ENV)))

    def watched(self) -> list[Any]:
        return self.holders.channels()

    def timeout(self) -> float | None:
        # Sleep until a request, a holder's message or the next cache expiry.
        return self.cache.next_expiry(time.monotonic())

    def other(self, readable: list[Any]) -> None:
        self.cache.expire(time.monotonic())
        for source in readable:
            if source is not self.channel:
                self.holders.readable(source)

    def route(self, message: bytes, request: Request, fd: int) -> bool:
        # A large fixture goes to its holder, whose reply we relay.
        return self.cache.large(request.config) and self.holders.forward(message, request, fd)

    def fixture(self, config: ActorConfig) -> FixtureSet | None:
        return self.cache.take(config)

    def in_child(self) -> None:
        self.channel.close()
        self.holders.close()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)

    def forked(self, pid: int) -> None:
        _test_delay()

    def replied(self) -> None:
        pass  # nothing waits for a reply here

    def close(self) -> None:
        self.channel.close()
        self.holders.close()


def main() -> NoReturn:
    """Entry point of the zygote process: ``python -P -c '...main()' FD``.

    Requests and replies are ``core/control.py``'s: ``TOKEN SP config`` with the actor's
    socket end attached, answered ``TOKEN SP pid`` (``TOKEN SP -`` when no actor was
    forked). A request for a large fixture is forwarded to its holder, whose reply the
    zygote relays. When the acquirer is gone (EOF), the zygote forks no more, tells its
    holders to go, and exits once its last child has.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    set_process_name("replay-zygote")
    _become_subreaper()
    channel = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, fileno=int(sys.argv[1]))
    forkloop.serve(_Zygote(channel))


def _become_subreaper() -> None:
    """Adopt the actors of a holder that dies before them (``PR_SET_CHILD_SUBREAPER``),
    so they are reaped here rather than by init; best effort, Linux only."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass
