"""The miss reporter: every call ``run`` or ``serve`` could not answer from the fixture,
said on stderr as it happens, with what fixes it (docs/front-door.md, "Misses").

Runs in: the process that serves (``replay-actor run`` or ``serve``), on the front
door's event loop, called by the serving layer's ``on_failure`` hook after the provider
failed a call. It owns, for a replay or record manifest:

- what is said, once per distinct request (a retrying SDK asks again; the author needs
  to hear it once): for a miss, the hash, the nearest recorded request's differing paths
  (``ReplayMiss.nearest``, from ``authoring/explain.py``) and the exact ``replay-actor
  add`` command that answers it (for a tool's HTTP exchange, also the form of a whole
  stored http response, docs/tools.md); for an exhausted sequence, the ``add --next``
  command that gives it one more response;
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

__all__ = ["ANSWER_ARGS", "ANSWER_PLACEHOLDER", "MissReporter", "reporter_for"]

#: The ``add`` arguments that give a missed request of a kind its answer, and a line saying
#: what the answer holds; a kind not named here answers text (``--content``).
ANSWER_ARGS: Final[dict[str, tuple[str, str]]] = {
    "mcp": (
        "--response ANSWER.json",
        'ANSWER.json: the MCP server\'s answer, {"result": {...}} or {"error": {...}} '
        "(docs/mcp.md)",
    ),
}
_CONTENT: Final = (f"--content {shlex.quote(ANSWER_PLACEHOLDER)}", "")
#: How many differing paths a miss line names (``explain`` names them all).
_PATHS_SHOWN: Final = 6
#: A tool's HTTP exchange is answered by a stored http response (docs/tools.md).
_HTTP_RESPONSE: Final = (
    '{"status": 200, "headers": [["content-type", "application/json"]], "text": "…"}'
)
_PREFIX: Final = "replay-actor: "
_INDENT: Final = "  "


def _incidental(host: Any) -> str:
    """The way out when a tool's missed request is incidental traffic, not a tool's."""
    return (
        f"or, if it is incidental (telemetry, an update check, a download): add "
        f'"{host}" to provider.ignore in the manifest '
        "(docs/front-door.md, 'Incidental traffic')"
    )


def _request_kind(request: Mapping[str, Any]) -> str:
    kind = request.get("kind")
    return kind if isinstance(kind, str) else "chat"


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
                lines = self._lines(kind, digest, canonical, exc, request)
            self._write(lines)

    def _lines(
        self,
        kind: str,
        digest: str,
        canonical: bytes,
        exc: ReplayMiss | SequenceExhausted,
        request: Mapping[str, Any],
    ) -> list[str]:
        headline, *advice = self._explained(
            kind, digest, exc, request, saved=self._save(digest, canonical)
        )
        return [f"{_PREFIX}{kind}: {headline}", *(f"{_INDENT}{line}" for line in advice)]

    def _explained(
        self,
        kind: str,
        digest: str,
        exc: ReplayMiss | SequenceExhausted,
        request: Mapping[str, Any],
        saved: str | None = None,
    ) -> list[str]:
        """The headline, the nearest recorded request when the handle named it, what was
        ``saved``, and the commands that explain and fix it (normal data)."""
        fixture = _shown_path(self.fixture)
        request_kind = _request_kind(request)
        lines = [str(exc).partition("\n")[0]]
        # The handle's explanation: the fixture's nearest entry (authoring/explain.py).
        nearest: Mapping[str, Any] | None = getattr(exc, "nearest", None)
        if nearest is not None:
            paths = list(nearest.get("paths", ()))
            more = len(paths) - _PATHS_SHOWN
            named = ", ".join(paths[:_PATHS_SHOWN]) + (f" and {more} more" if more > 0 else "")
            lines.append(
                f"nearest recorded request {nearest['request_hash']} differs at: "
                f"{named or 'nothing (the same request)'}"
            )
        if saved is not None:
            lines.append(saved)
        answer, note = ANSWER_ARGS.get(request_kind, _CONTENT)
        if kind == "miss":
            lines.append(f"why: replay-actor explain {fixture} {digest}")
            lines.append(f"fix:  replay-actor add {fixture} {digest} {answer}")
            if request_kind == "http":
                lines.append(
                    f"or:   replay-actor add {fixture} {digest} --response RESPONSE.json, "
                    f"a whole http response: {_HTTP_RESPONSE}"
                )
                lines.append(_incidental(request.get("host")))
        else:
            lines.append("every response of its sequence was served; one more with:")
            lines.append(f"fix:  replay-actor add {fixture} {digest} --next {answer}")
        if note:
            lines.append(note)
        return lines

    def advice(self, request: dict[str, Any], exc: ReplayMiss | SequenceExhausted) -> str:
        """What a miss or an exhausted sequence says to the caller that made it (a
        JSON-RPC error's message, say): the headline and the lines that explain and fix
        it, as the reporter prints them; in private mode no hash, only where it is kept.
        Saves nothing and prints nothing."""
        kind = "miss" if isinstance(exc, ReplayMiss) else "exhausted"
        if self.private:
            headline, *rest = self._private_lines(kind)
            headline = headline.removeprefix(f"{_PREFIX}{kind}: ")
            return "\n".join([headline, *(line.strip() for line in rest)])
        from .._request import request_hash

        return "\n".join(self._explained(kind, request_hash(request), exc, request))

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
