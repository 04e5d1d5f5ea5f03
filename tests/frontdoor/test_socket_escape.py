"""The seal covers the host's Unix sockets at a path (docs/front-door.md, "The seal"):
a socket a host process listens on (Docker's, a local proxy's: here one this test
plants in a temporary folder) is refused to a sealed child, while the child's own
AF_UNIX use (a path socket it binds, Python's multiprocessing, a replay-actor
acquisition inside it) works as unsealed, and the host's view is unchanged."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from replay_actor.frontdoor.sockets import KEPT, SocketCover, host_sockets, warning
from tests.support.frontdoor_util import (
    neutral_hash,
    replay_manifest,
    run_cli,
    summary,
    write_fixture,
)
from tests.support.unprivileged import as_nobody, readable_by_all, readable_copy, system_python

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(240)]

HI = [{"role": "user", "content": "hi"}]

PROBE = textwrap.dedent(
    """
    import json, multiprocessing, os, socket, sys

    def square(x):
        return x * x

    def main():
        host, folder, fixture = sys.argv[1:4]
        out = {}
        probe = socket.socket(socket.AF_UNIX)
        try:
            probe.connect(host)
            out["host"] = "connected"
        except OSError as exc:
            out["host"] = type(exc).__name__
        finally:
            probe.close()
        # A path socket of its own, in the same folder as the host's.
        own = os.path.join(folder, f"own-{os.getpid()}.sock")
        server = socket.socket(socket.AF_UNIX)
        server.bind(own)
        server.listen()
        client = socket.socket(socket.AF_UNIX)
        client.connect(own)
        conn, _ = server.accept()
        client.sendall(b"ok")
        out["own"] = conn.recv(2).decode()
        for sock in (conn, client, server):
            sock.close()
        os.unlink(own)
        # multiprocessing: a manager (a path socket) and a forkserver's pool.
        with multiprocessing.Manager() as manager:
            shared = manager.dict()
            shared["k"] = 7
            out["manager"] = shared["k"]
        with multiprocessing.get_context("forkserver").Pool(2) as pool:
            out["pool"] = pool.map(square, [1, 2, 3])
        # An acquisition inside the child: its zygote and actor, on AF_UNIX.
        from replay_actor import acquire
        with acquire(fixture) as llm:
            request = {"messages": [{"role": "user", "content": "hi"}]}
            out["acquired"] = llm.complete(request)["content"]
        print(json.dumps(out))

    if __name__ == "__main__":
        main()
    """
)


class HostSocket:
    """A listening Unix socket of the host's, at ``path``; ``accepted()`` counts the
    connections that reached it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(16)
        self.sock.setblocking(False)
        path.chmod(0o777)  # any user could connect: only the seal stands in the way

    def accepted(self) -> int:
        count = 0
        while True:
            try:
                conn, _ = self.sock.accept()
            except BlockingIOError:
                return count
            conn.close()
            count += 1

    def still_serves(self) -> bool:
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(str(self.path))
        return self.accepted() == 1


@pytest.fixture
def folder() -> Iterator[Path]:
    """A folder every user may enter (the unprivileged run's child binds in it too)."""
    path = Path(tempfile.mkdtemp(prefix="replay-actor-sockets-"))
    path.chmod(0o777)
    try:
        yield path
    finally:
        shutil.rmtree(path)


@pytest.fixture
def host(folder: Path) -> Iterator[HostSocket]:
    planted = HostSocket(folder / "host.sock")
    yield planted
    planted.sock.close()


def _manifest(folder: Path) -> Path:
    fixture = write_fixture(folder / "fixture.jsonl", {neutral_hash(HI): {"content": "hello"}})
    return replay_manifest(folder, fixture, inspection=False)


def _probe(folder: Path) -> Path:
    script = folder / "probe.py"
    script.write_text(PROBE)
    return script


def _mounted(path: Path) -> bool:
    return any(str(path) in line for line in Path("/proc/self/mountinfo").read_text().splitlines())


def test_a_sealed_child_cannot_reach_a_host_socket_and_keeps_its_own(
    folder: Path, host: HostSocket
) -> None:
    manifest, script = _manifest(folder), _probe(folder)
    args = [sys.executable, str(script), str(host.path), str(folder), str(folder / "fixture.jsonl")]
    done = run_cli(manifest, args, cwd=folder)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["host"] == "ConnectionRefusedError"
    assert host.accepted() == 0
    # Its own AF_UNIX use, unchanged.
    assert out["own"] == "ok"
    assert out["manager"] == 7
    assert out["pool"] == [1, 4, 9]
    assert out["acquired"] == "hello"
    assert summary(done.stderr).endswith("; sealed (namespace)")
    assert "can reach" not in done.stderr  # everything was hidden
    # The host's view: still its socket, still serving, nothing mounted on it.
    assert host.path.is_socket() and host.still_serves()
    assert not _mounted(host.path)


def test_unsealed_the_same_child_reaches_the_host_socket(folder: Path, host: HostSocket) -> None:
    # The probe can fail: without the seal, the planted socket answers.
    manifest, script = _manifest(folder), _probe(folder)
    args = [sys.executable, str(script), str(host.path), str(folder), str(folder / "fixture.jsonl")]
    done = run_cli(manifest, args, flags=("--seal", "off"), cwd=folder)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["host"] == "connected"
    assert host.accepted() == 1


def test_an_unprivileged_sealed_child_cannot_reach_a_host_socket(
    folder: Path, host: HostSocket
) -> None:
    if os.geteuid() != 0:
        pytest.skip("the suite already runs unprivileged: the test above is this one")
    setpriv, python = shutil.which("setpriv"), system_python()
    if setpriv is None or python is None:
        pytest.skip("needs setpriv and a system-wide python of this version to drop to nobody")
    lib = readable_copy(folder)
    manifest, script = _manifest(folder), _probe(folder)
    readable_by_all(folder)
    folder.chmod(0o777)  # the child binds its own socket here
    host.path.chmod(0o777)
    child = [python, str(script), str(host.path), str(folder), str(folder / "fixture.jsonl")]
    outs = {}
    for seal in ("namespace", "off"):
        run = [python, "-m", "replay_actor", "run", "--seal", seal, str(manifest), "--"]
        done = as_nobody(folder, lib, [*run, *child], timeout=180)
        assert done.returncode == 0, done.stderr
        outs[seal] = json.loads(done.stdout)
        assert outs[seal]["own"] == "ok" and outs[seal]["acquired"] == "hello"
        assert outs[seal]["pool"] == [1, 4, 9] and outs[seal]["manager"] == 7
    assert outs["namespace"]["host"] == "ConnectionRefusedError"
    assert outs["off"]["host"] == "connected"
    assert host.accepted() == 1
    assert not _mounted(host.path)


# -- which sockets ---------------------------------------------------------------------------


def test_the_hidden_sockets_are_the_hosts_bound_paths_but_the_kept_services(
    folder: Path, host: HostSocket
) -> None:
    # A listing in the kernel's format: a live socket, an abstract name, a kept service,
    # a path that is no longer a socket, and a gone one.
    plain = folder / "plain-file"
    plain.write_text("")
    rows = [
        str(host.path),
        "@abstract-name",
        "/dev/log",
        str(plain),
        str(folder / "gone.sock"),
        str(host.path),  # listed twice (a listener and an accepted peer)
    ]
    listing = folder / "unix"
    header = "Num       RefCount Protocol Flags    Type St Inode Path\n"
    body = "".join(
        f"0000000000000000: 00000002 00000000 00010000 0001 01 {i} {row}\n"
        for i, row in enumerate(rows)
    )
    listing.write_text(header + body + "0000000000000000: 00000002 00000000 00000000 0001 03 9\n")
    assert host_sockets(str(listing)) == [str(host.path)]
    # The live listing of this test's own network namespace holds the planted socket.
    assert str(host.path) in host_sockets()
    assert "/dev/log" in KEPT and not host_sockets(str(folder / "no-such-listing"))


def test_the_cover_and_the_warning() -> None:
    assert not SocketCover([]) and SocketCover(["/run/docker.sock"])
    text = warning(["/run/docker.sock"])
    assert text.startswith("replay-actor run: warning: COMMAND can reach 1 Unix socket of")
    assert "/run/docker.sock" in text and "'The seal'" in text
    many = warning([f"/run/s{i}.sock" for i in range(7)])
    assert "7 Unix sockets" in many and "/run/s5.sock" not in many and "…" in many
