"""Running ``replay-actor run`` as an unprivileged user (nobody) from a root test suite:
a world-readable copy of the package and of what it imports, and the interpreter every
user can run. Used by the seal's tests (tests/frontdoor/)."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.paths import ROOT

__all__ = ["NOBODY", "as_nobody", "readable_by_all", "readable_copy", "system_python"]

NOBODY = 65534


def system_python() -> str | None:
    """This interpreter's version as installed for every user (the suite's own may live
    in a folder only its owner can read)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for folder in ("/usr/bin", "/usr/local/bin"):
        path = os.path.join(folder, version)
        if os.access(path, os.X_OK):
            return path
    return None


def _distributions(*roots: str) -> list[importlib.metadata.Distribution]:
    """The installed distributions ``roots`` (``name`` or ``name[extra]``) need, theirs
    included, as their metadata says."""
    found: dict[str, importlib.metadata.Distribution] = {}
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [Requirement(root) for root in roots]
    while todo:
        wanted = todo.pop()
        name = canonicalize_name(wanted.name)
        if (name, frozenset(wanted.extras)) in seen:
            continue
        seen.add((name, frozenset(wanted.extras)))
        dist = found.setdefault(name, importlib.metadata.distribution(wanted.name))
        for line in dist.requires or []:
            needed = Requirement(line)
            if needed.marker is None or any(
                needed.marker.evaluate({"extra": extra}) for extra in ("", *wanted.extras)
            ):
                todo.append(needed)
    return list(found.values())


def readable_copy(folder: Path, *roots: str) -> Path:
    """``folder/lib``: this checkout's package and a copy of every installed file that
    ``replay-actor run`` (with its ``serve`` extra), a probe (openai) and ``roots`` import,
    for a user who may not enter the checkout, which may live in a private folder."""
    lib = folder / "lib"
    here = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "replay_actor", lib / "replay_actor", ignore=here)
    for dist in _distributions("replay-actor[serve]", "openai", *roots):
        if canonicalize_name(dist.metadata["Name"]) == "replay-actor":
            continue  # the checkout's own package, copied above
        for file in dist.files or []:
            if ".." in file.parts or "__pycache__" in file.parts:
                continue  # scripts in bin/, compiled bytecode
            target = lib / file
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(Path(str(dist.locate_file(file))), target)
    return lib


def readable_by_all(folder: Path) -> None:
    """Whatever the umask: every folder under ``folder`` open to all, every file readable."""
    for path in [folder, *folder.rglob("*")]:
        mode = path.stat().st_mode
        path.chmod(0o755 if path.is_dir() else mode | 0o444)


def as_nobody(
    folder: Path, lib: Path, command: list[str], *, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``command`` run as nobody (``setpriv``, which the caller checked) in ``folder``,
    importing from ``lib`` (``readable_copy``), to completion."""
    setpriv = shutil.which("setpriv")
    assert setpriv is not None
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(folder),
        "PYTHONPATH": str(lib),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    nobody = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    return subprocess.run(
        [*nobody, *command],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        cwd=folder,
        timeout=timeout,
    )
