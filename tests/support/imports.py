"""The package's modules and the imports between them, read from its source: the layer
test, the map test and replay's rooms walk this graph."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.paths import ROOT

#: The package's source.
PACKAGE = ROOT / "replay_actor"


def module_name(path: Path) -> str:
    """``replay_actor/replay/core/state.py`` -> ``replay_actor.replay.core.state``."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path) -> set[str]:
    """Every replay_actor module ``path`` imports, at any depth (lazy imports count)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if node.module is None or (node.level and not node.module):
                found.update(f"{target}.{alias.name}" for alias in node.names)
            found.add(target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "import_module":
            continue  # __init__'s lazy table: checked below through _LOCATIONS
    return {m for m in found if m == "replay_actor" or m.startswith("replay_actor.")}


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (lazy imports and ``from pkg import
    name`` included), itself aside."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = set()
        for imported in imported_modules(path):
            target = imported
            while target not in modules and "." in target:
                target = target.rpartition(".")[0]  # ``from pkg import name``
            if target in modules and target != name:
                edges.add(target)
        graph[name] = edges
    return graph
