"""The bounded, in-memory store of one serving object's batches: uploaded files, batch
objects and their results (docs/batches.md, "Bounds").

Runs in: the serving process (a transport's caller or the front door). One store per
``serving.Exchange``, so per front door or per transport, gone when it is; nothing is
written to disk. Thread-safe: a sync transport may be shared by threads.

Bounds: at most :data:`MAX_ITEMS` files and :data:`MAX_ITEMS` batches, and at most
:data:`MAX_BYTES` of file contents in all; past either, the oldest go first (a batch's
output files with them when they are the oldest). An id that went is answered 404 like
one never made.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any, Final

import msgspec

__all__ = ["MAX_BYTES", "MAX_ITEMS", "Store", "StoredFile"]

MAX_ITEMS: Final = 1024
#: 512 MiB: sixteen uploads at the front door's 32 MiB body bound.
MAX_BYTES: Final = 512 * 1024 * 1024


class StoredFile(msgspec.Struct):
    """One file: an upload, or a batch's output made here."""

    id: str
    filename: str
    purpose: str
    content: bytes
    created_at: int


class Store:
    """``Store(max_items=MAX_ITEMS, max_bytes=MAX_BYTES)``: files and batch objects by id."""

    def __init__(self, max_items: int = MAX_ITEMS, max_bytes: int = MAX_BYTES) -> None:
        self.max_items = max_items
        self.max_bytes = max_bytes
        self._files: OrderedDict[str, StoredFile] = OrderedDict()
        self._batches: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._bytes = 0
        self._serial = 0
        self._lock = threading.Lock()

    def new_id(self, prefix: str) -> str:
        """A fresh id: ``prefix`` and a serial number, unique in the store's life."""
        with self._lock:
            self._serial += 1
            return f"{prefix}{self._serial:024x}"

    def add_file(
        self, filename: str, purpose: str, content: bytes, file_id: str | None = None
    ) -> StoredFile:
        """Keep a file under ``file_id`` (a fresh ``file-`` id by default); ``ValueError``
        when it alone exceeds the byte bound."""
        if len(content) > self.max_bytes:
            raise ValueError(f"a file may hold at most {self.max_bytes} bytes here")
        made = file_id or self.new_id("file-")
        stored = StoredFile(made, filename, purpose, content, int(time.time()))
        with self._lock:
            self._files[stored.id] = stored
            self._bytes += len(content)
            while self._bytes > self.max_bytes or len(self._files) > self.max_items:
                _, gone = self._files.popitem(last=False)
                self._bytes -= len(gone.content)
        return stored

    def file(self, file_id: str) -> StoredFile | None:
        with self._lock:
            return self._files.get(file_id)

    def files(self) -> list[StoredFile]:
        with self._lock:
            return list(self._files.values())

    def delete_file(self, file_id: str) -> bool:
        with self._lock:
            gone = self._files.pop(file_id, None)
            if gone is not None:
                self._bytes -= len(gone.content)
            return gone is not None

    def put_batch(self, batch: dict[str, Any]) -> None:
        """Keep (or replace) a batch object under its ``id``."""
        with self._lock:
            self._batches[batch["id"]] = batch
            while len(self._batches) > self.max_items:
                self._batches.popitem(last=False)

    def batch(self, batch_id: str) -> dict[str, Any] | None:
        with self._lock:
            return self._batches.get(batch_id)

    def batches(self, prefix: str) -> list[dict[str, Any]]:
        """The batches whose id starts with ``prefix``, newest first."""
        with self._lock:
            return [b for i, b in reversed(self._batches.items()) if i.startswith(prefix)]

    def delete_batch(self, batch_id: str) -> bool:
        with self._lock:
            return self._batches.pop(batch_id, None) is not None
