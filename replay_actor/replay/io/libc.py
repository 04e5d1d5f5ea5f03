"""``LibcFunction``: a C library function bound through ctypes once, on first use.

Runs in: the caller (``held.py``'s GIL-keeping ``send``, ``cores.py``'s
``sched_getcpu``), the zygote, the holders and the actors (``prctl``, naming the
process: bound in the zygote, inherited bound by every child it forks).

Declared at import, bound at the first ``bind()``: importing the replay path never
loads ctypes. Where there is no ctypes, no C library or no such function, ``bind()``
gives None and the caller takes its ordinary path.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["LibcFunction"]


class LibcFunction:
    """``name`` from the C library, with ctypes' ``argtypes`` and ``restype`` named as
    strings (``"c_int"``); ``keep_gil``: a foreign call that does not let go of the GIL
    (``ctypes.PyDLL``), else one that does (``ctypes.CDLL``)."""

    __slots__ = ("_argtypes", "_keep_gil", "_name", "_restype", "bound", "function")

    def __init__(
        self, name: str, argtypes: tuple[str, ...], restype: str, *, keep_gil: bool = False
    ) -> None:
        self._name = name
        self._argtypes = argtypes
        self._restype = restype
        self._keep_gil = keep_gil
        self.function: Callable[..., int] | None = None
        self.bound = False

    def bind(self) -> Callable[..., int] | None:
        """The bound function (None where there is none); bound once."""
        if not self.bound:
            try:
                import ctypes

                library = ctypes.PyDLL(None) if self._keep_gil else ctypes.CDLL(None)
                function = getattr(library, self._name)
                function.argtypes = [getattr(ctypes, name) for name in self._argtypes]
                function.restype = getattr(ctypes, self._restype)
                self.function = function
            except (ImportError, OSError, AttributeError):
                self.function = None
            self.bound = True
        return self.function
