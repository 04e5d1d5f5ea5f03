"""``Channel``'s writes and reads. The write a crowded handle makes while keeping the
GIL (``held.send_now``, ``send_frame(hold=True)``) writes what fits, never waits, and
leaves the rest (and any error) to the ordinary write; a large message is read whole
however it arrives."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator

import pytest

from replay_actor.replay.io.held import send_now
from replay_actor.replay.io.wire import Channel, frame, set_timeouts

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    yield ours, theirs
    ours.close()
    theirs.close()


def read_exactly(sock: socket.socket, size: int) -> bytes:
    got = bytearray()
    while len(got) < size:
        chunk = sock.recv(size - len(got))
        assert chunk, "the peer closed early"
        got += chunk
    return bytes(got)


def fill(sock: socket.socket) -> int:
    """Write until the socket's buffer is full; how many bytes went in."""
    sock.setblocking(False)
    total = 0
    try:
        while True:
            total += sock.send(b"f" * 65536)
    except BlockingIOError:
        pass
    sock.setblocking(True)
    return total


def test_a_request_frame_goes_out_whole_and_unchanged(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = pair
    data = frame(os.urandom(17_000))
    assert send_now(ours.fileno(), data) == len(data)
    assert read_exactly(theirs, len(data)) == data


def test_a_full_buffer_gets_nothing_and_no_wait(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, theirs = pair
    filled = fill(ours)
    # A blocking socket with no timeout: a write that waited would wait for ever (and
    # the test's timeout would fail it); send_now returns at once instead.
    assert send_now(ours.fileno(), b"x" * 100) == 0
    assert len(read_exactly(theirs, filled)) == filled
    theirs.setblocking(False)
    with pytest.raises(BlockingIOError):
        theirs.recv(1)  # nothing of the refused write went out


def test_a_frame_larger_than_the_buffer_is_finished_by_the_ordinary_write(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = pair
    set_timeouts(ours, 20.0)
    data = frame(os.urandom(4 * 1024 * 1024))
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(read_exactly(theirs, len(data))))
    reader.start()
    channel = Channel(os.dup(ours.fileno()))
    try:
        channel.send_frame(data, hold=True)
    finally:
        channel.close()
    reader.join(timeout=20)
    assert not reader.is_alive()
    assert received == [data]


def test_a_closed_peer_is_an_error_of_the_ordinary_write(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = pair
    theirs.close()
    assert send_now(ours.fileno(), b"lost") == 0  # EPIPE, and no SIGPIPE
    channel = Channel(os.dup(ours.fileno()))
    try:
        with pytest.raises(BrokenPipeError):
            channel.send_frame(frame(b"lost"), hold=True)
    finally:
        channel.close()


def test_a_closed_descriptor_gets_nothing() -> None:
    ours, theirs = socket.socketpair()
    fd = ours.detach()
    os.close(fd)
    theirs.close()
    assert send_now(fd, b"x") == 0


def test_a_closed_peer_never_raises_sigpipe_even_at_its_default_action() -> None:
    import subprocess
    import sys

    script = (
        "import signal, socket\n"
        "from replay_actor.replay.io.held import send_now\n"
        "signal.signal(signal.SIGPIPE, signal.SIG_DFL)\n"
        "a, b = socket.socketpair()\n"
        "b.close()\n"
        "print(send_now(a.fileno(), b'lost'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=20, check=False
    )
    assert (done.returncode, done.stdout) == (0, "0\n")


def test_a_large_message_arriving_in_pieces_is_received_whole(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    import time

    ours, theirs = pair
    big, small = os.urandom(3_000_000), b"after"
    stream = frame(big) + frame(small)

    def trickle() -> None:
        for start in range(0, len(stream), 700_001):
            ours.sendall(stream[start : start + 700_001])
            time.sleep(0.01)  # the reader runs dry between pieces

    writer = threading.Thread(target=trickle)
    writer.start()
    channel = Channel(os.dup(theirs.fileno()))
    try:
        assert channel.recv() == big
        assert channel.recv() == small
    finally:
        channel.close()
        writer.join(timeout=20)


def test_a_peer_gone_in_the_middle_of_a_large_message_is_eof(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = pair
    ours.sendall(frame(b"x" * 1_000_000)[:100_000])  # within the socket buffer
    ours.close()
    channel = Channel(os.dup(theirs.fileno()))
    try:
        with pytest.raises(EOFError):
            channel.recv()
    finally:
        channel.close()
