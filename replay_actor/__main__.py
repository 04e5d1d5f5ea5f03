"""``python -m replay_actor``: the same CLI as the ``replay-actor`` console script."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
