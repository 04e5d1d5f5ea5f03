"""The replay layer points down only (docs/architecture.md, "Layers"): nothing under
``replay/`` imports a higher package, lazily or not. A miss is explained by the
explainer the caller's layer passes in, and the Ray backend is reached by the manifest
without ``integrations/``.

Inside ``replay/``, the folders are rooms by process (docs/architecture.md, "Rooms by
process"): ``core/`` is I/O-free and imports no other room, ``io/`` only the core,
``forked/`` (the zygote, holders, actors) never the caller's side, and ``caller/`` the
core and ``io/`` but not ``forked/`` (the zygote is started by name, not imported)."""

from __future__ import annotations

from tests.support.imports import PACKAGE, import_graph

#: What ``replay/`` may import besides itself: the layers below it.
BELOW = (
    "replay_actor._errors",
    "replay_actor._request",
    "replay_actor._canonical",
    # Its ``RAW_VECTORS`` only: whether the caller takes embedding vectors raw.
    "replay_actor._response",
)
BELOW_PACKAGES = ("replay_actor.fixture",)

ROOMS = ("core", "io", "caller", "forked")
#: Room -> the rooms of ``replay/`` it may import (itself included).
MAY_IMPORT: dict[str, frozenset[str]] = {
    "core": frozenset({"core"}),
    "io": frozenset({"core", "io"}),
    "caller": frozenset({"core", "io", "caller"}),
    "forked": frozenset({"core", "io", "forked"}),
}
#: Standard modules that open sockets or processes: the core imports none of them.
IO_MODULES = frozenset(
    {"socket", "select", "selectors", "subprocess", "multiprocessing", "asyncio", "psutil"}
)


def test_replay_imports_only_the_layers_below_it() -> None:
    graph = import_graph()
    found = []
    for module, imported in graph.items():
        if not module.startswith("replay_actor.replay"):
            continue
        for target in imported:
            if target == "replay_actor" or target.startswith("replay_actor.replay"):
                continue
            if target in BELOW or target.startswith(BELOW_PACKAGES):
                continue
            found.append(f"{module} -> {target}")
    assert not found, found


def _room(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) < 3 or parts[:2] != ["replay_actor", "replay"]:
        return None
    return parts[2] if parts[2] in ROOMS else "replay"


def room_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import from one room of ``replay/`` into a room it may not import."""
    found = []
    for module, imported in sorted(graph.items()):
        room = _room(module)
        if room is None or room == "replay":
            continue
        for target in sorted(imported):
            other = _room(target)
            if other is None:
                continue
            if other == "replay" or other not in MAY_IMPORT[room]:
                found.append(f"{module} ({room}) -> {target} ({other})")
    return found


def test_every_replay_module_is_in_a_room() -> None:
    loose = sorted(p.name for p in (PACKAGE / "replay").glob("*.py") if p.name != "__init__.py")
    assert loose == []
    rooms = sorted(p.name for p in (PACKAGE / "replay").iterdir() if (p / "__init__.py").is_file())
    assert rooms == sorted(ROOMS)


def test_rooms_import_only_what_their_process_may() -> None:
    assert room_violations(import_graph()) == []


def test_the_room_check_sees_a_forked_module_importing_the_caller() -> None:
    graph = {
        "replay_actor.replay.forked.actor": {"replay_actor.replay.caller.handle"},
        "replay_actor.replay.core.state": {"replay_actor.replay.io.wire"},
        "replay_actor.replay.caller.handle": {"replay_actor.replay.forked.zygote"},
        "replay_actor.replay.io.wire": {"replay_actor.replay.core.protocol"},
    }
    assert room_violations(graph) == [
        "replay_actor.replay.caller.handle (caller) -> replay_actor.replay.forked.zygote (forked)",
        "replay_actor.replay.core.state (core) -> replay_actor.replay.io.wire (io)",
        "replay_actor.replay.forked.actor (forked) -> replay_actor.replay.caller.handle (caller)",
    ]


def test_the_core_opens_no_socket_and_no_process() -> None:
    import ast

    found = []
    for path in sorted((PACKAGE / "replay" / "core").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            found += [f"{path.name}: {n}" for n in names if n.split(".")[0] in IO_MODULES]
    assert found == []


def test_the_manifest_reaches_both_backends_without_integrations() -> None:
    imported = import_graph()["replay_actor.manifest"]
    assert "replay_actor.replay.caller.ray_backend" in imported
    assert not [m for m in imported if m.startswith("replay_actor.integrations")]
