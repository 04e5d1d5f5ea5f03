"""Maps that cannot drift: every module of the package is on its package's ``__init__``
docstring map and on docs/architecture.md's map of the package, nothing on either map is
missing on disk, and every module's public names are in its ``__all__``; the map of the
tests is the test tree, and every test file the repository names exists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support.imports import PACKAGE, module_name
from tests.support.paths import ROOT

ARCHITECTURE = ROOT / "docs" / "architecture.md"


def _children(package: Path) -> set[str]:
    """A package's modules (``name.py``) and subpackages (``name/``), ``__init__`` aside."""
    found = {p.name for p in package.glob("*.py") if p.name != "__init__.py"}
    found |= {f"{p.name}/" for p in package.iterdir() if (p / "__init__.py").is_file()}
    return found


def _packages() -> list[Path]:
    return sorted(p.parent for p in PACKAGE.rglob("__init__.py"))


def _docstring(package: Path) -> str:
    return ast.get_docstring(ast.parse((package / "__init__.py").read_text("utf-8"))) or ""


def named_on_map(child: str, text: str) -> bool:
    """True if a package's docstring names ``child`` (``x.py`` or ``x/``): as ``x.py`` /
    ``x/``, as ````x````, or at the start of a map line (``x   what it owns``)."""
    stem = child.removesuffix(".py").removesuffix("/")
    suffix = "/" if child.endswith("/") else r"\.py"
    patterns = (
        rf"(?<![\w/.]){re.escape(stem)}{suffix}(?![\w])",
        rf"``{re.escape(stem)}``",
        rf"(?m)^\s*(?:-\s*)?{re.escape(stem)}(?:{suffix})?\s{{2,}}\S",
    )
    return any(re.search(p, text) for p in patterns)


def mapped_names(text: str) -> set[str]:
    """The ``x.py`` and ``x/`` a docstring names that are its own package's (not
    ``files/sidecar.py`` or ``docs/...``, which name another package's)."""
    found = set(re.findall(r"(?<![\w/.])(\w+\.py)\b", text))
    found |= set(re.findall(r"(?<![\w/.`])(\w+/)(?![\w.])", text))
    return found


def _map_of(heading: str, root: str) -> set[str]:
    """Every path on the map under ``heading`` in docs/architecture.md (``root``
    relative: ``replay/core/control.py``, ``replay/core/``), read from its indentation."""
    text = ARCHITECTURE.read_text("utf-8")
    section = text.split(heading, 1)[1]
    block = section.split("```", 2)[1]
    lines = block.splitlines()[1:]
    assert lines[0].strip() == root
    stack: list[str] = []
    paths = set()
    for line in lines[1:]:
        match = re.match(r"^( +)([\w.]+(?:\.py|/))(?:\s|$)", line)
        if match is None:
            continue  # a description's continuation line
        depth = len(match.group(1)) // 2
        del stack[depth - 1 :]
        stack.append(match.group(2))
        paths.add("".join(stack))
    return paths


def architecture_map() -> set[str]:
    """Every path on docs/architecture.md's map of the package."""
    return _map_of("## Map of the package", "replay_actor/")


def map_of_the_tests() -> set[str]:
    """Every path on docs/architecture.md's map of the tests (``tests/`` relative)."""
    return _map_of("## Map of the tests", "tests/")


def _on_disk() -> set[str]:
    found = set()
    for package in _packages():
        base = package.relative_to(PACKAGE).as_posix()
        prefix = "" if base == "." else f"{base}/"
        found |= {prefix + child for child in _children(package)}
    return found


def test_every_package_map_names_each_of_its_modules() -> None:
    missing = []
    for package in _packages():
        text = _docstring(package)
        missing += [
            f"{package.relative_to(ROOT)}: {child}"
            for child in sorted(_children(package))
            if not named_on_map(child, text)
        ]
    assert missing == []


def test_no_package_map_names_a_module_it_does_not_have() -> None:
    stale = []
    for package in _packages():
        children = _children(package)
        stale += [
            f"{package.relative_to(ROOT)}: {name}"
            for name in sorted(mapped_names(_docstring(package)))
            if name not in children and name != "__init__.py"
        ]
    assert stale == []


def test_the_architecture_map_matches_the_disk() -> None:
    on_map = architecture_map()
    on_disk = _on_disk() | {"__init__.py"}
    assert sorted(on_disk - on_map) == [], "missing from docs/architecture.md's map"
    assert sorted(on_map - on_disk) == [], "on docs/architecture.md's map, not on disk"


def test_the_map_readers_see_what_they_should() -> None:
    # The checks above can fail: the readers find a module, and miss an absent one.
    assert named_on_map("control.py", "    control.py   the control messages")
    assert named_on_map("durable.py", "- ``durable``: atomic replacement")
    assert named_on_map("_format.py", "    _format    the line layout")
    assert named_on_map("core/", "    core/      any      I/O-free")
    assert not named_on_map("control.py", "the control messages, encoded once")
    assert not named_on_map("wire.py", "see ``io/wire.py`` for the channel")
    assert mapped_names("sync.py and ``files/sidecar.py`` and core/ (docs/x.md)") == {
        "sync.py",
        "core/",
    }
    assert {"replay/core/control.py", "replay/core/", "cli/_shared.py"} <= architecture_map()


# -- the map of the tests, and the test files the repository names ---------------------

TESTS = ROOT / "tests"


def tree_on_disk(tests: Path) -> set[str]:
    """Every folder and module of a test tree (``__init__.py`` aside), ``tests/``
    relative; a data folder (no ``.py`` inside: ``fixture/corpus/``) as itself, its files
    unlisted."""
    found: set[str] = set()

    def walk(folder: Path, prefix: str) -> None:
        for path in folder.iterdir():
            if path.name == "__pycache__" or path.name.startswith("."):
                continue
            if path.is_dir():
                found.add(f"{prefix}{path.name}/")
                if any(path.rglob("*.py")):
                    walk(path, f"{prefix}{path.name}/")
            elif path.suffix == ".py" and path.name != "__init__.py":
                found.add(prefix + path.name)

    walk(tests, "")
    return found


def test_the_test_map_matches_the_disk() -> None:
    on_map = map_of_the_tests()
    on_disk = tree_on_disk(TESTS) | {"__init__.py"}
    assert sorted(on_disk - on_map) == [], "missing from docs/architecture.md's map of the tests"
    assert sorted(on_map - on_disk) == [], "on docs/architecture.md's map of the tests, not on disk"


#: Where the repository names a test file as the proof of a claim.
CITING = (
    "README.md",
    "Makefile",
    "pyproject.toml",
    "docs",
    "examples",
    "benchmarks",
    "tests",
    "replay_actor",
)
_TEST_FILE = re.compile(r"(?<![\w/.])tests/[\w/]+\.py\b")


def cited_test_files(root: Path) -> dict[str, set[str]]:
    """Each test file (``tests/...py``) that a file of ``CITING`` names -> those files."""
    found: dict[str, set[str]] = {}
    for name in CITING:
        where = root / name
        paths = [where] if where.is_file() else sorted(where.rglob("*"))
        for path in paths:
            if path.suffix not in (".md", ".py", ".toml") and path.name != "Makefile":
                continue
            for cited in _TEST_FILE.findall(path.read_text("utf-8")):
                found.setdefault(cited, set()).add(path.relative_to(root).as_posix())
    return found


def test_every_test_file_the_repository_names_exists() -> None:
    cited = cited_test_files(ROOT)
    missing = {name: sorted(where) for name, where in cited.items() if not (ROOT / name).is_file()}
    assert missing == {}
    assert "tests/docs/test_first_screen.py" in cited  # the README's, at least


def test_the_tree_readers_see_what_they_should(tmp_path: Path) -> None:
    # The checks above can fail: a data folder is listed as itself, a module in a
    # subfolder by its path, and a cited file is found wherever it is named.
    (tmp_path / "tests" / "fixture" / "corpus").mkdir(parents=True)
    (tmp_path / "tests" / "fixture" / "corpus" / "a.jsonl").write_text("")
    for name in ("__init__.py", "conftest.py", "fixture/__init__.py", "fixture/test_load.py"):
        (tmp_path / "tests" / name).write_text("")
    assert tree_on_disk(tmp_path / "tests") == {
        "conftest.py",
        "fixture/",
        "fixture/test_load.py",
        "fixture/corpus/",
    }
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("see tests/fixture/test_load.py, not x/tests/y.py")
    gone = "tests/gone/" + "test_old.py"  # split, or this module would cite it
    (tmp_path / "Makefile").write_text(f"# ({gone})\n")
    assert cited_test_files(tmp_path) == {
        "tests/fixture/test_load.py": {"docs/a.md"},
        gone: {"Makefile"},
    }
    assert {"support/paths.py", "replay/caller/", "fixture/corpus/"} <= map_of_the_tests()


# -- public names and __all__ ----------------------------------------------------------


def _dunder_all(tree: ast.Module) -> set[str] | None:
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            return set(ast.literal_eval(value))
    return None


def _imported_names(trees: dict[str, tuple[Path, ast.Module]]) -> dict[str, set[str]]:
    """Module -> the public names other modules import from it. A private module's
    names shared inside its own package (``fixture/_parse`` from ``fixture/_format``)
    are the package's business, not the module's interface, and do not count."""
    found: dict[str, set[str]] = {name: set() for name in trees}
    for importer, (path, tree) in trees.items():
        package = importer if path.name == "__init__.py" else importer.rsplit(".", 1)[0]
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target not in found:
                continue
            parent, _, leaf = target.rpartition(".")
            if leaf.startswith("_") and parent == package:
                continue
            found[target] |= {
                a.name
                for a in node.names
                if not a.name.startswith("_") and f"{target}.{a.name}" not in found
            }
    return found


def public_names_missing_from_all() -> list[str]:
    trees = {
        module_name(path): (path, ast.parse(path.read_text("utf-8")))
        for path in sorted(PACKAGE.rglob("*.py"))
    }
    imported = _imported_names(trees)
    found = []
    for module, (_path, tree) in trees.items():
        defined = {
            node.name
            for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and not node.name.startswith("_")
        }
        public = defined | imported[module]
        listed = _dunder_all(tree)
        if listed is None:
            if public:
                found.append(f"{module}: no __all__ for {sorted(public)}")
            continue
        if public - listed:
            found.append(f"{module}: {sorted(public - listed)}")
    return found


def test_every_public_name_is_in_its_modules_all() -> None:
    assert public_names_missing_from_all() == []
