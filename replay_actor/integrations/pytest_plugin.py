"""The pytest plugin: a provider per test, from a marker or the ini file (docs/pytest.md).

pytest loads it through the ``pytest11`` entry point of replay-actor's package metadata.
It follows pytest-recording's conventions where they fit: a marker on the test (or its
module or class) says where the recording is, relative to the test file; an ini option
gives a default; one command-line option switches the whole run between replaying and
recording::

    @pytest.mark.replay(fixture="fixtures/chat.jsonl")
    def test_answer(replay_openai):
        replay_openai.chat.completions.create(model="m", messages=[...])

    pytest --replay-mode=record      # the manifest's [provider.live] answers what is missing

Fixtures: ``replay_provider`` (the provider itself), ``replay_openai`` and
``replay_anthropic`` (the vendors' SDK clients over that same provider). One acquisition
per test, released at its teardown. A miss or an exhausted sequence fails the test with
the exact message, even when the code under test swallowed the exception. At the end
the terminal summary has one line per fixture: calls, misses, exhausted sequences and
entries no test asked for.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

from .._errors import FixtureError, ManifestError, ReplayError, ReplayMiss, SequenceExhausted
from .._interface import complete_each
from .._request import RequestLike, request_hash
from ..attribution.row import in_row
from ._private import acall_private, call_private

if TYPE_CHECKING:
    import anthropic
    import openai

    from .._interface import Provider
    from ..manifest import Manifest

__all__ = [
    "MODES",
    "provider_mapping",
    "switched_manifest",
    "pytest_addoption",
    "pytest_configure",
    "replay_anthropic",
    "replay_openai",
    "replay_provider",
    "pytest_runtest_makereport",
    "pytest_terminal_summary",
]

MODES: Final = ("replay", "record", "live")
_MARKER: Final = "replay"
_INI: Final = "replay_manifest"
_MARKER_KEYS: Final = frozenset({"manifest", "fixture", "private"})


# -- configuration ---------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("replay-actor", "replay-actor: model answers from a frozen fixture")
    group.addoption(
        "--replay-mode",
        choices=MODES,
        default=None,
        help="override every manifest's kind for this run: replay (answer from the fixture "
        "only), record (ask the manifest's live model for what is missing and append it), "
        "live (ask the live model for everything)",
    )
    parser.addini(
        _INI,
        "manifest for tests that use a replay fixture but have no @pytest.mark.replay "
        "(relative to the ini file)",
        default=None,
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "replay(manifest=None, fixture=None, private=False): the replay-actor manifest or "
        "fixture for this test's replay_provider (relative to the test file)",
    )
    config.stash[_STATS] = {}


# -- choosing the provider --------------------------------------------------------------------


def provider_mapping(manifest: str | os.PathLike[str], mode: str | None) -> Mapping[str, Any]:
    """The manifest at ``manifest`` with its kind switched to ``mode`` (``None``: as
    is), in its mapping form (:func:`switched_manifest`)."""
    return switched_manifest(manifest, mode).as_dict()


def switched_manifest(manifest: str | os.PathLike[str], mode: str | None) -> Manifest:
    """The manifest at ``manifest`` (read once, checked) with its kind switched to
    ``mode`` (``None``: as is).

    A record manifest holds everything every mode needs (the fixture and the live
    table), so it switches to any; a replay manifest has no live model to ask and a live
    one no fixture, so switching those raises ``ManifestError``.
    """
    from ..manifest import Manifest, read_manifest

    read = read_manifest(manifest)
    if mode is None or mode == read.kind:
        return read
    if read.kind == "record":
        if mode == "replay":
            return Manifest(
                kind="replay",
                fixture=read.fixture,
                data=read.data,
                ceilings=read.ceilings,
                log=read.log,
            )
        return Manifest(kind="live", live=read.live, log=read.log)
    if read.kind == "replay":
        raise ManifestError(
            f"--replay-mode={mode} needs a record manifest (its [provider.live] table says "
            f"which model to ask); {os.fspath(manifest)} is a replay manifest",
            key="provider.kind",
        )
    raise ManifestError(
        f"--replay-mode={mode} needs a fixture; {os.fspath(manifest)} is a {read.kind} manifest",
        key="provider.kind",
    )


def _source(request: pytest.FixtureRequest) -> tuple[Manifest, str]:
    """The manifest for this test and the name its summary line goes under."""
    from ..manifest import Manifest

    mode: str | None = request.config.getoption("--replay-mode")
    marker = request.node.get_closest_marker(_MARKER)
    if marker is not None:
        if marker.args:
            raise pytest.UsageError("@pytest.mark.replay takes keywords: manifest= or fixture=")
        unknown = sorted(set(marker.kwargs) - _MARKER_KEYS)
        if unknown:
            raise pytest.UsageError(f"@pytest.mark.replay got an unknown keyword {unknown[0]}")
        manifest = marker.kwargs.get("manifest")
        fixture = marker.kwargs.get("fixture")
        if (manifest is None) == (fixture is None):
            raise pytest.UsageError(
                "@pytest.mark.replay needs exactly one of manifest= or fixture="
            )
        here = request.path.parent
        if fixture is not None:
            if mode not in (None, "replay"):
                raise pytest.UsageError(
                    f"--replay-mode={mode} needs a record manifest: "
                    "@pytest.mark.replay(fixture=...) can only replay"
                )
            path = here / fixture
            private = bool(marker.kwargs.get("private"))
            replay = Manifest(
                kind="replay", fixture=str(path), data="private" if private else "normal"
            )
            return replay, _display(request.config, path)
        if "private" in marker.kwargs:
            raise pytest.UsageError('with manifest=, set data = "private" in the manifest')
        return _from_manifest(request.config, here / manifest, mode)
    ini: str | None = request.config.getini(_INI)
    if not ini:
        raise pytest.UsageError(
            f"{request.node.nodeid} uses a replay fixture but has no @pytest.mark.replay("
            f"manifest=... | fixture=...) and no {_INI} in the ini file"
        )
    folder = request.config.inipath.parent if request.config.inipath else request.config.rootpath
    return _from_manifest(request.config, folder / ini, mode)


def _from_manifest(config: pytest.Config, path: Path, mode: str | None) -> tuple[Manifest, str]:
    manifest = switched_manifest(path, mode)
    fixture = manifest.fixture
    if manifest.kind == "record" and fixture is not None:
        # As pytest-recording creates its cassette folder: recording starts from nothing.
        os.makedirs(os.path.dirname(fixture), exist_ok=True)
    name = _display(config, Path(fixture)) if fixture is not None else _display(config, path)
    return manifest, name


def _display(config: pytest.Config, path: Path) -> str:
    try:
        return str(path.resolve().relative_to(config.rootpath.resolve()))
    except ValueError:
        return str(path)


# -- counting ------------------------------------------------------------------------------------


@dataclass
class _Stats:
    """One fixture's counters over the whole run."""

    kind: str = "replay"
    calls: int = 0
    misses: int = 0
    exhausted: int = 0
    recorded: int = 0
    entries: int = 0
    used: set[str] = field(default_factory=set)

    def line(self, name: str) -> str:
        words = [f"{self.calls} calls", f"{self.misses} misses"]
        words.append(f"{self.exhausted} exhausted sequences")
        if self.kind == "record":
            words.append(f"{self.recorded} recorded")
        if self.kind != "live":
            words.append(f"{max(self.entries - len(self.used), 0)} unused entries")
        return f"{name} ({self.kind}): " + ", ".join(words)


_STATS: Final = pytest.StashKey[dict[str, _Stats]]()
_FAILURES: Final = pytest.StashKey[list[str]]()
#: How many of the item's failures a report has already shown (each is shown once).
_REPORTED: Final = pytest.StashKey[int]()


class _Counted:
    """The test's provider, counting what it answers and remembering each failure.

    A miss must fail the test even when the code under test catches it (an SDK turns it
    into its own exception, an application retries or falls back): the message is kept
    and the report hook fails the test with it. Hit hashes are kept as a set, so that
    entries no test asked for can be counted; nothing is printed from them.

    In private mode a failure is raised afresh (``_private.call_private``): the
    provider's frames (whose locals hold the request hash) and the original exception
    never reach pytest's report, even with ``--showlocals``.
    """

    def __init__(
        self, provider: Provider, stats: _Stats, failures: list[str], test: str | None = None
    ) -> None:
        self._provider = provider
        self._stats = stats
        self._failures = failures
        # The test is the call's eval row in a run log (docs/attribution.md).
        self._row = None if test is None else {"test": test}

    def _failed(self, exc: ReplayMiss | SequenceExhausted) -> None:
        if isinstance(exc, ReplayMiss):
            self._stats.misses += 1
        else:
            self._stats.exhausted += 1
        self._failures.append(str(exc))

    def _served(self, request: RequestLike) -> None:
        if self._stats.kind != "live":
            self._stats.used.add(request_hash(request))

    def complete(self, request: RequestLike) -> dict[str, Any]:
        self._stats.calls += 1
        with in_row(self._row):
            answer = call_private(lambda: self._provider.complete(request), self._failed)
        self._served(request)
        return answer

    def complete_many(self, requests: Iterable[RequestLike]) -> list[dict[str, Any] | ReplayError]:
        return complete_each(self.complete, requests)

    async def acomplete(self, request: RequestLike) -> dict[str, Any]:
        self._stats.calls += 1
        with in_row(self._row):
            answer = await acall_private(lambda: self._provider.acomplete(request), self._failed)
        self._served(request)
        return answer

    def snapshot(self) -> dict[str, Any]:
        return self._provider.snapshot()

    def inspect(self) -> dict[str, Any]:
        inspect = getattr(self._provider, "inspect", None)
        if inspect is None:
            raise AttributeError(f"a {self._stats.kind} provider has no inspect()")
        result: dict[str, Any] = inspect()
        return result

    @property
    def closed(self) -> bool:
        return self._provider.closed

    def release(self) -> None:
        self._provider.release()

    def __enter__(self) -> _Counted:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"<replay_provider {self._provider!r}>"


# -- fixtures and hooks --------------------------------------------------------------------------


@pytest.fixture
def replay_provider(request: pytest.FixtureRequest) -> Iterator[Provider]:
    """This test's provider (one acquisition), from its marker or the ini option."""
    from ..manifest import open_provider

    manifest, name = _source(request)
    rejected: str | None = None
    try:
        provider = open_provider(manifest)
    except FixtureError as exc:
        # The rejection names the rule and the line only (docs/privacy.md); the path the
        # user gave belongs in the error too, or a typo in a marker cannot be found.
        rejected = f"{exc} (fixture: {manifest.fixture or '?'})"
    if rejected is not None:
        pytest.fail(f"replay-actor: {rejected}", pytrace=False)
    all_stats = request.config.stash[_STATS]
    stats = all_stats.get(name)
    snapshot = provider.snapshot()
    if stats is None:
        stats = all_stats[name] = _Stats(kind=snapshot["kind"])
    failures: list[str] = []
    request.node.stash[_FAILURES] = failures
    request.node.stash[_REPORTED] = 0
    counted = _Counted(provider, stats, failures, request.node.nodeid)
    try:
        yield counted
    finally:
        try:
            if stats.kind != "live":
                after = provider.snapshot()
                stats.entries = max(stats.entries, int(after.get("entries", 0)))
                stats.recorded += int(after.get("recorded", 0))
        finally:
            provider.release()


@pytest.fixture
def replay_openai(replay_provider: Provider) -> Iterator[openai.OpenAI]:
    """An ``openai.OpenAI`` answered by this test's ``replay_provider``."""
    import httpx2
    import openai

    from .sdk import PLACEHOLDER_KEY
    from .transport import ProviderTransport

    transport = ProviderTransport(replay_provider, "openai", release_on_close=False)
    client = openai.OpenAI(api_key=PLACEHOLDER_KEY, http_client=httpx2.Client(transport=transport))
    with client:
        yield client


@pytest.fixture
def replay_anthropic(replay_provider: Provider) -> Iterator[anthropic.Anthropic]:
    """An ``anthropic.Anthropic`` answered by this test's ``replay_provider``."""
    import anthropic
    import httpx2

    from .sdk import PLACEHOLDER_KEY
    from .transport import ProviderTransport

    transport = ProviderTransport(replay_provider, "anthropic", release_on_close=False)
    client = anthropic.Anthropic(
        api_key=PLACEHOLDER_KEY, http_client=httpx2.Client(transport=transport)
    )
    with client:
        yield client


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    failures = item.stash.get(_FAILURES, None)
    if not failures:
        return
    report: pytest.TestReport = outcome.get_result()  # type: ignore[attr-defined]
    reported = item.stash.get(_REPORTED, 0)
    fresh = failures[reported:]
    item.stash[_REPORTED] = len(failures)
    if not fresh or report.failed:
        return
    if report.skipped and hasattr(report, "wasxfail"):
        return  # an expected failure (xfail) stays expected
    # The code under test swallowed the failure, in any phase: a fixture's setup, the
    # test, a fixture's teardown. The test must neither pass nor be skipped on it.
    report.outcome = "failed"
    report.longrepr = "replay-actor: " + "\nreplay-actor: ".join(fresh)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    stats = terminalreporter.config.stash.get(_STATS, {})
    if not stats:
        return
    terminalreporter.write_sep("-", "replay-actor")
    for name in sorted(stats):
        terminalreporter.write_line(stats[name].line(name))
