"""The package's shape: layers that point one way, no import cycle, and no pointer to a
document the repository does not hold (docs/architecture.md, "Map of the package" and
"Layers"); and the test tree's: every folder a package mirroring the package, helpers
only in ``tests/support/``, and no test module importing another ("Map of the tests")."""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.support.imports import PACKAGE, import_graph, module_name
from tests.support.paths import ROOT


def test_no_import_cycle() -> None:
    graph = import_graph()
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


# -- layers ------------------------------------------------------------------------------

#: The layers, lowest first (docs/architecture.md, "Layers"). A module may import its own
#: layer and the layers below it, never one above, lazy imports included. A new top-level
#: module or package must be given its place here.
LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    (
        "core",
        frozenset(
            {
                "_version",
                "_errors",
                "_canonical",
                "_memo",
                "_kinds",
                "_http_kind",
                "_request",
                "_response",
                "_strict_json",
                "_interface",
            }
        ),
    ),
    ("files on disk", frozenset({"fixture", "files"})),
    ("replay", frozenset({"replay"})),
    ("providers and wire shapes", frozenset({"adapters", "record", "vendors"})),
    ("authoring", frozenset({"authoring"})),
    ("attribution", frozenset({"attribution"})),
    # The HTTP exchange: never the manifest, the front door, the SDK glue or the CLI.
    ("serving", frozenset({"serving"})),
    ("public replay entry points", frozenset({"_replay"})),
    ("manifest", frozenset({"manifest"})),
    ("integrations", frozenset({"integrations", "frontdoor", "mcp", "pydantic_ai", "ray"})),
    ("command line", frozenset({"cli", "__main__"})),
    ("the public facade", frozenset({""})),  # replay_actor/__init__.py, names resolved lazily
)


def _top(module: str) -> str:
    """The top-level module or package ``module`` belongs to ("" for the package)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _layer(module: str) -> int:
    top = _top(module)
    for index, (_, members) in enumerate(LAYERS):
        if top in members:
            return index
    raise AssertionError(f"{module} is in no layer: give {top!r} its place in LAYERS")


def _lazy_names() -> dict[str, str]:
    """The package's lazily resolved names -> the module that defines each."""
    import replay_actor

    table: Mapping[str, str] = replay_actor._LOCATIONS
    return {name: f"replay_actor.{module}" for name, module in table.items()}


def _layer_imports(tree: ast.AST, package: str) -> set[str]:
    """The replay_actor modules a module (of ``package``) imports, at any depth, with a
    name taken from the facade (``from replay_actor import open_provider``) resolved to
    the module that defines it: going through the facade is no way round a layer."""
    lazy = _lazy_names()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            tail = [node.module] if node.module else []
            target = ".".join(base + tail) if node.level else node.module or ""
            if target == "replay_actor":
                found.update(lazy.get(a.name, f"replay_actor.{a.name}") for a in node.names)
            elif node.module is None:
                found.update(f"{target}.{alias.name}" for alias in node.names)
            else:
                found.add(target)
    return {_resolve(m) for m in found if m.startswith("replay_actor")} - {""}


def _layer_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        name = module_name(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        graph[name] = _layer_imports(tree, package) - {name}
    return graph


def _resolve(imported: str) -> str:
    target = imported
    while not _exists(target) and "." in target:
        target = target.rpartition(".")[0]
    return target if _exists(target) else ""


def _exists(module: str) -> bool:
    relative = Path(*module.split(".")[1:]) if "." in module else Path()
    where = PACKAGE / relative
    return where.with_suffix(".py").is_file() or (where / "__init__.py").is_file()


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every edge from a module to one in a higher layer, as "a (layer) -> b (layer)"."""
    found = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            if _layer(target) > _layer(module):
                below, above = LAYERS[_layer(module)][0], LAYERS[_layer(target)][0]
                found.append(f"{module} ({below}) -> {target} ({above})")
    return found


def test_layers_point_one_way() -> None:
    graph = _layer_graph()
    assert upward_imports(graph) == []


def test_the_layer_check_sees_lazy_and_facade_imports() -> None:
    # The check itself can fail: a function-level import of the CLI, and a name of the
    # manifest taken through the facade, from the fixture package are upward edges.
    tree = ast.parse("def f():\n    from ..cli import main\n    from .. import open_provider\n")
    graph = {"replay_actor.fixture._probe": _layer_imports(tree, "replay_actor.fixture")}
    assert upward_imports(graph) == [
        "replay_actor.fixture._probe (files on disk) -> replay_actor.cli (command line)",
        "replay_actor.fixture._probe (files on disk) -> replay_actor.manifest (manifest)",
    ]


def test_every_module_has_a_layer() -> None:
    for module in _layer_graph():
        _layer(module)


# -- private modules (docs/architecture.md, "Layers") ------------------------------------


def _private(part: str) -> bool:
    """A module or package name with one leading underscore (``__init__`` is not one)."""
    return part.startswith("_") and not part.startswith("__")


def _modules(root: Path) -> dict[str, Path]:
    """Every module of the package at ``root`` by its dotted name."""
    found = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imported(tree: ast.AST, package: str, modules: Mapping[str, Path]) -> set[str]:
    """The package's modules a module (of ``package``) imports, at any depth, by name:
    ``from pkg import name`` counts ``pkg.name`` when that is a module."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return {name for name in found if name in modules}


def private_imports(root: Path) -> list[str]:
    """Every import of a private module (``_name``, or a module inside a ``_name``
    package) from outside the package that holds it, as "importer -> imported". A
    package's own modules and subpackages may use its private modules, so the root's
    (``replay_actor/_errors.py``, the core layer) are everyone's."""
    modules = _modules(root)
    found = []
    for importer, path in sorted(modules.items()):
        package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for imported in sorted(_imported(tree, package, modules)):
            parts = imported.split(".")
            for i, part in enumerate(parts):
                owner = ".".join(parts[:i])
                inside = importer == owner or importer.startswith(owner + ".")
                if _private(part) and not inside:
                    found.append(f"{importer} -> {imported}")
                    break
    return found


def test_no_module_imports_another_packages_private_module() -> None:
    # What a package offers the others is in its __init__ (``replay_actor.fixture``'s
    # names); its private modules are its own business and may change with it.
    assert private_imports(PACKAGE) == []


def test_the_private_import_check_sees_what_it_should(tmp_path: Path) -> None:
    # The check can fail: a made-up package breaks the rule once per kind of import,
    # beside imports it allows (its own private module, a parent's, the root's).
    files = {
        "__init__.py": "",
        "_errors.py": "",
        "fixture/__init__.py": "from ._table import Table\n",
        "fixture/_table.py": "from .._errors import Error\n",
        "fixture/_inner/__init__.py": "",
        "fixture/_inner/deep.py": "",
        "vendors/__init__.py": "",
        "vendors/_common.py": "",
        "vendors/acme/__init__.py": "from .._common import rule\nfrom ... import _errors\n",
        "authoring/__init__.py": "",
        "authoring/add.py": (
            "from ..fixture import Table\n"
            "from ..fixture._table import Table\n"
            "def lazy():\n    from ..fixture import _table\n"
        ),
        "authoring/deep.py": "import pkg.fixture._inner.deep\nfrom ..vendors import _common\n",
    }
    for name, text in files.items():
        (tmp_path / "pkg" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "pkg" / name).write_text(text)
    assert private_imports(tmp_path / "pkg") == [
        "pkg.authoring.add -> pkg.fixture._table",
        "pkg.authoring.deep -> pkg.fixture._inner.deep",
        "pkg.authoring.deep -> pkg.vendors._common",
    ]


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


def test_no_function_of_the_cli_or_the_authoring_tools_is_over_60_lines() -> None:
    # The CLI is a table of short handlers (docs/architecture.md, "Layers"); a command
    # that grows past a screen is split, not appended to.
    long = []
    for path in [*(PACKAGE / "cli").glob("*.py"), *(PACKAGE / "authoring").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > 60:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert long == []


def test_the_cli_package_has_no_complexity_waiver_and_no_long_file() -> None:
    # One module per command group (replay_actor/cli/__init__.py): a group that outgrows
    # 800 lines is split into two modules, and a handler is split, not waived.
    offenders = []
    for path in (PACKAGE / "cli").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        if "noqa: PLR09" in text:
            offenders.append(f"{path.relative_to(ROOT)}: a complexity waiver")
        if text.count("\n") > 800:
            offenders.append(f"{path.relative_to(ROOT)}: over 800 lines")
    assert offenders == []


# -- the package's limits (docs/architecture.md, "Limits and waivers") ------------------

#: Complexity waivers allowed in the whole package, and in ``replay/`` of them.
MAX_WAIVERS = 8
MAX_REPLAY_WAIVERS = 4
MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 80
_WAIVER = re.compile(r"#\s*noqa:[^\n]*\b(?:PLR09\d\d|C901)\b")
#: A waiver's reason: after its rule codes, `` - `` and the words (``noqa: PLR0913 - why``).
_REASON = re.compile(r"#\s*noqa:\s*[A-Z]+\d+(?:\s*,\s*[A-Z]+\d+)*\s+-\s+\S")


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _label(path: Path) -> str:
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


def complexity_waivers(paths: list[Path]) -> list[str]:
    """Every ``# noqa`` that waives a complexity rule (``PLR09xx``, ``C901``)."""
    found = []
    for path in paths:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _WAIVER.search(line):
                found.append(f"{_label(path)}:{number}")
    return found


def unexplained_waivers(paths: list[Path]) -> list[str]:
    """Every complexity waiver without its reason on its line."""
    found = []
    for path in paths:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _WAIVER.search(line) and not _REASON.search(line):
                found.append(f"{_label(path)}:{number}")
    return found


def long_functions(paths: list[Path], limit: int) -> dict[str, int]:
    """``path:function`` -> its length in lines, for every function over ``limit``."""
    found = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > limit:
                    found[f"{_label(path)}:{node.name}"] = length
    return found


def test_the_package_keeps_its_complexity_waivers_few() -> None:
    waivers = complexity_waivers(_sources())
    assert len(waivers) <= MAX_WAIVERS, waivers
    replay = [w for w in waivers if w.startswith("replay_actor/replay/")]
    assert len(replay) <= MAX_REPLAY_WAIVERS, replay


def test_every_complexity_waiver_says_why_on_its_line() -> None:
    assert unexplained_waivers(_sources()) == []


def test_no_source_file_is_over_800_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for path in _sources()
        if (n := path.read_text(encoding="utf-8").count("\n")) > MAX_FILE_LINES
    }
    assert long == {}


def test_no_function_is_over_80_lines() -> None:
    assert long_functions(_sources(), MAX_FUNCTION_LINES) == {}


def test_the_limit_checks_see_a_waiver_and_a_long_function(tmp_path: Path) -> None:
    # The checks above can fail: they find what they look for in a made-up module.
    source = tmp_path / "mod.py"
    body = "\n".join(f"    x{i} = {i}" for i in range(85))
    source.write_text(
        "def f():  # noqa: PLR0912, PLR0915\n"
        + body
        + "\n\n\ndef g():  # noqa: C901\n    pass\n"
        + "\n\ndef h(a, b, c, d, e, f):  # noqa: PLR0913 - a signature fixed elsewhere\n"
        + "    pass\n",
        encoding="utf-8",
    )
    assert len(complexity_waivers([source])) == 3
    assert unexplained_waivers([source]) == [f"{source}:1", f"{source}:89"]
    assert long_functions([source], MAX_FUNCTION_LINES) == {f"{source}:f": 86}


# -- the test tree mirrors the package (docs/architecture.md, "Map of the tests") -------

TESTS = ROOT / "tests"

#: Test folders that mirror no package folder, and what each holds instead.
NOT_MIRRORS: dict[str, str] = {
    "support": "the helpers test modules share",
    "package": "the package as a whole: its public names, layers, maps, provider contract",
    "docs": "the repository's docs/ and README.md",
    "examples": "the repository's examples/",
}
#: Test folders named otherwise than what they mirror: the package paths each covers
#: (``replay_actor/`` relative; one on disk is enough).
MIRRORS: dict[str, tuple[str, ...]] = {
    "core": ("_request.py", "_canonical.py", "_kinds.py", "_memo.py", "_strict_json.py"),
}


def python_folders(tests: Path) -> list[str]:
    """Every folder of a test tree that holds Python, relative to it; data folders (no
    ``.py`` file inside: ``fixture/corpus/``) aside."""
    return sorted(
        path.relative_to(tests).as_posix()
        for path in tests.rglob("*")
        if path.is_dir() and path.name != "__pycache__" and any(path.rglob("*.py"))
    )


def unmirrored(tests: Path, package: Path) -> list[str]:
    """Every test folder that is no package, or mirrors no package folder or module
    (``tests/vendors/gemini/`` mirrors ``replay_actor/vendors/gemini/``, ``tests/manifest/``
    ``replay_actor/manifest.py``). A folder that holds no test module yet waits for its
    package folder to land, and passes."""
    found = []
    for folder in python_folders(tests):
        where = tests / folder
        if not (where / "__init__.py").is_file():
            found.append(f"{folder}/: no __init__.py")
            continue
        if folder.split("/")[0] in NOT_MIRRORS:
            continue
        mirrored = MIRRORS.get(folder, (f"{folder}/", f"{folder}.py"))
        if any((package / path).exists() for path in mirrored):
            continue
        if {p.name for p in where.rglob("*.py")} == {"__init__.py"}:
            continue  # an empty room, waiting
        found.append(f"{folder}/: mirrors nothing in the package")
    return found


def misplaced_modules(tests: Path) -> list[str]:
    """Modules out of place: at the top of ``tests/``, anything but ``__init__.py`` and
    ``conftest.py``; outside ``support/``, anything but ``__init__.py`` and test modules."""
    found = []
    for path in sorted(tests.rglob("*.py")):
        relative = path.relative_to(tests)
        if relative.parts[0] == "support" or path.name == "__init__.py":
            continue
        top = len(relative.parts) == 1
        if (top and path.name != "conftest.py") or (not top and not path.name.startswith("test_")):
            found.append(relative.as_posix())
    return found


def cross_imports(tests: Path) -> list[str]:
    """Every import of one test module by another (relative ones included): helpers are
    imported from ``tests.support`` only."""
    found = []
    for path in sorted(tests.rglob("*.py")):
        relative = path.relative_to(tests)
        if relative.parts[0] == "support":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                names = [f"{'.' * node.level}{node.module or ''}"]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                outside = name.startswith((".", "tests.")) or name == "tests"
                if outside and not name.startswith("tests.support"):
                    found.append(f"{relative.as_posix()}: {name}")
    return found


def test_every_test_folder_is_a_package_mirroring_the_package() -> None:
    assert unmirrored(TESTS, PACKAGE) == []


def test_tests_top_holds_no_test_module_and_helpers_live_in_support() -> None:
    assert misplaced_modules(TESTS) == []


def test_test_modules_import_helpers_from_support_only() -> None:
    assert cross_imports(TESTS) == []


def test_the_tree_checks_see_what_they_should(tmp_path: Path) -> None:
    # The checks above can fail: a made-up tree breaks each rule once.
    package, tests = tmp_path / "replay_actor", tmp_path / "tests"
    for folder in ("fixture", "vendors/gemini"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
    (package / "manifest.py").write_text("")
    files = {
        "__init__.py": "",
        "conftest.py": "",
        "test_loose.py": "",
        "support/__init__.py": "",
        "support/servers.py": "from tests.support.paths import ROOT\n",
        "fixture/__init__.py": "",
        "fixture/test_load.py": "from tests.fixture.test_other import HELPER\n",
        "fixture/helper.py": "",
        "fixture/corpus/accept/a.jsonl": "",
        "vendors/__init__.py": "",
        "vendors/gemini/__init__.py": "",
        "vendors/gemini/test_sdk.py": "from tests.support.servers import x\nfrom . import y\n",
        "vendors/acme/__init__.py": "",
        "manifest/__init__.py": "",
        "manifest/test_grammar.py": "",
        "nowhere/__init__.py": "",
        "nowhere/test_x.py": "",
        "noinit/test_y.py": "import tests.noinit.test_z\n",
    }
    for name, text in files.items():
        (tests / name).parent.mkdir(parents=True, exist_ok=True)
        (tests / name).write_text(text)
    assert unmirrored(tests, package) == [
        "noinit/: no __init__.py",
        "nowhere/: mirrors nothing in the package",
    ]
    assert misplaced_modules(tests) == ["fixture/helper.py", "test_loose.py"]
    assert cross_imports(tests) == [
        "fixture/test_load.py: tests.fixture.test_other",
        "noinit/test_y.py: tests.noinit.test_z",
        "vendors/gemini/test_sdk.py: .",
    ]
