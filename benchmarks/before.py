"""``python -m benchmarks.before``: the call profile before the physical-floor work,
measured side by side with this tree's, for the "before" bars of the profile plot.

The tree before that work is commit ``314febe`` (the replay package still flat:
``replay/sync.py``, ``replay/actor.py``, ...). This module checks it out into a
temporary git worktree, runs *this* tree's ``hotpath`` against it (its imports pointed at
the flat modules, the rest unchanged), and alternates with this tree's own ``hotpath``,
``--runs`` times each, on the same machine in the same minutes: wake-ups on a shared
two-core machine move by tens of microseconds from one minute to the next, so a "before"
is only comparable with an "after" measured beside it. Each step's value is the median
over the runs. The result, ``benchmarks/results/profile-before.json``, holds both
profiles; ``make bench`` draws them beside its own run's.

Needs git and the repository's history (not a shallow clone).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Final

__all__ = ["BEFORE", "main"]

ROOT: Final = Path(__file__).resolve().parent.parent
#: The last commit before the physical-floor work (issue 28) touched the hot path.
BEFORE: Final = "314febe"
OUT: Final = ROOT / "benchmarks" / "results" / "profile-before.json"

#: This tree's module paths -> the flat ones of ``BEFORE``; and the frame it built.
_PORT: Final = (
    ("replay_actor.replay.caller.sync", "replay_actor.replay.sync"),
    ("replay_actor.replay.core.protocol", "replay_actor.replay.protocol"),
    ("replay_actor.replay.core.state", "replay_actor.replay.state"),
    ("replay_actor.replay.io.wire", "replay_actor.replay.wire"),
    ("from replay_actor.replay.core import protocol", "from replay_actor.replay import protocol"),
    (
        "from replay_actor.replay.forked import actor as actor_module",
        "from replay_actor.replay import actor as actor_module",
    ),
    ("protocol.complete_frame(digest)", "protocol.frame(protocol.complete_request(digest))"),
)
_SHARED: Final = ("__init__.py", "procs.py", "timing.py", "workload.py")


def _ported_root(work: Path, checkout: Path) -> Path:
    """A directory whose ``replay_actor`` is ``BEFORE``'s and whose ``benchmarks`` is this
    tree's workload and timing with the ported ``hotpath``."""
    root = work / "root"
    (root / "benchmarks").mkdir(parents=True)
    (root / "replay_actor").symlink_to(checkout / "replay_actor")
    here = ROOT / "benchmarks"
    for name in _SHARED:
        shutil.copy(here / name, root / "benchmarks" / name)
    source = (here / "hotpath.py").read_text()
    for new, old in _PORT:
        source = source.replace(new, old)
    (root / "benchmarks" / "hotpath.py").write_text(source)
    return root


def _profile(cwd: Path, save: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    subprocess.run(
        [sys.executable, "-m", "benchmarks.hotpath", "--save", str(save)],
        cwd=cwd,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        timeout=600,
    )
    steps: dict[str, float] = json.loads(save.read_text())["steps"]
    return steps


def _median(runs: list[dict[str, float]]) -> dict[str, float]:
    return {step: statistics.median(run[step] for run in runs) for step in runs[0]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.before", description=__doc__)
    parser.add_argument("--runs", type=int, default=3, help="profiles of each side (3)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="replay-actor-before-") as tmp:
        work = Path(tmp)
        checkout = work / "checkout"
        git = ["git", "-C", str(ROOT)]
        subprocess.run(
            [*git, "worktree", "add", "--detach", "-q", str(checkout), BEFORE], check=True
        )
        try:
            ported = _ported_root(work, checkout)
            sides: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
            for _ in range(args.runs):
                sides["before"].append(_profile(ported, work / "before.json"))
                sides["after"].append(_profile(ROOT, work / "after.json"))
        finally:
            subprocess.run([*git, "worktree", "remove", "--force", str(checkout)], check=False)
    head = subprocess.run(
        [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    record: dict[str, Any] = {
        "load_average": ", ".join(f"{x:.1f}" for x in os.getloadavg()),
        "runs": args.runs,
        "profiles": {
            f"before ({BEFORE})": _median(sides["before"]),
            f"after ({head}, beside it)": _median(sides["after"]),
        },
    }
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    for label, steps in record["profiles"].items():
        print(f"{label}: complete() {steps['complete()']:.1f} us")


if __name__ == "__main__":
    main()
