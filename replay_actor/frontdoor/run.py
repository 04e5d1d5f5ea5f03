"""``replay-actor run MANIFEST -- COMMAND``: the front door in this process, COMMAND as
its child (docs/front-door.md).

Runs in: the ``run`` process, all on its main thread: the event loop serves the front
door, and the child is spawned from that same thread (``PR_SET_PDEATHSIG`` follows the
*thread* that created the child, and the main thread lives as long as the process).
This module owns

- the seal chosen (:data:`SEALS`): a replay manifest's default is the namespace
  (:mod:`.seal`), falling back to the proxy variables (:mod:`.proxy`) where this system
  cannot make one; ``--seal namespace`` refuses to start there instead (exit 1); live
  and record manifests default to ``off``;
- the child's environment (built by :mod:`.environment`, the real key read by
  ``open_provider`` *before* it is built), with the ecosystem's offline and
  no-telemetry switches (:mod:`.switches`) and, for a manifest with ``clock``,
  COMMAND's own clock (:mod:`.clock`: its library found and tried before anything
  starts);
- the world frozen: for a replay or record manifest, the run's certificate authority
  (:mod:`.authority`, removed when ``run`` ends) and the proxy's tool exchanges
  (:mod:`.tools`): the child's proxy variables point at the front door whatever the
  seal, and its trust variables at the run's bundle (docs/tools.md);
- each miss said on stderr as it happens, by :mod:`.misses`'s reporter;
- fate-sharing: the child is sent SIGTERM if ``run`` dies (the parent-death signal, set
  in the child between fork and exec by a ``preexec_fn`` whose calls are resolved before
  the fork, so the other threads of this process (the library's reaper) hold nothing it
  needs); the acquisition dies with ``run`` too, since the cursor actor watches this
  process, and the server is gone with the process;
- signals: SIGINT, SIGTERM and SIGHUP sent to ``run`` are forwarded to the child, and
  ``run`` goes on until the child exits; a record manifest's journal is also folded
  into the fixture at SIGINT and SIGTERM (``compact()``, in a worker thread while the
  front door goes on serving), so a run stopped that way leaves a complete fixture on
  disk even if it is then killed;
- the exit status, as a shell gives it: the child's, a signal death as 128 + N; 127
  when COMMAND cannot be found, 126 when it cannot be executed (no permission, not an
  executable format, a missing interpreter); then :mod:`.summary`'s rule (4 when a call
  failed closed) and its line on stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from .._errors import ReplayError
from .clock import Clock, prepare_clock
from .environment import child_environment, foreign_key_warning
from .misses import reporter_for
from .proxy import blocked_advice
from .seal import NamespaceSeal, SealUnavailable
from .server import DEFAULT_HOST, FrontDoor, tune_collector
from .sockets import warning as sockets_warning
from .summary import exit_status, summary_line
from .switches import switch_variables

if TYPE_CHECKING:
    import socket

    from .._interface import Provider
    from ..manifest import Manifest, ManifestLike
    from .tools import ToolSettings

__all__ = [
    "SEALS",
    "ChildWorld",
    "RunOptions",
    "exec_failure",
    "run_command",
    "secret_names",
]

#: ``--seal``'s choices.
SEALS: Final = ("namespace", "proxy", "off")
#: NO_PROXY inside a namespace: all of its loopback is the child's own (the front door,
#: and any server the child starts there).
_NAMESPACE_NO_PROXY: Final = "127.0.0.1,localhost,::1"

_PR_SET_PDEATHSIG: Final = 1
_FORWARDED: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def secret_names(manifest: Manifest) -> set[str]:
    """The ``api_key_env`` names the manifest's adapter table uses (a live manifest's
    ``[provider]``, a record manifest's ``[provider.live]``): the variables whose values
    must not reach the child."""
    name = None if manifest.live is None else manifest.live.options.get("api_key_env")
    return {name} if isinstance(name, str) else set()


def _parent_death_hook(parent: int) -> Callable[[], None]:
    # Resolved before the fork: the child only calls it (no import, no allocation of note).
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0)
        # run may have died between fork and prctl: then no signal would ever come.
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGTERM)

    return hook


def _status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def exec_failure(
    command: Sequence[str], env: Mapping[str, str], exc: OSError, prog: str = "replay-actor run"
) -> int:
    """The shell's status and message (on stderr, after ``prog``) for a command that could
    not be executed."""
    name = command[0]
    if isinstance(exc, FileNotFoundError | NotADirectoryError):
        if shutil.which(name, path=env.get("PATH", os.defpath)) is None:
            print(f"{prog}: {name}: command not found", file=sys.stderr)
            return 127
        # The file is there: its interpreter (#!) is not.
        print(f"{prog}: {name}: bad interpreter", file=sys.stderr)
        return 126
    reason = exc.strerror or type(exc).__name__
    print(f"{prog}: {name}: cannot execute: {reason}", file=sys.stderr)
    return 126


@dataclass
class _Child:
    """The spawned child, and its namespace's listener (when it has one)."""

    proc: asyncio.subprocess.Process
    listener: socket.socket | None = None


@dataclass(frozen=True)
class ChildWorld:
    """What COMMAND's world is made of beside the front door: the secrets kept from its
    environment (their names), its clock (``provider.clock``) and the tools' settings
    (their authority, for the trust variables) when the run freezes tools."""

    secret_names: set[str]
    clock: Clock | None = None
    tools: ToolSettings | None = None


class _Launch:
    """How to start COMMAND under the chosen seal: ``await spawn()`` is the child, or
    an exit status when there is none to run; ``seal`` is then the seal it got (or was
    to get), ``refused`` whether ``--seal namespace`` refused to start."""

    def __init__(
        self, door: FrontDoor, command: Sequence[str], seal: str, child: ChildWorld
    ) -> None:
        self._door = door
        self._command = command
        self._secrets = child.secret_names
        self._wanted = seal  # namespace, auto (namespace, else proxy), proxy or off
        self._tools = child.tools
        self.seal = "namespace" if seal == "auto" else seal
        self.refused = False
        self.clock = child.clock

    def environment(self, seal: str) -> dict[str, str]:
        # Only the front door: the host's other loopback services are not the child's.
        door_only = f"{self._door.url.removeprefix('http://')},localhost:{self._door.address[1]}"
        no_proxy = {"namespace": _NAMESPACE_NO_PROXY, "proxy": door_only}.get(seal)
        trust = None
        if self._tools is not None:
            # Frozen tools: every other host's exchange comes through the front door; the
            # loopback a namespace gives the child is reached directly, so a recording
            # leaves it alone too (docs/tools.md, "Which requests").
            no_proxy = no_proxy or _NAMESPACE_NO_PROXY
            trust = self._tools.authority.variables()
        env = child_environment(
            os.environ, self._door.info, self._secrets, no_proxy=no_proxy, trust=trust
        )
        env.update(switch_variables(os.environ, sealed=seal != "off"))
        if self.clock is not None:
            # Taken last, just before the spawn: the offset is counted from now.
            Clock.scrub(env)
            env.update(self.clock.variables(env))
        return env

    async def _exec(self, env: dict[str, str], hook: Callable[[], None]) -> Any:
        return await asyncio.create_subprocess_exec(*self._command, env=env, preexec_fn=hook)

    async def spawn(self) -> _Child | int:
        death = _parent_death_hook(os.getpid())
        if self._wanted in ("namespace", "auto"):
            got = await self._spawn_in_namespace(death)
            if not isinstance(got, SealUnavailable):
                return got
            if self._wanted == "namespace":
                self.refused = True
                print(
                    f"replay-actor run: error: cannot seal COMMAND in a network namespace "
                    f"here ({got}); --seal proxy seals it with proxy variables "
                    "(best-effort), --seal off does not seal it",
                    file=sys.stderr,
                )
                return 1
            print(
                f"replay-actor run: note: no network namespace here ({got}); "
                "sealed with proxy variables instead (best-effort)",
                file=sys.stderr,
            )
            self.seal = "proxy"
        env = self.environment(self.seal)
        try:
            return _Child(await self._exec(env, death))
        except OSError as exc:
            return exec_failure(self._command, env, exc)

    async def _spawn_in_namespace(
        self, death: Callable[[], None]
    ) -> _Child | int | SealUnavailable:
        env = self.environment("namespace")
        namespace = NamespaceSeal(*self._door.address)
        try:
            try:
                proc = await self._exec(env, namespace.hook(death))
            except subprocess.SubprocessError:  # the hook raised: nothing was executed
                try:
                    namespace.listener().close()
                except SealUnavailable as exc:
                    return exc
                return SealUnavailable("the child's set-up failed")
            except OSError as exc:  # sealed, then exec failed: the socket came over
                with contextlib.suppress(SealUnavailable):
                    namespace.listener().close()
                return exec_failure(self._command, env, exc)
            try:
                child = _Child(proc, namespace.listener())
            except SealUnavailable:  # pragma: no cover - the hook hands it over before exec
                proc.kill()  # our own child, by its PID
                await proc.wait()
                raise RuntimeError("the sealed child did not hand over its socket") from None
            if namespace.unhidden:
                print(sockets_warning(namespace.unhidden), file=sys.stderr)
            return child
        finally:
            namespace.close()


async def _run(door: FrontDoor, launch: _Launch, compact: Callable[[], None] | None) -> int:
    loop = asyncio.get_running_loop()
    # The handlers go in before the child starts: a signal sent to run while the front
    # door starts is the child's too, not run's death (it waits for the child).
    forwarder = _Forwarder(compact)
    for sig in _FORWARDED:
        loop.add_signal_handler(sig, forwarder.signalled, sig)
    try:
        child = await launch.spawn()
        if isinstance(child, int):
            return child
        proc = child.proc
        forwarder.attach(proc)
        try:
            # The child may already be asking: its requests wait in the listening
            # socket's queue until the server accepts them.
            await door.start(child.listener)
        except BaseException:
            if proc.returncode is None:
                proc.kill()  # our own child, by its PID
            await proc.wait()
            raise
        status = _status(await proc.wait())
        if launch.clock is not None:
            launch.clock.clean_up(proc.pid)
        return status
    finally:
        for sig in _FORWARDED:
            loop.remove_signal_handler(sig)


_COMPACTING_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)


class _Forwarder:
    """Sends each forwarded signal to the child; one that came before the child existed
    is sent as soon as it does. At SIGINT and SIGTERM it also starts ``compact`` (a
    recorder's) in a worker thread, unless one is still running."""

    def __init__(self, compact: Callable[[], None] | None = None) -> None:
        self._proc: asyncio.subprocess.Process | None = None
        self._pending: list[int] = []
        self._compact = compact
        self._compacting: asyncio.Future[None] | None = None

    def signalled(self, sig: int) -> None:
        idle = self._compacting is None or self._compacting.done()
        if self._compact is not None and sig in _COMPACTING_SIGNALS and idle:
            self._compacting = asyncio.get_running_loop().run_in_executor(None, self._compact)
        if self._proc is None:
            self._pending.append(sig)
        elif self._proc.returncode is None:
            self._proc.send_signal(sig)

    def attach(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc
        pending, self._pending = self._pending, []
        for sig in pending:
            self.signalled(sig)


async def _run_then_close(
    door: FrontDoor, launch: _Launch, compact: Callable[[], None] | None = None
) -> int:
    try:
        return await _run(door, launch, compact)
    finally:
        await door.wait_closed()


def _report_blocked(host: str) -> None:
    print(
        f"replay-actor run: blocked a request for {host}: only the front door answers a "
        f"sealed run; {blocked_advice(host)}",
        file=sys.stderr,
    )


def _snapshot(provider: Provider) -> dict[str, Any] | None:
    try:
        return provider.snapshot()
    except ReplayError:
        return None


@dataclass(frozen=True)
class RunOptions:
    """``run``'s options (docs/front-door.md): the front door's ``address`` (host, port;
    port 0: any free one), the ``seal`` (one of :data:`SEALS`; None: the manifest's
    default), ``allow_misses`` (COMMAND's status even after a miss) and the run ``log``'s
    path (docs/attribution.md), instead of the manifest's."""

    address: tuple[str, int] = (DEFAULT_HOST, 0)
    seal: str | None = None
    allow_misses: bool = False
    log: str | os.PathLike[str] | None = None

    def __post_init__(self) -> None:
        if self.seal is not None and self.seal not in SEALS:
            raise ValueError(f"--seal must be one of {', '.join(SEALS)}, not {self.seal!r}")


def run_command(
    manifest: ManifestLike, command: Sequence[str], options: RunOptions | None = None
) -> int:
    """``replay-actor run``: serve the manifest's provider to ``command``; its status. A
    manifest file is read once, here: the seal, the provider, the secrets and the miss
    reporter all come from that one reading, whatever happens to the file afterwards."""
    if not command:
        raise ValueError("run needs a COMMAND after --")
    options = RunOptions() if options is None else options
    from ..manifest import open_provider, read_manifest

    read = read_manifest(manifest)
    # Before anything starts: a clock that cannot be given refuses the run (exit 1).
    clock = prepare_clock(read.clock, os.environ)
    # The key is read here, into the adapter, before the child's environment exists.
    provider: Provider = open_provider(read, log=options.log)
    tools: ToolSettings | None = None
    try:
        tools = _tool_settings(read)
        chosen = options.seal or ("auto" if read.kind == "replay" else "off")
        door = FrontDoor(
            provider,
            *options.address,
            release_on_close=False,
            report_blocked=_report_blocked,
            on_failure=reporter_for(read),
            tools=tools,
        )
        door.ignore(read.ignore)
        warning = foreign_key_warning(os.environ)
        if warning is not None:
            print(warning, file=sys.stderr)
        child = ChildWorld(secret_names(read), clock, tools)
        launch = _Launch(door, command, chosen, child)
        # A recorder's ``compact`` (through the run log's wrapper too), for the signals.
        compact = getattr(provider, "compact", None) if read.kind == "record" else None
        tune_collector()
        status = asyncio.run(_run_then_close(door, launch, compact))
        if launch.refused:
            return status  # nothing ran: nothing to sum up
        print(summary_line(door.outcomes, _snapshot(provider), launch.seal), file=sys.stderr)
        return exit_status(status, door.outcomes, allow_misses=options.allow_misses)
    finally:
        provider.release()
        if tools is not None:
            tools.authority.close()


def _tool_settings(manifest: Manifest) -> ToolSettings | None:
    """How a manifest with a fixture freezes tools (a live one does not: its child
    reaches the tools itself)."""
    if manifest.kind == "live":
        return None
    from .authority import RunAuthority
    from .tools import ToolSettings

    return ToolSettings(
        RunAuthority(), header_names=manifest.http_headers, forwards=manifest.kind == "record"
    )
