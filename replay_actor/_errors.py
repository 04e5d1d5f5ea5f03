"""The exception tree: every failure replay-actor reports is one of these.

::

    ReplayError                      base: catch this to catch everything below
    ├── InvalidArgument (ValueError) a bad argument value (a timeout, a ceiling, a limit)
    ├── FixtureError                 a fixture was rejected (.reason, .line)
    ├── RequestError (ValueError)    the request is not a valid provider-neutral request
    ├── ReplayMiss                   no fixture entry matches the request (.request_hash,
    │                                .nearest: the nearest recorded request, if known)
    ├── SequenceExhausted            every element of the entry's sequence was served
    ├── ProviderClosed               closed by you: release() was called on this handle
    ├── ActorLost                    broken from outside: the cursor actor died or hung
    ├── OwnerNotAlive                acquiring for an owner process that is not alive
    ├── TooManyActors                a Supervisor's max_actors is reached
    ├── InspectionPathError          the inspection record path cannot be used
    ├── ControlMessageError          a malformed message between the caller, the zygote
    │   (ValueError)                 and a holder (internal: never reaches a caller)
    ├── ManifestError                the manifest is invalid (.key names the offending key)
    ├── ClockUnavailable             the manifest's clock cannot be given to run's COMMAND
    │                                here (no usable libfaketime)
    ├── LiveProviderError            the live model endpoint failed (.status, if any)
    └── RecordingError               record mode cannot keep an answer or recover a journal
        └── RecordingLocked          another recorder holds the fixture's lock

``ProviderClosed`` and ``ActorLost`` are deliberately distinct, as trio separates a
resource closed by its owner from one broken from outside: the first is a bug in the
caller's lifecycle, the second an environmental failure worth a retry of the whole run.

Boundaries. ``FixtureError`` carries only a reason code and a line number, whatever was
on the line. ``ReplayMiss`` and ``SequenceExhausted`` carry the request hash in normal
mode and no hash at all in private mode. Neither ever holds a chained exception: they are
raised outside any ``except`` block so ``__context__`` stays empty.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = [
    "FIXTURE_REASONS",
    "ActorLost",
    "ClockUnavailable",
    "ControlMessageError",
    "FixtureError",
    "InspectionPathError",
    "InvalidArgument",
    "LiveProviderError",
    "ManifestError",
    "OwnerNotAlive",
    "ProviderClosed",
    "RecordingError",
    "RecordingLocked",
    "ReplayError",
    "ReplayMiss",
    "RequestError",
    "SequenceExhausted",
    "TooManyActors",
]

#: Every reason code a fixture rejection can carry, in priority order: when one line
#: breaks several rules, the first of these is reported (docs/fixture-format.md).
FIXTURE_REASONS: Final[tuple[str, ...]] = (
    "file_missing",
    "file_unreadable",
    "not_regular_file",
    "file_too_large",
    "line_too_long",
    "invalid_utf8",
    "invalid_json",
    "unsupported_number",
    "nesting_too_deep",
    "not_an_object",
    "duplicate_key",
    "unknown_key",
    "missing_schema_version",
    "unsupported_schema_version",
    "missing_request_hash",
    "invalid_request_hash",
    "missing_response",
    "conflicting_response",
    "invalid_response",
    "invalid_responses",
    "too_many_responses",
    "response_too_large",
    "duplicate_request_hash",
    "too_many_entries",
)
_REASON_SET: Final = frozenset(FIXTURE_REASONS)


class ReplayError(Exception):
    """Base class of every error replay-actor raises."""


class InvalidArgument(ReplayError, ValueError):
    """An argument's value is out of its domain (a timeout that is not a positive
    finite number, a ceiling out of range, ``max_actors`` below one)."""


class FixtureError(ReplayError):
    """A fixture was rejected; only the rule (``reason``) and the ``line`` cross over.

    ``line`` is the 1-based line number in the file, or ``None`` for a rule about the
    whole file (missing, unreadable, not a regular file, too large).
    """

    reason: str
    line: int | None

    def __init__(self, reason: str, line: int | None = None) -> None:
        if reason not in _REASON_SET:
            # A programming error inside replay-actor; never built from fixture bytes.
            raise ValueError(f"unknown fixture rejection reason {reason!r}")
        if line is not None and (type(line) is not int or line < 1):
            raise ValueError("line must be a positive int or None")
        super().__init__(reason, line)
        self.reason = reason
        self.line = line

    def __str__(self) -> str:
        if self.line is None:
            return f"fixture rejected: {self.reason}"
        return f"fixture rejected: {self.reason} at line {self.line}"

    def __repr__(self) -> str:
        return f"FixtureError({self.reason!r}, {self.line!r})"

    def __reduce__(self) -> tuple[type[FixtureError], tuple[str, int | None]]:
        return (FixtureError, (self.reason, self.line))


class RequestError(ReplayError, ValueError):
    """The request is not a valid provider-neutral request (docs/fixture-format.md).

    The message says what is wrong and where (a JSON path such as
    ``$.messages[0].role``); it never contains a request hash.
    """


class _HashedError(ReplayError):
    """Shared shape of the two per-request failures: a fixed message plus, in normal
    mode only, the request hash."""

    _base_message: str = ""
    request_hash: str | None

    def __init__(self, request_hash: str | None = None) -> None:
        if request_hash is None:
            super().__init__(self._base_message)
        else:
            super().__init__(f"{self._base_message} (request_hash: {request_hash})")
        self.request_hash = request_hash

    def __reduce__(self) -> tuple[type[_HashedError], tuple[Any, ...]]:
        return (type(self), (self.request_hash,))


class ReplayMiss(_HashedError):
    """No fixture entry matches the request.

    ``request_hash`` is the hash to add to the fixture, or ``None`` in private mode
    (read it from ``provider.inspect()`` or the inspection record instead).

    ``nearest`` (normal mode, when the fixture has a request sidecar) names the nearest
    recorded request and the JSON paths where this one differs, without their values:
    ``{"request_hash": "sha256:…", "paths": ["messages[3].content", …]}``; the message
    gains one line saying the same. ``None`` without a sidecar, and always in private
    mode, where the explanation goes to the inspection record instead.
    """

    _base_message = "no replay fixture matches this request"
    nearest: dict[str, Any] | None

    def __init__(
        self, request_hash: str | None = None, nearest: dict[str, Any] | None = None
    ) -> None:
        super().__init__(request_hash)
        # Private mode (no hash) carries nothing more, whatever the caller passed.
        self.nearest = None if request_hash is None else nearest
        if self.nearest is not None:
            self.args = (f"{self.args[0]}\n{_nearest_line(self.nearest)}",)

    def __reduce__(self) -> tuple[type[_HashedError], tuple[Any, ...]]:
        return (ReplayMiss, (self.request_hash, self.nearest))


#: How many differing paths the message names before summing up the rest.
_PATHS_SHOWN: Final = 8


def _nearest_line(nearest: dict[str, Any]) -> str:
    paths: list[str] = list(nearest["paths"])
    head = f"nearest recorded request {nearest['request_hash']}"
    if not paths:
        return f"{head} is this very request: its fixture entry is missing"
    shown = ", ".join(paths[:_PATHS_SHOWN])
    if len(paths) > _PATHS_SHOWN:
        shown += f" and {len(paths) - _PATHS_SHOWN} more"
    return f"{head} differs at: {shown}"


class SequenceExhausted(_HashedError):
    """The entry's ``responses`` sequence was consumed; nothing is reused.

    ``request_hash`` as for :class:`ReplayMiss`.
    """

    _base_message = "replay sequence exhausted for this request"


class ProviderClosed(ReplayError):
    """The provider was released (by this handle or, for a copy, by the acquirer)."""


class ActorLost(ReplayError):
    """The cursor actor died, or did not answer within the handle's timeout.

    The handle is broken from then on: every later call raises ``ActorLost`` too.
    """


class OwnerNotAlive(ReplayError):
    """``acquire`` was asked to watch an owner process that is not alive (or a zombie)."""


class TooManyActors(ReplayError):
    """A ``Supervisor`` already runs ``max_actors`` acquisitions: release one first."""


class InspectionPathError(ReplayError):
    """The inspection record path cannot be used (a symbolic link, not a regular file,
    or not writable); the message names the problem, not the file's content."""


class ControlMessageError(ReplayError, ValueError):
    """A control message (an actor request to the zygote or a holder, or its reply) is
    malformed (``replay/core/control.py``). Internal: the zygote and the holders drop
    such a request, and the caller turns such a reply into ``ActorLost``."""


class ManifestError(ReplayError):
    """The manifest is invalid; ``key`` names the offending key (dotted), if any."""

    key: str | None

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key

    def __reduce__(self) -> tuple[type[ManifestError], tuple[str, str | None]]:
        return (ManifestError, (str(self), self.key))


class ClockUnavailable(ReplayError):
    """``replay-actor run`` cannot start COMMAND's clock at the manifest's
    ``provider.clock`` here: no usable libfaketime (the message says what was tried and
    what to install; docs/front-door.md, "The clock"). Nothing was started."""


class LiveProviderError(ReplayError):
    """The live endpoint failed: transport error, timeout, bad status or bad body.

    The message never contains the API key or the prompt; ``status`` is the last HTTP
    status seen, or ``None`` when no response arrived.
    """

    status: int | None

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status

    def __reduce__(self) -> tuple[type[LiveProviderError], tuple[str, int | None]]:
        return (LiveProviderError, (str(self), self.status))


class RecordingError(ReplayError):
    """Record mode cannot keep a live answer, or cannot recover its journal; the message
    says what to do (nothing was written that would leave the fixture invalid)."""


class RecordingLocked(RecordingError):
    """Another recorder (this process or another) holds the fixture's lock."""
