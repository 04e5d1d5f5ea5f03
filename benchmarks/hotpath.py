"""``python -m benchmarks.hotpath``: where the microseconds of one ``complete()`` go.

A profile, not a target: it times each step of the hot path on its own, in interleaved
rounds, and prints each step's best round (docs/benchmarks.md, "Where a call's time
goes"). The steps:

- caller: ``request_hash``; building the frame; ``SyncLink``'s Python around one
  ``write`` and one ``read`` (timed in this process against a peer whose reply is
  already waiting, minus the bare ``write`` and ``read``); decoding the reply.
- actor: its Python per request (reading the frame, the hash check, the cursor, building
  and writing the reply), timed in this process on the actor's own loop code with a
  socketpair; and one ``epoll`` wait on a ready descriptor.
- the kernel: a raw AF_UNIX socketpair exchange of the same frames with a child that
  only reads and writes (P1b's floor), the child kept on this thread's core.
- the wake-ups: what is left of ``complete()``; waking the two processes from idle,
  across cores or on one.

The realistic request and the 100k-entry fixture are P1's (``workload.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import socket
from collections.abc import Callable
from pathlib import Path

import msgspec

from replay_actor import acquire, request_hash
from replay_actor.replay.caller.sync import SyncLink
from replay_actor.replay.core import protocol
from replay_actor.replay.core.protocol import ActorConfig
from replay_actor.replay.core.state import HandleState
from replay_actor.replay.forked import actor as actor_module
from replay_actor.replay.io.wire import Channel

from .procs import RawEcho
from .timing import interleave, per_call
from .workload import fixture, realistic_request

__all__ = ["GROUPS", "grouped", "main", "profile"]

#: The rest of ``complete()``: waking the two processes, and where they are woken.
WAKE_UPS = "wake-ups and where they happen (complete() - the rest)"

#: The plot's five shares of a call (docs/benchmarks.md, "Where a call's time goes"):
#: each step of ``profile`` in one of them.
GROUPS: dict[str, tuple[str, ...]] = {
    "hash": ("caller: request_hash",),
    "framing": (
        "caller: frame",
        "caller: decode the reply",
        "caller: SyncLink's Python (lock, channel, checks)",
    ),
    "kernel": ("raw socketpair exchange on one core (kernel)",),
    "actor": (
        "actor: its Python per request",
        "actor: one epoll wait, ready",
    ),
    "wake-ups": (WAKE_UPS,),
}


def _best_us(sides: dict[str, Callable[[], object]], calls: int = 1000) -> dict[str, float]:
    """Each side's microseconds per call in its best round of interleaved rounds
    (``timing``): on a shared machine the best round is the least disturbed one."""
    batches = {name: per_call(fn, calls) for name, fn in sides.items()}
    samples = interleave(batches, reps=15, warmup=2)
    return {name: min(times) * 1e6 for name, times in samples.items()}


def _actor_side(
    path: str, request: bytes, reply: bytes
) -> tuple[Callable[[], None], Callable[[], None], Callable[[], None]]:
    """The actor's Python per request beyond one read and one write: its loop's read,
    answer and write, run in this process on a socketpair (``one``), against the bare
    syscalls (``bare``); and how to close it."""
    config = ActorConfig(
        fixture=path,
        owner_pid=os.getpid(),
        owner_create_time=0.0,
        private=False,
        ceilings={},
        inspection_path=None,
    )
    actor = actor_module.Actor(config)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    listener, _ = actor_module._listen()
    watch = actor_module._OwnerWatch(os.getpid(), 0.0, "poll")
    loop = actor_module._Loop(actor, theirs.detach(), listener, watch)
    peer = loop.primary
    fd = ours.fileno()

    def one() -> None:
        os.write(fd, request)  # the caller's write, not the actor's: subtracted below
        loop._readable(peer)
        loop._pump(peer)
        os.read(fd, 65536)  # the caller's read, likewise

    def bare() -> None:
        os.write(fd, request)
        os.read(peer.fd, 65536)  # the actor's read and write, with nothing in between
        os.write(peer.fd, reply)
        os.read(fd, 65536)

    def close() -> None:
        loop.close()
        listener.close()
        ours.close()

    return one, bare, close


def _link_side(
    request: bytes, reply: bytes
) -> tuple[Callable[[], None], Callable[[], None], Callable[[], None]]:
    """The caller's ``SyncLink`` Python per exchange, in this process: its peer is the
    other end of a socketpair whose reply is already waiting, so nobody sleeps. ``one``
    is an exchange through the link, ``bare`` the same ``write`` and ``read`` made
    directly; and how to close it."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    peer = theirs.fileno()
    link = SyncLink(b"", 30.0, HandleState("pid 0"), Channel(os.dup(ours.fileno())))
    fd = ours.fileno()

    def one() -> None:
        os.write(peer, reply)  # the peer's reply, queued first: subtracted by ``bare``
        link.exchange(request, protocol.COMPLETE_REPLIES)
        os.read(peer, 65536)

    def bare() -> None:
        os.write(peer, reply)
        os.write(fd, request)
        os.read(fd, 65536)
        os.read(peer, 65536)

    def close() -> None:
        link.release(say_release=False)
        ours.close()
        theirs.close()

    return one, bare, close


def _epoll_wait() -> tuple[Callable[[], object], Callable[[], None]]:
    poller = select.epoll()
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    a.send(b"x")
    poller.register(b.fileno(), select.EPOLLIN)

    def close() -> None:
        poller.close()
        a.close()
        b.close()

    return (lambda: poller.poll(-1)), close


def _beside(pid: int) -> Callable[[], None]:
    """Pin ``pid`` to the core this thread runs on, when that changed: the raw echo
    child kept beside its caller, so that the kernel's share is a same-core exchange."""
    import ctypes

    getcpu = ctypes.CDLL(None).sched_getcpu
    where = [-1]

    def follow() -> None:
        core = getcpu()
        if core != where[0]:
            os.sched_setaffinity(pid, {core})
            where[0] = core

    return follow


def profile() -> dict[str, float]:
    """Microseconds of each step, best round (see the module docstring)."""
    req = realistic_request()
    path = str(fixture(100_000))
    provider = acquire(path, timeout=120.0)
    raw: RawEcho | None = None
    try:
        response = provider.complete(req)
        digest = request_hash(req)
        request = protocol.complete_frame(digest)
        body = msgspec.json.encode(response)
        reply = protocol.RESPONSE + body
        raw = RawEcho(request, protocol.frame(reply))
        beside = _beside(raw.pid)
        one, bare, close_actor = _actor_side(path, request, protocol.frame(reply))
        link_one, link_bare, close_link = _link_side(request, protocol.frame(reply))
        wait, close_wait = _epoll_wait()

        def raw_beside() -> None:
            beside()
            raw.round_trip()

        try:
            got = _best_us(
                {
                    "complete()": lambda: provider.complete(req),
                    "caller: request_hash": lambda: request_hash(req),
                    "caller: frame": lambda: protocol.complete_frame(digest),
                    "caller: decode the reply": lambda: msgspec.json.decode(body),
                    "raw socketpair exchange on one core (kernel)": raw_beside,
                    "actor loop": one,
                    "bare": bare,
                    "link alone": link_one,
                    "link bare": link_bare,
                    "actor: one epoll wait, ready": wait,
                }
            )
        finally:
            close_actor()
            close_link()
            close_wait()
        internal = ("actor loop", "bare", "link alone", "link bare")
        steps = {k: v for k, v in got.items() if k not in internal}
        steps["actor: its Python per request"] = got["actor loop"] - got["bare"]
        steps["caller: SyncLink's Python (lock, channel, checks)"] = (
            got["link alone"] - got["link bare"]
        )
    finally:
        provider.release()
        if raw is not None:
            raw.close()
    accounted = sum(v for k, v in steps.items() if k != "complete()")
    # What is left is not code: where and how the two processes are woken. The actor
    # sleeps while the caller hashes; waking it (and then the caller) costs more than the
    # raw exchange, whose sides never go idle, and far more across cores (on a VM, an
    # interrupt to a halted virtual CPU each way). The actor loop's own bookkeeping
    # (events, peer state: a few us) is in here too.
    steps[WAKE_UPS] = steps["complete()"] - accounted
    return steps


def grouped(steps: dict[str, float]) -> dict[str, float]:
    """The microseconds of ``profile``'s steps summed by ``GROUPS``, and ``complete()``."""
    shares = {
        name: sum(steps.get(step, 0.0) for step in members) for name, members in GROUPS.items()
    }
    shares["complete()"] = steps["complete()"]
    return shares


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.hotpath", description=__doc__)
    parser.add_argument("--save", metavar="JSON", help="also write the steps, with --label")
    parser.add_argument("--label", default="", help="what the saved profile is of")
    args = parser.parse_args(argv)
    steps = profile()
    for name, value in steps.items():
        print(f"{value:8.1f} us  {name}")
    if args.save:
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        record = {"label": args.label, "load_average": load, "steps": steps}
        Path(args.save).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
