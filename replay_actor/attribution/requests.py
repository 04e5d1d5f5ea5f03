"""The requests behind two logs' hashes, read from both logs' request sidecars.

Runs in: the ``replay-actor compare`` process.

A hash is a request's identity, so its request is the same whichever log's sidecar holds
it: ``compare`` looks each hash up in both sidecars (the baseline's first). A log copied
without its sidecar, or a candidate whose sidecar was lost, is then grouped and explained
from the other side's wherever the two asked the same things; only requests neither
sidecar holds stay without lineage and without paths (docs/attribution.md).

Two streaming passes, each holding one line at a time: :meth:`Requests.shapes` keeps,
per wanted hash, one small integer per message (what conversation lineage and pairing
compare) and the question that names its sample; :meth:`Requests.fetch` keeps the split
requests of a few hashes (the first requests of samples left to pair by difference, the
calls where paired samples part).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from itertools import accumulate
from typing import Any, Final

import msgspec

from .._errors import ReplayError
from ..files.sidecar import REQUEST_FIELDS, read_sidecar
from .log import sidecar_of

__all__ = ["SHORT_TEXT", "Requests", "Shape", "question_of", "shorten"]

#: How long a sample's question is shown (the first user message, shortened).
SHORT_TEXT: Final = 60
_OTHER_FIELDS: Final = tuple(name for name in REQUEST_FIELDS if name not in ("messages", "scope"))


class Shape(msgspec.Struct, frozen=True, array_like=True):
    """What lineage and pairing need of one request: a number per message (equal
    messages, equal numbers), one per leading run of messages (``[0..1)``, ``[0..2)``…),
    and one for every other field but ``scope`` together."""

    messages: tuple[int, ...]
    prefixes: tuple[int, ...]
    rest: int


def _shape(split: Any) -> Shape:
    # Python's own hash of the canonical bytes: equal slices are equal numbers within
    # one process, and 64 bits keep a collision out of reach over a log's requests.
    messages = tuple(map(hash, map(bytes, split.messages)))
    prefixes = tuple(accumulate(messages, _chain, initial=0))[1:]
    rest = [
        tuple(map(bytes, value)) if type(value) is list else bytes(value)
        for name in _OTHER_FIELDS
        if (value := getattr(split, name)) is not msgspec.UNSET and value != []
    ]
    return Shape(messages, prefixes, hash(tuple(rest)))


def _chain(step: int, message: int) -> int:
    return hash((step, message))


class Requests:
    """The requests of two logs, by hash, from the sidecars of ``paths`` (run logs)."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.sidecars = [sidecar_of(path) for path in paths]
        #: Which sidecars exist (a log compared with a copy lacking its own: False).
        self.present = [os.path.isfile(path) for path in self.sidecars]

    def each(self, wanted: set[str]) -> Iterator[tuple[str, Any]]:
        """(hash, split request) of each wanted hash, once, from the first sidecar that
        holds it; unreadable or corrupt sidecars are passed over (paths unknown then)."""
        left = set(wanted)
        for path, present in zip(self.sidecars, self.present, strict=True):
            if not present or not left:
                continue
            try:
                for digest, split in read_sidecar(path, wanted=left):
                    if digest in left:
                        left.discard(digest)
                        yield digest, split
                        if not left:
                            return
            except (OSError, ReplayError):
                continue

    def shapes(self, wanted: set[str]) -> tuple[dict[str, Shape], dict[str, str | None]]:
        """The shape and the question of each wanted hash that a sidecar holds."""
        shapes: dict[str, Shape] = {}
        questions: dict[str, str | None] = {}
        asked: dict[int, str | None] = {}  # a first user message's number -> its text
        for digest, split in self.each(wanted):
            shapes[digest] = _shape(split)
            questions[digest] = _question(split, asked)
        return shapes, questions

    def fetch(self, wanted: set[str]) -> dict[str, Any]:
        """The split request of each wanted hash that a sidecar holds."""
        return dict(self.each(wanted))


def shorten(text: str, limit: int = SHORT_TEXT) -> str:
    """One line of at most ``limit`` characters (whitespace runs made one space)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, dict)]
        joined = " ".join(t for t in texts if isinstance(t, str))
        return joined or None
    return None


_USER: Final = b'"role":"user"'


def _question(split: Any, asked: dict[int, str | None]) -> str | None:
    """``question_of``, decoding each distinct first user message once: a sample's calls
    all share it. (In canonical bytes a role is ``"role":"user"`` exactly, and the same
    characters inside a string are escaped, so the search cannot be fooled.)"""
    for raw in split.messages:
        data = bytes(raw)
        if _USER in data:
            number = hash(data)
            if number not in asked:
                asked[number] = question_of(split)
            return asked[number]
    return question_of(split)


def question_of(split: Any) -> str | None:
    """The text that identifies a sample: its first request's first user message (else
    its first message with text; an embedding's first text, a completion's prompt),
    shortened; None when the request holds no text."""
    fallback: str | None = None
    for raw in split.messages:
        try:
            message = msgspec.json.decode(raw)
        except (msgspec.DecodeError, RecursionError):
            continue
        if not isinstance(message, dict):
            continue
        text = _text(message.get("content"))
        if text is None:
            continue
        if message.get("role") == "user":
            return shorten(text)
        fallback = fallback or text
    for name in ("prompt", "texts"):
        value = getattr(split, name, msgspec.UNSET)
        if value is msgspec.UNSET:
            continue
        try:
            decoded = msgspec.json.decode(value)
        except (msgspec.DecodeError, RecursionError):
            continue
        if isinstance(decoded, list) and decoded and isinstance(decoded[0], str):
            return shorten(decoded[0])
        if isinstance(decoded, str):
            return shorten(decoded)
    return None if fallback is None else shorten(fallback)
