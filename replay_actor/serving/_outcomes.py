"""What a serving answered, counted by kind: the numbers of ``replay-actor run``'s summary.

Runs in: the process that serves (the front door's event loop, or an application's
threads through an in-process transport). :class:`Outcomes` owns the counts; the serving
classes of :mod:`.serving` add one per HTTP request they answer, and the front door adds
the requests it answers itself (no token, too large, a proxied request it refuses).

=============  =========================================================================
kind           the answer
=============  =========================================================================
``served``     200: the provider answered
``missed``     404 ``replay_miss``
``exhausted``  404 ``replay_exhausted``
``invalid``    the request could not be asked: a body that is not a request, a bad or
               repeated ``x-replay-scope``, a path no vendor serves, no token, too large
``blocked``    a request meant for another host, refused (the sealed run's proxy)
``failed``     anything else: the provider lost or released, a live endpoint's failure,
               a response the vendor's shape cannot express
=============  =========================================================================

Every kind but ``served`` is a call that failed closed: ``run`` exits 4 if any happened.
"""

from __future__ import annotations

import threading
from typing import Final, Literal

__all__ = ["KINDS", "Kind", "Outcomes"]

Kind = Literal["served", "missed", "exhausted", "invalid", "blocked", "failed"]
KINDS: Final[tuple[Kind, ...]] = ("served", "missed", "exhausted", "invalid", "blocked", "failed")


class Outcomes:
    """Counts per :data:`Kind`; safe to add to from several threads."""

    __slots__ = ("_counts", "_lock")

    def __init__(self) -> None:
        self._counts: dict[Kind, int] = dict.fromkeys(KINDS, 0)
        self._lock = threading.Lock()

    def add(self, kind: Kind) -> None:
        with self._lock:
            self._counts[kind] += 1

    def __getitem__(self, kind: Kind) -> int:
        return self._counts[kind]

    @property
    def failed_closed(self) -> int:
        """How many calls got no answer from the provider (every kind but ``served``)."""
        with self._lock:
            return sum(n for kind, n in self._counts.items() if kind != "served")

    def __repr__(self) -> str:
        shown = ", ".join(f"{kind}={n}" for kind, n in self._counts.items())
        return f"<Outcomes {shown}>"
