"""Replay: one acquisition's cursor actor, and the caller's handles on it.

::

    handle.py      caller   ``acquire`` and ``ReplayProvider`` (the handle and its copies)
    supervisor.py  caller   ``Supervisor``: many acquisitions for an orchestrator
    protocol.py    both     config, named opcodes, frame codec (no I/O)
    wire.py        both     ``Channel``: length-prefixed frames on an AF_UNIX socket
    procs.py       both     a process held by pidfd, or psutil where there is none
    reaper.py      caller   reaps the zygote without being asked
    zygote.py      both     the warm single-threaded process that forks actors
    actor.py       actor    the cursor actor's loop and state
    inspection.py  actor    the owner-only inspection record

This ``__init__`` imports nothing: the zygote and the actor import only what they use.
"""
