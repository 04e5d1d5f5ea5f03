"""``replay-actor run MANIFEST -- COMMAND``: the front door in this process, COMMAND as
its child (docs/front-door.md).

Runs in: the ``run`` process, all on its main thread: the event loop serves the front
door, and the child is spawned from that same thread (``PR_SET_PDEATHSIG`` follows the
*thread* that created the child, and the main thread lives as long as the process).
This module owns

- the child's environment: every vendor's base-URL variable pointing at the front door,
  every API-key variable set to the run's token, and the real key removed: the manifest's
  ``api_key_env`` variables (read by ``open_provider`` *before* the environment is built)
  and any variable holding the same value are left out, so the child cannot see the key;
- fate-sharing: the child is sent SIGTERM if ``run`` dies (the parent-death signal, set
  in the child between fork and exec by a ``preexec_fn`` that only calls ``prctl``,
  ``getppid`` and ``kill``, resolved before the fork, so the other threads of this
  process (the library's reaper) hold nothing it needs); the acquisition dies with
  ``run`` too, since the cursor actor watches this process, and the server is gone with
  the process;
- signals: SIGINT, SIGTERM and SIGHUP sent to ``run`` are forwarded to the child, and
  ``run`` goes on until the child exits;
- the exit status: the child's, a signal death as 128 + N like a shell; 127 when COMMAND
  cannot be found, 126 when it cannot be executed.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import sys
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from .server import DEFAULT_HOST, FrontDoor

if TYPE_CHECKING:
    from .._interface import Provider

__all__ = ["BASE_URL_VARIABLES", "KEY_VARIABLES", "child_environment", "run_command"]

#: Variable -> key of the ready line it is set from.
BASE_URL_VARIABLES: Final = {
    "OPENAI_BASE_URL": "openai_base_url",
    # LiteLLM and older OpenAI-based tools read this one.
    "OPENAI_API_BASE": "openai_base_url",
    "ANTHROPIC_BASE_URL": "anthropic_base_url",
    "GOOGLE_GEMINI_BASE_URL": "gemini_base_url",
}
#: Set to the run's token. ANTHROPIC_AUTH_TOKEN is not set: the Anthropic SDKs would
#: then send the token twice (x-api-key and Authorization), which works, but an
#: inherited real ANTHROPIC_AUTH_TOKEN is removed instead, so no real credential leaks.
KEY_VARIABLES: Final = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY")
#: Credentials a vendor SDK would prefer to, or add beside, the keys above: removed so
#: the child sends only the token, and never a real credential, to the front door.
_REMOVED: Final = ("ANTHROPIC_AUTH_TOKEN", "GOOGLE_API_KEY")

_PR_SET_PDEATHSIG: Final = 1
_FORWARDED: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def key_variables(manifest: str | os.PathLike[str]) -> set[str]:
    """The ``api_key_env`` names a manifest file uses (its live table and a record
    manifest's ``[provider.live]``). The manifest has been checked by ``open_provider``."""
    with open(manifest, "rb") as file:
        data = tomllib.load(file)
    names: set[str] = set()
    provider = data.get("provider")
    tables: list[Any] = [provider]
    if isinstance(provider, dict):
        tables.append(provider.get("live"))
    for table in tables:
        if isinstance(table, dict) and isinstance(table.get("api_key_env"), str):
            names.add(table["api_key_env"])
    return names


def child_environment(
    environ: Mapping[str, str], info: Mapping[str, str], secret_names: Iterable[str]
) -> dict[str, str]:
    """The child's environment: ``environ`` without the named secrets (and without any
    variable holding one of their values), with the front door's URLs and token."""
    names = set(secret_names) | set(_REMOVED)
    values = {environ[name] for name in names if environ.get(name)}
    env = {k: v for k, v in environ.items() if k not in names and v not in values}
    for variable, key in BASE_URL_VARIABLES.items():
        env[variable] = info[key]
    for variable in KEY_VARIABLES:
        env[variable] = info["token"]
    return env


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


async def _run(door: FrontDoor, command: Sequence[str], env: dict[str, str]) -> int:
    loop = asyncio.get_running_loop()
    await door.start()
    try:
        proc = await asyncio.create_subprocess_exec(
            *command, env=env, preexec_fn=_parent_death_hook(os.getpid())
        )
    except FileNotFoundError:
        print(f"replay-actor run: {command[0]}: command not found", file=sys.stderr)
        return 127
    except PermissionError:
        print(f"replay-actor run: {command[0]}: permission denied", file=sys.stderr)
        return 126
    for sig in _FORWARDED:
        loop.add_signal_handler(sig, _forward(proc, sig))
    try:
        return _status(await proc.wait())
    finally:
        for sig in _FORWARDED:
            loop.remove_signal_handler(sig)


def _forward(proc: asyncio.subprocess.Process, sig: int) -> Callable[[], None]:
    def forward() -> None:
        if proc.returncode is None:
            proc.send_signal(sig)

    return forward


async def _run_then_close(door: FrontDoor, command: Sequence[str], env: dict[str, str]) -> int:
    try:
        return await _run(door, command, env)
    finally:
        await door.wait_closed()


def run_command(
    manifest: str | os.PathLike[str],
    command: Sequence[str],
    *,
    host: str = DEFAULT_HOST,
    port: int = 0,
) -> int:
    """``replay-actor run``: serve the manifest's provider to ``command``; its status."""
    if not command:
        raise ValueError("run needs a COMMAND after --")
    from ..manifest import open_provider

    secret_names = key_variables(manifest)
    # The key is read here, into the adapter, before the child's environment exists.
    provider: Provider = open_provider(manifest)
    try:
        door = FrontDoor(provider, host, port)
        env = child_environment(os.environ, door.info, secret_names)
        return asyncio.run(_run_then_close(door, command, env))
    finally:
        provider.release()
