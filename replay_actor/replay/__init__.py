"""Replay: one acquisition's cursor actor, and the caller's handles on it.

::

    protocol.py     both     the core, no I/O: config, opcodes, split_frames, decode_reply
    state.py        caller   HandleState and every lifecycle message, no I/O
    base.py         caller   ``ReplayHandle``: the calls both backends share, over the core
    handle.py       caller   ``ReplayProvider``: the local backend's facade
    acquisition.py  caller   ``acquire`` (misses explained only if the caller says how)
    sync.py         caller   ``SyncLink``: blocking channels, one per thread
    aio.py          caller   ``AsyncLink``, ``LoopLinks``: one event loop's connection
    pipeline.py     caller   ``complete_many``'s batch on one channel
    registry.py     caller   this process's handles at fork and at exit
    ray_backend.py  caller   ``RayReplayProvider``: the cursor as a Ray actor
    supervisor.py   caller   ``Supervisor``: many acquisitions for an orchestrator
    wire.py         both     ``Channel``: moves frames over an AF_UNIX socket
    dial.py         caller   connecting to the actor
    procs.py        both     a process held by pidfd, or psutil where there is none
    reaper.py       caller   reaps the zygote without being asked
    zygote.py       both     the warm single-threaded process that forks actors
    actor.py        actor    the cursor actor's loop and state
    inspection.py   actor    the owner-only inspection record

This ``__init__`` imports nothing: the zygote and the actor import only what they use.
"""
