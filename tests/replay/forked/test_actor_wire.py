"""The actor's side of the wire under hostile or unlucky peers (docs/architecture.md,
"Wire protocol"): it never blocks on one peer, caps what a peer may make it hold, and
lets nothing but a well-formed hash reach the cursors and the inspection record.

Each test talks to a real actor through raw AF_UNIX sockets (a peer as a hostile
same-user process would be) beside a well-behaved handle.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from replay_actor import (
    InspectionPathError,
    ReplayMiss,
    ReplayProvider,
    acquire,
    entry_line,
    request_hash,
)
from replay_actor.replay.core import protocol

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(60)]

HELLO = {"messages": [{"role": "user", "content": "hello"}]}
OTHER = {"messages": [{"role": "user", "content": "other"}]}
BIG = {"messages": [{"role": "user", "content": "big"}]}
UNKNOWN = {"messages": [{"role": "user", "content": "nobody recorded this"}]}


def frame(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


def complete_frame(request: dict[str, Any]) -> bytes:
    return frame(b"C" + request_hash(request).encode("ascii"))


def read_frame(sock: socket.socket) -> bytes:
    head = recv_exactly(sock, 4)
    return recv_exactly(sock, int.from_bytes(head, "big"))


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return bytes(data)


def peer(provider: ReplayProvider) -> socket.socket:
    """A raw connection to the provider's actor, as another same-user process makes."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10.0)
    sock.connect(provider._address)
    return sock


def stream(sock: socket.socket, total: int) -> None:
    for _ in range(total >> 20):
        sock.sendall(b"\0" * (1 << 20))


def dropped(sock: socket.socket) -> bool:
    """True if the actor closed this peer (EOF or reset) rather than answering."""
    try:
        return sock.recv(1 << 20) == b""
    except ConnectionResetError:
        return True


@pytest.fixture
def fixture_path(tmp_path: Path) -> Path:
    path = tmp_path / "f.jsonl"
    lines = [
        entry_line(request_hash(HELLO), response={"content": "hi"}),
        entry_line(request_hash(OTHER), responses=[{"content": "one"}, {"content": "two"}]),
        entry_line(request_hash(BIG), response={"content": "x" * (1 << 20)}),
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_a_peer_holding_half_a_frame_delays_no_other_caller(fixture_path: Path) -> None:
    # The handle's timeout is shorter than anything the actor could wait on a peer:
    # blocking on the slow one for any time at all would break the caller.
    with acquire(fixture_path, timeout=1.0) as provider:
        slow = peer(provider)
        request = complete_frame(HELLO)
        slow.sendall(request[:10])  # the header and a few bytes, then nothing
        time.sleep(0.1)
        for _ in range(20):
            assert provider.complete(HELLO) == {"content": "hi"}
        # The slow peer is still served once it finishes its frame: its half was kept.
        slow.sendall(request[10:])
        assert read_frame(slow) == b'R{"content":"hi"}'
        slow.close()


def test_pipelined_requests_of_one_peer_are_answered_in_order(fixture_path: Path) -> None:
    with acquire(fixture_path, timeout=10) as provider:
        sock = peer(provider)
        batch = complete_frame(OTHER) + complete_frame(UNKNOWN) + complete_frame(OTHER)
        batch += frame(b"S") + complete_frame(OTHER)
        # Byte by byte first, then the rest in one write: frames split anywhere.
        for byte in batch[:7]:
            sock.sendall(bytes([byte]))
        sock.sendall(batch[7:])
        replies = [read_frame(sock) for _ in range(5)]
        assert replies[:3] == [b'R{"content":"one"}', b"M", b'R{"content":"two"}']
        assert replies[3][:1] == b"J"
        assert replies[4] == b"X"
        sock.close()
        assert provider.snapshot()["served"] == 2


def test_a_peer_that_does_not_read_delays_nobody_and_holds_little(fixture_path: Path) -> None:
    with acquire(fixture_path, timeout=1.0) as provider:
        actor = psutil.Process(provider.actor_pid)
        assert provider.complete(HELLO) == {"content": "hi"}
        rss = actor.memory_info().rss
        greedy = peer(provider)
        greedy.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        # 100 replies of 1 MiB each asked for at once, none read for now.
        greedy.sendall(complete_frame(BIG) * 100)
        for _ in range(20):
            assert provider.complete(HELLO) == {"content": "hi"}
        time.sleep(0.2)
        # Flow control: its further requests wait unanswered while replies to it wait
        # unread, so the actor holds a few MiB for it, never the 100 asked for.
        grown = actor.memory_info().rss - rss
        assert grown < 16 * (1 << 20), f"the actor grew by {grown / (1 << 20):.0f} MiB"
        # Reading late is not a fault: every reply arrives, whole and in order.
        greedy.settimeout(20)
        big = b'R{"content":"' + b"x" * (1 << 20) + b'"}'
        for _ in range(100):
            assert read_frame(greedy) == big
        greedy.close()
        assert provider.complete(HELLO) == {"content": "hi"}
        # A reply larger than one read arrives whole through the handle's channel.
        assert provider.complete(BIG) == {"content": "x" * (1 << 20)}


def test_an_oversized_request_frame_drops_that_peer_only(fixture_path: Path) -> None:
    with acquire(fixture_path, timeout=10) as provider:
        big = peer(provider)
        # Larger than 4 KiB, otherwise well-formed enough to be answered if accepted.
        big.sendall(frame(b"C" + b"a" * 5000))
        assert dropped(big)
        big.close()
        endless = peer(provider)
        endless.sendall((0xFFFFFFF0).to_bytes(4, "big"))
        # Judged by its length prefix: the actor never buffers the stream.
        with pytest.raises((BrokenPipeError, ConnectionResetError)):
            stream(endless, 64 << 20)
        endless.close()
        assert provider.complete(HELLO) == {"content": "hi"}


def test_only_well_formed_hashes_reach_the_cursors_and_the_record(
    fixture_path: Path, tmp_path: Path
) -> None:
    record = tmp_path / "inspection.jsonl"
    bogus = [
        b"sha256:" + b"A" * 64,  # uppercase hex
        b"sha256:" + b"0" * 63,  # too short
        b"sha256:" + b"0" * 64 + b"\n",  # a trailing byte
        b"md5:" + b"0" * 67,
        b"x" * 1000,
    ]
    with acquire(fixture_path, private=True, inspection_path=record, timeout=10) as provider:
        for digest in bogus:
            sock = peer(provider)
            sock.sendall(frame(b"C" + digest))
            assert dropped(sock), digest
            sock.close()
        with pytest.raises(ReplayMiss):
            provider.complete(UNKNOWN)
        assert provider.snapshot()["misses"] == 1
        assert [m["request_hash"] for m in provider.inspect()["misses"]] == [request_hash(UNKNOWN)]
    lines = record.read_bytes().splitlines()
    assert len(lines) == 1 and request_hash(UNKNOWN).encode() in lines[0]


def test_an_actor_out_of_descriptors_does_not_spin(fixture_path: Path) -> None:
    with acquire(fixture_path, timeout=10) as provider:
        actor = psutil.Process(provider.actor_pid)
        assert provider.complete(HELLO) == {"content": "hi"}  # the loop is set up
        # Room for exactly one more peer; every further one finds accept() failing.
        limit = actor.num_fds() + 1
        _, hard = actor.rlimit(psutil.RLIMIT_NOFILE)
        actor.rlimit(psutil.RLIMIT_NOFILE, (limit, hard))
        first = peer(provider)
        waiting = [peer(provider) for _ in range(4)]  # they wait in the backlog
        time.sleep(0.2)
        before = actor.cpu_times()
        time.sleep(1.0)
        after = actor.cpu_times()
        spent = (after.user + after.system) - (before.user + before.system)
        assert spent < 0.3, f"the actor spent {spent:.2f} s of CPU in 1 s, waiting"
        assert provider.complete(HELLO) == {"content": "hi"}
        # A peer leaving frees a descriptor: a waiting one is then accepted and served.
        first.close()
        waiting[0].sendall(complete_frame(HELLO))
        assert read_frame(waiting[0]) == b'R{"content":"hi"}'
        for sock in waiting:
            sock.close()


def test_a_fifo_as_inspection_path_is_refused_promptly(fixture_path: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "record.fifo"
    os.mkfifo(fifo)
    with pytest.raises(InspectionPathError) as info:
        acquire(fixture_path, inspection_path=fifo, timeout=10)
    assert str(fifo) in str(info.value)  # the path the user gave, to find it by
    assert "is not a regular file" in str(info.value)
    # With a reader present the open succeeds; the type check still refuses it.
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with pytest.raises(InspectionPathError):
            acquire(fixture_path, inspection_path=fifo, timeout=10)
    finally:
        os.close(reader)


def test_concurrent_callers_and_a_slow_peer_hand_out_each_element_once(
    tmp_path: Path,
) -> None:
    path = tmp_path / "seq.jsonl"
    elements = [{"n": i} for i in range(200)]
    path.write_bytes(entry_line(request_hash(HELLO), responses=elements) + b"\n")
    got: list[Any] = []
    lock = threading.Lock()
    with acquire(path, timeout=5) as provider:
        slow = peer(provider)
        slow.sendall(complete_frame(HELLO)[:5])

        def worker() -> None:
            for _ in range(50):
                answer = provider.complete(HELLO)
                with lock:
                    got.append(answer["n"])

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        slow.close()
    assert sorted(got) == list(range(200))


def test_a_release_reaches_a_busy_copy_after_the_replies_it_is_owed(fixture_path: Path) -> None:
    provider = acquire(fixture_path, timeout=10)
    try:
        copy = peer(provider)
        copy.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        copy.sendall(complete_frame(BIG) * 3)  # more than its socket holds, unread
        time.sleep(0.2)
        releasing = threading.Thread(target=provider.release)
        releasing.start()
        time.sleep(0.1)  # the actor has ended the acquisition while the copy is full
        big = b'R{"content":"' + b"x" * (1 << 20) + b'"}'
        # The copy gets the replies the actor had answered, whole and in order, then
        # the goodbye (which a handle turns into ProviderClosed) for the rest: not a
        # bare close that looks like a crash.
        frames = [read_frame(copy)]
        while frames[-1] != protocol.GOODBYE:
            frames.append(read_frame(copy))
        assert 1 <= len(frames) - 1 <= 3
        assert frames[:-1] == [big] * (len(frames) - 1)
        copy.close()
        releasing.join(10)
    finally:
        provider.release()
