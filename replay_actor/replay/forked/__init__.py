"""The forked room: processes forked off the zygote, and the zygote itself.

It may import ``core/`` and ``io/``; it never imports ``caller/``: nothing of the
acquiring process's handles, threads or registries is loaded where actors are forked.

::

    zygote.py       zygote   ``main``: the warm single-threaded process that forks actors
    holder.py       holder   one process per large fixture, forking its actors
    forkloop.py     zygote, holder   the fork-and-reap loop both run (``Forker``)
    actor.py        actor    the cursor actor's loop and state

This ``__init__`` imports nothing.
"""
