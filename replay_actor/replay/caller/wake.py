"""``Waker``: whether a channel's next ``complete()`` announces itself with ``WAKE``.

Runs in: the caller.

A call is the caller's hashing, then one exchange with the actor. While the caller
hashes, the actor has nothing to do and its core goes idle; on a virtual machine whose
idle cores halt at once (this project's: KVM, ``guest_halt_poll_ns=0``), waking it for
the request, and the caller for the reply, costs more than all the code of a call. A
``WAKE`` frame sent *before* hashing (``protocol.WAKE``, no reply) lets the actor wake
while the caller hashes and then look for the request without sleeping (``WAKE_SPIN``);
the caller likewise looks for the reply for a while (``REPLY_SPIN``) before it blocks.

That pays only where cores are idle. Where they are busy (other work, a CPU hog on
each core), the extra wake-up and the polling compete with the work that has to be done
and a call gets slower (measured: up to 2-3 x). So each channel measures: a call's
time, from before its ``WAKE`` (or where it would be) to its reply, is averaged
separately with and without; the channel uses the faster way, and now and then one call
the other way, so that the choice follows the machine (less and less often while that
way stays the slower: ``_MIN_GAP`` to ``_MAX_GAP`` calls apart).
"""

from __future__ import annotations

from typing import Final

__all__ = ["REPLY_SPIN", "Waker"]

#: Seconds the caller looks for a reply without sleeping after a woken request.
REPLY_SPIN: Final = 100e-6
#: How many calls apart a channel tries the slower way once (to follow the machine):
#: from ``_MIN_GAP``, doubled each time that way is still the slower, to ``_MAX_GAP``.
_MIN_GAP: Final = 16
_MAX_GAP: Final = 1024
#: The weight of one call in a way's running average.
_ALPHA: Final = 1 / 8


class Waker:
    """One channel's choice, learnt from its own calls (not thread-safe: the channel's
    lock serialises its calls)."""

    __slots__ = ("_calls", "_cost", "_gap", "_next")

    def __init__(self) -> None:
        self._calls = 0
        self._cost = [0.0, 0.0]  # average nanoseconds of a call: [plain, woken]
        self._gap = _MIN_GAP
        self._next = 0

    def choose(self) -> bool:
        """True if the next call should send ``WAKE`` first."""
        calls = self._calls = self._calls + 1
        plain, woken = self._cost
        if not plain or not woken:
            return bool(plain)  # one call each way first
        faster = woken < plain
        if calls < self._next:
            return faster
        self._next = calls + self._gap
        return not faster  # once the other way: is it still the slower?

    def record(self, woke: bool, nanoseconds: int) -> None:
        """A whole call's time, sent with ``WAKE`` (``woke``) or without."""
        plain, woken = self._cost
        if plain and woken and (woken < plain) != woke:
            # A try of the slower way: try it less often while it stays slower.
            slower = nanoseconds > (plain if woke else woken)  # than the usual way
            self._gap = min(self._gap * 2, _MAX_GAP) if slower else _MIN_GAP
        way = 1 if woke else 0
        old = self._cost[way]
        self._cost[way] = nanoseconds if old == 0.0 else old + (nanoseconds - old) * _ALPHA
