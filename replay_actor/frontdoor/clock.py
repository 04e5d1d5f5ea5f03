"""The clock COMMAND sees: its wall clock started at the manifest's ``provider.clock``
and advancing normally, so a prompt that carries the date replays on any later day
(docs/front-door.md, "The clock").

Runs in: the ``run`` process: :func:`prepare_clock` before anything is started (it finds
and tries the library, or refuses with :class:`~replay_actor.ClockUnavailable`),
:meth:`Clock.variables` just before COMMAND is spawned, :meth:`Clock.clean_up` after it
exited. Neither ``run`` nor its front door, cursor actor or live adapter is under the
fake clock: only COMMAND and what it starts, through their environment.

How: libfaketime, preloaded into COMMAND (``LD_PRELOAD``; every dynamically linked
program it starts inherits it), with ``FAKETIME`` an *offset* from the real time, in
whole seconds, taken the moment COMMAND is spawned: ``instant - now``, rounded up, so
the clock starts at the instant (within a second, never before it) and every process
of COMMAND's tree, whenever it starts, reads the same advancing clock. (The ``@`` form,
a start-at time, restarts the clock in each new process; a fraction is parsed with the
program's locale, so a whole number of seconds is the form every process reads alike.)
Monotonic clocks are left real (``FAKETIME_DONT_FAKE_MONOTONIC``: asyncio, timeouts
and sleeps measure with them and must not jump), file times too (``NO_FAKE_STAT``:
Python's bytecode cache compares them), and libfaketime's shared memory is not used
(``FAKETIME_DISABLE_SHM``; an older library that ignores it leaves two small files in
/dev/shm named after COMMAND's pid, removed here once COMMAND has exited).

Which library: the one named by ``REPLAY_ACTOR_LIBFAKETIME``, else the one the
``libfaketime`` Python package bundles (``replay-actor[clock]``), else the system's (the
usual folders, then ``ldconfig -p``). Each is tried in a probe before it is used: a
Python process under it must see the faked time and ``time.sleep`` must work. The probe
rejects what would otherwise fail quietly or later: a library the loader ignores (a
wrong architecture, a missing symbol version: it says so on stderr and runs the program
unfaked) and libfaketime 0.9.10 and older, whose ``clock_nanosleep`` with the monotonic
clock left real makes every ``time.sleep`` of Python 3.11+ fail with ``EINVAL``
(wolfcw/libfaketime#426, fixed in 0.9.11).
"""

from __future__ import annotations

import datetime
import importlib.util
import math
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator, Mapping
from typing import Final

from .._errors import ClockUnavailable

__all__ = ["OVERRIDE", "Clock", "prepare_clock"]

#: The variable that names the library to use (a path), instead of the search.
OVERRIDE: Final = "REPLAY_ACTOR_LIBFAKETIME"
#: The system folders searched, in order (``{arch}``: this interpreter's multiarch
#: triplet, as Debian and Ubuntu install it).
_FOLDERS: Final = (
    "/usr/lib/{arch}/faketime",
    "/usr/lib64/faketime",
    "/usr/lib/faketime",
    "/usr/local/lib/faketime",
    "/usr/local/lib64/faketime",
)
#: The thread-safe build first: evaluations are threaded (and Node always is).
_NAMES: Final = ("libfaketimeMT.so.1", "libfaketime.so.1")
#: The probe's offset: far enough from now that an unfaked clock cannot pass for it.
_PROBE_OFFSET: Final = 400 * 86400
_PROBE: Final = "import time; time.sleep(0.001); print(repr(time.time()))"
_PROBE_TIMEOUT: Final = 30.0
#: What the probe may be off by (a slow start on a loaded machine).
_PROBE_SLACK: Final = 600.0
_INSTALL: Final = (
    "install one: pip install 'replay-actor[clock]' (a libfaketime built in), or your "
    "system's libfaketime 0.9.11 or later (Debian, Ubuntu: apt-get install libfaketime; "
    "their 0.9.10 is refused, see the docs), or name a library in "
    f"{OVERRIDE} (docs/front-door.md, 'The clock')"
)


class Clock:
    """``Clock(instant, library)``: COMMAND's clock, starting at ``instant`` (aware)."""

    def __init__(self, instant: datetime.datetime, library: str) -> None:
        self.instant = instant
        self.library = library

    def offset(self) -> int:
        """Seconds from now to the instant, rounded up."""
        return math.ceil(self.instant.timestamp() - time.time())

    def variables(self, environ: Mapping[str, str]) -> dict[str, str]:
        """What COMMAND's environment gains, taken now (call it just before the spawn).
        Inherited libfaketime settings are the caller's to drop (:meth:`scrub`)."""
        return _settings(self.library, self.offset(), environ.get("LD_PRELOAD", ""))

    @staticmethod
    def scrub(env: dict[str, str]) -> None:
        """Drop inherited libfaketime settings: the manifest's clock decides alone."""
        for name in [n for n in env if n.startswith("FAKETIME") or n in _OTHER_SETTINGS]:
            del env[name]

    @staticmethod
    def clean_up(pid: int) -> None:
        """Remove the shared memory an older libfaketime left for COMMAND (``pid``), if
        any: once COMMAND has exited, nothing needs the names."""
        for name in (f"faketime_shm_{pid}", f"sem.faketime_sem_{pid}"):
            path = os.path.join("/dev/shm", name)
            try:
                info = os.lstat(path)
                if stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid():
                    os.unlink(path)
            except OSError:
                continue


_OTHER_SETTINGS: Final = frozenset({"DONT_FAKE_MONOTONIC", "NO_FAKE_STAT", "FAKE_UTIME"})


def _settings(library: str, offset: int, preload: str) -> dict[str, str]:
    return {
        "LD_PRELOAD": f"{library}:{preload}" if preload.strip() else library,
        "FAKETIME": f"{offset:+d}",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "FAKETIME_DISABLE_SHM": "1",
        "NO_FAKE_STAT": "1",
    }


def prepare_clock(clock: str | None, environ: Mapping[str, str]) -> Clock | None:
    """The clock for ``provider.clock`` (None: COMMAND keeps the real one), with a
    library that passed the probe; :class:`ClockUnavailable` if none does."""
    if clock is None:
        return None
    instant = datetime.datetime.fromisoformat(clock.replace("Z", "+00:00"))
    override = environ.get(OVERRIDE, "")
    candidates = [override] if override else _candidates()
    problems: list[str] = []
    for library in candidates:
        problem = _problem(library)
        if problem is None:
            return Clock(instant, library)
        problems.append(f"{library} ({problem})")
    if override:
        raise ClockUnavailable(
            f"provider.clock: {OVERRIDE} names a library that cannot be used: "
            f"{problems[0]}; {_INSTALL}"
        )
    tried = f"; tried {', '.join(problems)}" if problems else ""
    raise ClockUnavailable(
        f"provider.clock needs libfaketime to give COMMAND its own clock, and no usable "
        f"one was found{tried}; {_INSTALL}"
    )


def _candidates() -> Iterator[str]:
    """Every library to try, in order, each once, those that exist."""
    seen: set[str] = set()
    for path in _places():
        if path not in seen and os.path.isfile(path):
            seen.add(path)
            yield path


def _places() -> Iterator[str]:
    spec = importlib.util.find_spec("libfaketime")  # located, not imported
    if spec is not None and spec.submodule_search_locations:
        for folder in spec.submodule_search_locations:
            yield os.path.join(folder, "vendor", "libfaketime", "src", "libfaketime.so.1")
    arch = sysconfig.get_config_var("MULTIARCH") or f"{os.uname().machine}-linux-gnu"
    for folder in _FOLDERS:
        for name in _NAMES:
            yield os.path.join(folder.format(arch=arch), name)
    yield from _ldconfig()


def _ldconfig() -> Iterator[str]:
    """The libfaketime libraries the dynamic loader's cache knows (``ldconfig -p``)."""
    program = shutil.which("ldconfig") or shutil.which("ldconfig", path="/sbin:/usr/sbin")
    if program is None:
        return
    try:
        listed = subprocess.run(
            [program, "-p"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return
    for line in listed.splitlines():
        name, _, path = line.partition("=>")
        if name.strip().startswith("libfaketime") and path.strip():
            yield path.strip()


def _problem(library: str) -> str | None:
    """Why ``library`` cannot give COMMAND its clock, or None: it passed the probe."""
    if not os.path.isfile(library):
        return "no such file"
    if any(c in library for c in ": \t\n"):
        return "the loader cannot preload a path with a space or a colon"
    return _probe(library)


def _probe(library: str) -> str | None:
    """Run a Python process under ``library``: None if it saw the faked time and could
    sleep, else what went wrong."""
    env = {"PATH": os.defpath, **_settings(library, _PROBE_OFFSET, "")}
    expected = time.time() + _PROBE_OFFSET
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", _PROBE],
            env=env,
            capture_output=True,
            text=True,
            timeout=_PROBE_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"a probe under it failed to run: {type(exc).__name__}"
    said = done.stderr.strip().splitlines()
    if done.returncode != 0:
        if "Invalid argument" in done.stderr:
            return (
                "Python's time.sleep fails under it: libfaketime 0.9.10 or older "
                "(wolfcw/libfaketime#426)"
            )
        return f"a probe under it failed: {said[-1] if said else f'status {done.returncode}'}"
    try:
        seen = float(done.stdout.strip())
    except ValueError:
        seen = 0.0
    if abs(seen - expected) > _PROBE_SLACK:
        return f"the loader did not fake the clock with it{f': {said[0]}' if said else ''}"
    return None
