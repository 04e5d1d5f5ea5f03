"""``Memo``: results of a function of a JSON value, remembered by the value's exact image.

``request_hash`` uses it for a request's configuration (tools, their schemas, generation
parameters), which an evaluation sends unchanged with every call (docs/request.md, "What
hashing costs"). The key is the value's ``marshal`` image: marshal is a C walk that writes
every core type with its own code and refuses every other type, subclasses included, so
``1``, ``1.0`` and ``True``, a list, a tuple and a set, a str and a str Enum all have
different images, and two values with the same image are the same value, types
included. A remembered result is then exactly what computing it again would give.
"""

from __future__ import annotations

import marshal
import os
import threading
from collections.abc import Callable
from typing import Any, Final, Generic, TypeVar

__all__ = ["Memo"]

_T = TypeVar("_T")


class Memo(Generic[_T]):
    """Results of ``compute(value)``, keyed by ``value``'s marshal image.

    A hit costs the walk and a comparison (or a dict lookup). A result is kept from the
    second time its image is seen (a value seen once costs no second walk and no
    memory), and only if the value still has that image once the result is computed
    (another thread may have been changing it meanwhile). Values marshal refuses are
    computed each time; exceptions are never remembered. Images larger than
    ``max_value`` bytes are not kept, and the oldest entries go once ``max_bytes`` (keys
    and results) is exceeded, so the memory is bounded.
    """

    def __init__(self, size: Callable[[_T], int], *, max_value: int, max_bytes: int) -> None:
        self._entries: dict[bytes, _T] = {}
        self._get = self._entries.get
        self._size = size
        self._max_value = max_value
        self._max_bytes = max_bytes
        self._total = 0
        self._lock = threading.Lock()
        # A child forked while another thread held the lock would wait for it forever.
        os.register_at_fork(after_in_child=self._new_lock)
        # The last hit, compared without hashing the key: one tuple, so that threads
        # never see a key with another key's result.
        self._last: tuple[bytes, _T] | None = None
        self._seen: set[int] = set()  # hashes of the images seen once

    def __call__(self, value: Any, compute: Callable[[Any], _T]) -> _T:
        """``compute(value)``, or what it gave for a value with the same image."""
        try:
            key = _marshal_dumps(value)
        except (ValueError, RecursionError):  # a type marshal refuses, or too deep
            return compute(value)
        last = self._last
        if last is not None and key == last[0]:  # as the previous call: a memcmp
            return last[1]
        found = self._get(key)
        if found is not None:
            self._last = (key, found)
            return found
        result = compute(value)
        if len(key) <= self._max_value:
            seen = self._seen
            digest = hash(key)
            if digest not in seen:
                # Kept from the second sight on: a value seen once (a request whose
                # tools are its own) costs no second walk and takes no memory.
                if len(seen) >= _MAX_SEEN:
                    seen.clear()
                seen.add(digest)
            elif _marshal_dumps(value) == key:
                # ... and only if ``value`` still has the image the result is stored
                # under: another thread may have changed it while ``compute`` read it.
                self._keep(key, result)
        return result

    def _new_lock(self) -> None:
        self._lock = threading.Lock()

    def _keep(self, key: bytes, result: _T) -> None:
        with self._lock:
            if key in self._entries:
                return
            self._entries[key] = result
            self._total += len(key) + self._size(result)
            while self._total > self._max_bytes:
                oldest = next(iter(self._entries))  # dicts keep insertion order
                self._total -= len(oldest) + self._size(self._entries.pop(oldest))

    def clear(self) -> None:
        with self._lock:
            self._last = None
            self._seen.clear()
            self._entries.clear()
            self._total = 0

    def __len__(self) -> int:
        return len(self._entries)


_marshal_dumps: Final = marshal.dumps
_MAX_SEEN: Final = 4096
