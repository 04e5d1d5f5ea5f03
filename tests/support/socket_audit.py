"""The audit hook that proves a process opens no internet socket: a ``sitecustomize``
that logs the family of every socket created (``socket.__new__``) and connected
(``socket.connect``) to the file ``AUDIT_LOG`` names. A child started with it on
``PYTHONPATH`` passes it on to the processes it starts, so nothing in the product is
instrumented."""

from __future__ import annotations

import textwrap

SITECUSTOMIZE = textwrap.dedent(
    """
    import os, sys
    _log = os.environ["AUDIT_LOG"]

    def _hook(event, args):
        if event == "socket.__new__":
            family = int(args[1])
        elif event == "socket.connect":
            family = int(args[0].family)
        else:
            return
        with open(_log, "a") as f:
            f.write(f"{os.getpid()} {event} {family}\\n")

    sys.addaudithook(_hook)
    """
)
