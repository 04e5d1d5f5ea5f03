"""Plumbing the caller and the forked processes both use.

It may import ``core/``, never ``caller/`` or ``forked/``.

::

    wire.py         both     ``Channel``: moves frames over an AF_UNIX socket
    held.py         caller   a socket write that keeps the GIL (threads on one handle)
    cores.py        caller   keeps the actor on its one calling thread's core
    libc.py         both     a C library function bound through ctypes on first use
    procs.py        both     a process held by pidfd, or psutil where there is none; a
                             process's identity (its creation time)
    waits.py        both     waiting for descriptors with poll: any descriptor number
    inspection.py   both     the owner-only inspection record (the actor writes it; the
                             caller, the CLI and the explainer read it)

This ``__init__`` imports nothing.
"""
