"""The caller's room: everything that runs in the acquiring process.

It may import ``core/`` and ``io/``; it never imports ``forked/`` (the zygote is started
by its module's name on a command line, ``zygote_client.py``).

::

    acquisition.py    caller   ``acquire`` (misses explained only if the caller says how)
                               and its ``Terms``: the public ``acquire``'s keywords
    base.py           caller   ``ReplayHandle``: the calls both backends share, over the core
    handle.py         caller   ``ReplayProvider``: the local backend's facade; ``Acquired``,
                               all a copy carries
    sync.py           caller   ``SyncLink``: blocking channels, one per thread
    aio.py            caller   ``AsyncLink``, ``LoopLinks``: one event loop's connection
    pipeline.py       caller   ``complete_many``'s batch on one channel
    registry.py       caller   this process's handles at fork and at exit
    dial.py           caller   connecting to the actor
    supervisor.py     caller   ``Supervisor``: many acquisitions for an orchestrator
    reaper.py         caller   reaps the zygote without being asked
    zygote_client.py  caller   ``Zygote``: starts the zygote, sends requests, matches replies
    ray_backend.py    caller   ``RayReplayProvider``: the cursor as a Ray actor (its
                               ``CursorActor`` runs in a Ray worker)

This ``__init__`` imports nothing.
"""
