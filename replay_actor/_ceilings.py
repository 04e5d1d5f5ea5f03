"""``Ceilings``: the bounds a fixture load enforces, so a hostile file cannot exhaust memory.

Every bound can be lowered or raised by the caller, except ``max_sequence_length``,
which the fixture format caps at 1,024.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

__all__ = ["MAX_SEQUENCE_LENGTH", "Ceilings"]

MAX_SEQUENCE_LENGTH: Final = 1024
_MiB: Final = 1024 * 1024


class Ceilings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Bounds on a fixture load; a frozen value, compared and hashed by its fields."""

    max_file_bytes: int = 256 * _MiB
    max_line_bytes: int = 16 * _MiB
    max_response_bytes: int = 4 * _MiB
    max_entries: int = 1_000_000
    max_sequence_length: int = MAX_SEQUENCE_LENGTH
    max_depth: int = 64

    def __post_init__(self) -> None:
        for name in self.__struct_fields__:
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"Ceilings.{name} must be a positive int, not {value!r}")
        if self.max_sequence_length > MAX_SEQUENCE_LENGTH:
            raise ValueError(f"Ceilings.max_sequence_length cannot exceed {MAX_SEQUENCE_LENGTH}")

    def as_dict(self) -> dict[str, int]:
        """The bounds as a plain dict (the ``ceilings`` of a safe snapshot)."""
        return {name: getattr(self, name) for name in self.__struct_fields__}

    @classmethod
    def from_mapping(cls, values: dict[str, Any]) -> Ceilings:
        """Build from a mapping of overrides (used by the manifest and the actor)."""
        return cls(**values)


DEFAULT_CEILINGS: Final = Ceilings()
