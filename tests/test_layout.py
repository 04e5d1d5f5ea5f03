"""The package's shape: no import cycle, and no pointer to a document the repository
does not hold (docs/architecture.md, "Map of the package")."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "replay_actor"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every replay_actor module ``path`` imports, at any depth (lazy imports count)."""
    name = _module_name(path)
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


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = set()
        for imported in _imports(path):
            target = imported
            while target not in modules and "." in target:
                target = target.rpartition(".")[0]  # ``from pkg import name``
            if target in modules and target != name:
                edges.add(target)
        graph[name] = edges
    return graph


def test_no_import_cycle() -> None:
    graph = _graph()
    # The package __init__ is imported first by everything and imports nothing eagerly
    # (its names resolve lazily), so edges *to* it are not cycles.
    for edges in graph.values():
        edges.discard("replay_actor")
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = [*path[path.index(nxt) :], nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


def test_the_package_init_imports_nothing_of_ours_eagerly_but_its_version() -> None:
    # The zygote and the actor import replay_actor first; its names resolve lazily, so
    # they pay only for what they use.
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    eager = {node.module for node in tree.body if isinstance(node, ast.ImportFrom) and node.level}
    assert eager == {"_version"}


def test_no_reference_to_a_spec_outside_the_repository() -> None:
    pattern = re.compile(r"SPEC\b|§\s?\d")
    offenders = []
    for folder in ("replay_actor", "tests", "benchmarks", "examples", "docs"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix not in (".py", ".md") or path.name == "test_layout.py":
                continue
            for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if pattern.search(text) and "RFC 8785 §" not in text:
                    offenders.append(f"{path.relative_to(ROOT)}:{number}")
    assert offenders == []


def test_every_doc_a_module_points_to_exists() -> None:
    cited = set()
    for path in PACKAGE.rglob("*.py"):
        cited.update(re.findall(r"docs/[a-z0-9-]+\.md", path.read_text(encoding="utf-8")))
    missing = sorted(doc for doc in cited if not (ROOT / doc).is_file())
    assert missing == []
