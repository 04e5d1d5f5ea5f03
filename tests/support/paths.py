"""Where the repository is: tests find its docs/, examples/ and package from here,
wherever in tests/ they sit."""

from __future__ import annotations

from pathlib import Path

#: The repository's root (this file is tests/support/paths.py).
ROOT = Path(__file__).resolve().parents[2]
