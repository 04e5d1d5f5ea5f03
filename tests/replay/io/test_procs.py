"""``identity``: the creation time that tells a live process from a recycled PID, read
from ``/proc/PID/stat`` in one read on Linux (psutil elsewhere); a zombie, a process
that ended and a PID nobody has all have none."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest

from replay_actor.replay.io.procs import identity

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(60)]

LINUX = sys.platform.startswith("linux")
#: A child that names itself as awkwardly as ``/proc/PID/stat`` allows (parentheses and
#: spaces inside the command name, which the file prints in parentheses) where there is
#: one, says so, and waits for its stdin to close.
NAMED = (
    "import os, sys\n"
    "if os.path.exists('/proc/self/comm'):\n"
    "    open('/proc/self/comm', 'w').write('a) Z (b) 1 2')\n"
    "print('named', flush=True)\n"
    "sys.stdin.read()\n"
)


def _start_named() -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", NAMED], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "named"
    return child


def _end(child: subprocess.Popen[str]) -> None:
    assert child.stdin is not None
    child.stdin.close()
    child.wait(30)
    assert child.stdout is not None
    child.stdout.close()


def test_a_live_process_has_one_identity_for_its_whole_life() -> None:
    mine = identity(os.getpid())
    assert mine is not None
    time.sleep(0.05)
    assert identity(os.getpid()) == mine


@pytest.mark.skipif(not LINUX, reason="the /proc reading is Linux's")
def test_on_linux_it_is_the_start_time_since_boot_that_psutil_sees_too() -> None:
    me = psutil.Process()
    since_boot = me.create_time() - psutil.boot_time()
    got = identity(me.pid)
    assert got is not None
    assert abs(got - since_boot) < 0.02  # psutil adds the boot time, then subtracts it


def test_processes_started_apart_have_different_identities() -> None:
    first = _start_named()
    time.sleep(0.05)  # at least one clock tick (1/100 s) apart
    second = _start_named()
    try:
        one, two = identity(first.pid), identity(second.pid)
        assert one is not None and two is not None
        assert two > one
    finally:
        _end(first)
        _end(second)


@pytest.mark.skipif(not LINUX, reason="the command name in /proc/PID/stat is Linux's")
def test_a_command_name_with_parentheses_and_spaces_is_read_past() -> None:
    child = _start_named()
    try:
        with open(f"/proc/{child.pid}/comm") as comm:
            assert comm.read().startswith("a) Z (b)")  # the name took
        got = identity(child.pid)
        created = psutil.Process(child.pid).create_time() - psutil.boot_time()
        assert got is not None
        assert abs(got - created) < 0.02
    finally:
        _end(child)


def test_a_zombie_and_a_reaped_process_have_none() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the child never ended"
        time.sleep(0.01)
    assert identity(child.pid) is None  # ended, not yet reaped
    child.wait(30)
    assert identity(child.pid) is None  # reaped: the PID is nobody's (or another's)


def test_a_pid_nobody_has_has_none() -> None:
    highest = 99_999  # the lowest PID limit of the platforms (macOS)
    if LINUX:
        with open("/proc/sys/kernel/pid_max") as limit:
            highest = int(limit.read()) - 1
    unused = next(pid for pid in range(highest, 1, -1) if not psutil.pid_exists(pid))
    assert identity(unused) is None
