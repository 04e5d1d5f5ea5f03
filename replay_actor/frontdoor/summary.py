"""``replay-actor run``'s last word: the summary line and the exit status
(docs/front-door.md, "Nothing fails quietly").

Runs in: the ``run`` process, after COMMAND has exited and the front door has stopped.

The line, on stderr, always one::

    replay-actor: 3 served, 1 missed, 0 exhausted, 0 blocked; fixture sha256:…; sealed (namespace)

- the counts are :class:`~replay_actor.serving.Outcomes`; ``, N invalid``
  and ``, N failed`` follow ``blocked`` only when not zero;
- then what answered: ``fixture sha256:…`` (the fixture-set hash, docs/fixture-format.md)
  for a replay manifest, ``fixture sha256:… (N recorded)`` for a record manifest (the
  fixture as it is after the run), ``live ADAPTER MODEL`` for a live one;
- then, for a live or record manifest whose adapter retried calls (a 429, a 5xx, a
  timeout), ``N retries`` (``1 retry``): only when not zero, as ``invalid``;
- then the seal: ``sealed (namespace)``, ``sealed (proxy, best-effort)`` or ``not sealed``.

The status: COMMAND's when it is not 0; else 4 when any call failed closed (anything but
``served``), unless ``--allow-misses``; else 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ..serving import Kind, Outcomes

__all__ = ["EXIT_FAILED_CLOSED", "SEAL_WORDS", "exit_status", "summary_line"]

#: ``run``'s status when COMMAND exited 0 but a call failed closed.
EXIT_FAILED_CLOSED: Final = 4
#: The seal actually used -> how the summary says it.
SEAL_WORDS: Final = {
    "namespace": "sealed (namespace)",
    "proxy": "sealed (proxy, best-effort)",
    "off": "not sealed",
}

#: Shown after ``blocked`` only when not zero.
_SHOWN_WHEN_ANY: Final[tuple[Kind, ...]] = ("invalid", "failed")


def _source(snapshot: Mapping[str, Any] | None) -> str:
    if snapshot is None:
        return "fixture unknown (the acquisition was lost)"
    kind = snapshot.get("kind")
    if kind == "live":
        return f"live {snapshot.get('adapter')} {snapshot.get('model')}"
    source = f"fixture {snapshot.get('fixture_set_hash')}"
    if kind == "record":
        source += f" ({snapshot.get('recorded', 0)} recorded)"
    return source


def summary_line(outcomes: Outcomes, snapshot: Mapping[str, Any] | None, seal: str) -> str:
    """The summary line (no newline); ``snapshot`` is the provider's, None if lost."""
    counts = (
        f"{outcomes['served']} served, {outcomes['missed']} missed, "
        f"{outcomes['exhausted']} exhausted, {outcomes['blocked']} blocked"
    )
    for kind in _SHOWN_WHEN_ANY:
        if outcomes[kind]:
            counts += f", {outcomes[kind]} {kind}"
    retries = _retries(snapshot)
    return f"replay-actor: {counts}; {_source(snapshot)}{retries}; {SEAL_WORDS[seal]}"


def _retries(snapshot: Mapping[str, Any] | None) -> str:
    """``; N retries`` when the live side retried calls, else nothing."""
    count = snapshot.get("retries", 0) if snapshot is not None else 0
    if type(count) is not int or count <= 0:
        return ""
    return f"; {count} retr{'y' if count == 1 else 'ies'}"


def exit_status(command_status: int, outcomes: Outcomes, *, allow_misses: bool) -> int:
    """``run``'s exit status (the module docstring's rule)."""
    if command_status != 0 or allow_misses:
        return command_status
    return EXIT_FAILED_CLOSED if outcomes.failed_closed else 0
