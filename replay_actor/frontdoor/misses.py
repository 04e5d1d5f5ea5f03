"""The miss reporter: every call ``run`` or ``serve`` could not answer from the fixture,
said on stderr as it happens, with what fixes it (docs/front-door.md, "Misses").

Runs in: the process that serves (``replay-actor run`` or ``serve``), on the front
door's event loop, called by the serving layer's ``on_failure`` hook after the provider
failed a call. It owns, for a replay or record manifest:

- what is said, once per distinct request (a retrying SDK asks again; the author needs
  to hear it once): for a miss, the hash, the nearest recorded request's differing paths
  (``ReplayMiss.nearest``, from ``authoring/explain.py``) and the exact ``replay-actor
  add`` command that answers it; for an exhausted sequence, the ``add --next`` command
  that gives it one more response;
- saving the missed request (its normalised neutral form) to the fixture's request
  sidecar (``files/sidecar.py``), so ``explain FIXTURE HASH`` and ``add`` need nothing
  written by hand;
- private data: no hash is printed and nothing is saved; the message says the hash is
  withheld and names the owner-only inspection record that holds it (or how to get one).

A reporter never raises: a diagnostic must not replace the failure it reports.
"""

from __future__ import annotations

import shlex
import sys
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, TextIO

from .._errors import ReplayError, ReplayMiss, RequestError, SequenceExhausted
from ..serving import ANSWER_PLACEHOLDER, MissHint
from ..serving import shown_path as _shown_path

if TYPE_CHECKING:
    from ..manifest import Manifest

__all__ = ["ANSWER_PLACEHOLDER", "MissReporter", "reporter_for"]

#: How many differing paths a miss line names (``explain`` names them all).
_PATHS_SHOWN: Final = 6
_PREFIX: Final = "replay-actor: "
_INDENT: Final = "  "


class MissReporter:
    """``MissReporter(fixture, private=False, inspection=None, stream=sys.stderr)``:
    call it as ``reporter(request, exc)`` for every failed call; it reports misses and
    exhausted sequences, once per distinct request, and ignores every other failure."""

    def __init__(
        self,
        fixture: str,
        *,
        private: bool = False,
        inspection: str | None = None,
        stream: TextIO | None = None,
    ) -> None:
        self.fixture = fixture
        self.private = private
        self.inspection = inspection
        #: What the HTTP error of each miss says to do, beside these lines: the same
        #: ``add`` command, for a framework that shows its user the error alone.
        self.hint = MissHint(fixture, private=private, inspection=inspection)
        self._stream = stream
        self._seen: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any], exc: BaseException) -> None:
        if not isinstance(exc, ReplayMiss | SequenceExhausted):
            return
        try:
            self._report(request, exc)
        except Exception:  # a diagnostic never replaces the failure it reports
            pass

    def _report(self, request: dict[str, Any], exc: ReplayMiss | SequenceExhausted) -> None:
        from .._request import canonical_request, request_hash

        try:
            canonical = canonical_request(request)
            digest = request_hash(request)
        except RequestError:  # pragma: no cover - the provider hashed it already
            return
        kind = "miss" if isinstance(exc, ReplayMiss) else "exhausted"
        with self._lock:
            if (kind, digest) in self._seen:
                return
            self._seen.add((kind, digest))
            if self.private:
                lines = self._private_lines(kind)
            else:
                lines = self._lines(kind, digest, canonical, exc)
            self._write(lines)

    def _lines(
        self, kind: str, digest: str, canonical: bytes, exc: ReplayMiss | SequenceExhausted
    ) -> list[str]:
        fixture = _shown_path(self.fixture)
        headline = str(exc).partition("\n")[0]
        lines = [f"{_PREFIX}{kind}: {headline}"]
        # The handle's explanation: the fixture's nearest entry (authoring/explain.py).
        nearest: Mapping[str, Any] | None = getattr(exc, "nearest", None)
        if nearest is not None:
            paths = list(nearest.get("paths", ()))
            more = len(paths) - _PATHS_SHOWN
            named = ", ".join(paths[:_PATHS_SHOWN]) + (f" and {more} more" if more > 0 else "")
            lines.append(
                f"{_INDENT}nearest recorded request {nearest['request_hash']} differs at: "
                f"{named or 'nothing (the same request)'}"
            )
        saved = self._save(digest, canonical)
        if saved is not None:
            lines.append(f"{_INDENT}{saved}")
        if kind == "miss":
            lines.append(f"{_INDENT}why: replay-actor explain {fixture} {digest}")
            lines.append(
                f"{_INDENT}fix:  replay-actor add {fixture} {digest} "
                f"--content {shlex.quote(ANSWER_PLACEHOLDER)}"
            )
        else:
            lines.append(f"{_INDENT}every response of its sequence was served; one more with:")
            lines.append(
                f"{_INDENT}fix:  replay-actor add {fixture} {digest} --next "
                f"--content {shlex.quote(ANSWER_PLACEHOLDER)}"
            )
        return lines

    def _save(self, digest: str, canonical: bytes) -> str | None:
        """Add the request to the sidecar; what to say about it (None: nothing new)."""
        from ..files.sidecar import SidecarWriter

        writer = SidecarWriter(self.fixture)
        try:
            added = writer.append(digest, canonical)
        except (ReplayError, OSError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc)
            return f"the request could not be saved to the request sidecar: {reason}"
        if added:
            return f"saved the request to {_shown_path(writer.path)}"
        return None

    def _private_lines(self, kind: str) -> list[str]:
        what = (
            "no replay fixture matches this request"
            if kind == "miss"
            else "replay sequence exhausted for this request"
        )
        lines = [f"{_PREFIX}{kind}: {what} (private data: the request hash is withheld)"]
        if self.inspection is not None:
            lines.append(
                f"{_INDENT}the hash (and the nearest recorded request) is in the owner-only "
                f"inspection record {_shown_path(self.inspection)}"
            )
        else:
            lines.append(
                f'{_INDENT}to see the hash, set inspection = "misses.jsonl" in the '
                "manifest's [provider] table: an owner-only record of every miss"
            )
        return lines

    def _write(self, lines: list[str]) -> None:
        stream = sys.stderr if self._stream is None else self._stream
        stream.write("\n".join(lines) + "\n")
        stream.flush()


def reporter_for(manifest: Manifest) -> MissReporter | None:
    """The reporter for a checked manifest: one for a replay or record manifest (they
    have a fixture), None for a live one."""
    if manifest.kind == "live" or manifest.fixture is None:
        return None
    return MissReporter(manifest.fixture, private=manifest.private, inspection=manifest.inspection)
