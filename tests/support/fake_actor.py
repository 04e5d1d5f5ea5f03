"""A fake cursor actor: a listener that answers every request with a wrong reply, for
the caller's side of the wire (a reply that does not answer its request breaks the
handle for good)."""

from __future__ import annotations

import os
import socket
import threading

from replay_actor import ReplayProvider
from replay_actor.replay.caller.handle import Acquired, _rebuild


class FakeActor:
    """A listener that answers every request with ``reply`` (a wrong one), counting."""

    def __init__(self, reply: bytes) -> None:
        self.address = b"\0replay-actor-test-" + os.urandom(8).hex().encode()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.address)
        self.listener.listen(8)
        self.reply = reply
        self.requests = 0
        self.peers: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.peers.append(conn)
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        while True:
            try:
                header = conn.recv(4, socket.MSG_WAITALL)
                if len(header) < 4:
                    return
                body = conn.recv(int.from_bytes(header, "big"), socket.MSG_WAITALL)
            except OSError:
                return
            self.requests += 1
            frames = [self.reply, b"R" + b'{"stale": true}']
            if body[:1] == b"Q":
                frames = [b"K"]
            try:
                # Two frames for one request: the second would answer the *next* one.
                for frame in frames:
                    conn.sendall(len(frame).to_bytes(4, "big") + frame)
            except OSError:
                return  # the test closed us

    def handle(self) -> ReplayProvider:
        return _rebuild(Acquired(self.address, 1, os.getpid(), False, 5.0))

    def close(self) -> None:
        self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        for peer in self.peers:
            peer.close()
