"""Replay: one acquisition's cursor actor, and the caller's handles on it.

The folders say the process a file runs in (docs/architecture.md, "Rooms by process");
``tests/replay/test_rooms.py`` enforces which room may import which::

    core/      any      I/O-free: the frames and their messages, a handle's lifecycle
    io/        both     plumbing both sides use: the socket channel, processes, the record
    caller/    caller   the acquiring process: acquisition, handles, links, the backends
    forked/    forked   processes forked off the zygote: the zygote, holders, actors

Each folder's ``__init__`` maps its files. This ``__init__`` imports nothing (nor do
theirs): the zygote and the actor import only what they use.
"""
