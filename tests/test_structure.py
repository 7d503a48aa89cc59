"""The shape of the source tree: no import circles, layers that point one way, and one
test module per source module.

Every ``.py`` under ``simulator/`` and ``statecharts/`` is parsed with :mod:`ast` (never
imported), so a rule sees every import a module can make: at the top, inside functions,
and under ``if TYPE_CHECKING:``. The modules and the rules come from walking the tree,
so a module added, moved or removed is checked without editing this file.

How an import becomes an edge from one module to another:

- ``import simulator.a.b`` is an edge to ``simulator.a.b``;
- ``from simulator.a import name`` is an edge to ``simulator.a.name`` when that is a
  module, else to ``simulator.a``; relative imports are resolved the same way;
- ``importlib.import_module("simulator.a")`` with a literal name counts too;
- a package's ``__init__.py`` is the package's module (``simulator.scenario``);
- the parent packages Python imports on the way (``simulator``, ``simulator.core`` for
  ``simulator.core.session``) are not edges: no module names them.

A package ``__init__`` that re-exports its own submodules gets no exemption: such an
edge closes a circle only if the submodule imports the package back, and then the
submodule runs against a half-initialised package, which is a real circle.

The layers (DESIGN.md and each package's docstring): the core, scenarios and charts
import nothing from runners, hosts, tools, ``launch`` or the command line; hosts
nothing from runners or tools; runners nothing from tools. Importing a thin re-export
face (``simulator.virtual``) counts as importing what it re-exports.

Every source module but a package's ``__init__``, a ``__main__`` and a re-export face
has its tests at the mirrored path: ``simulator/core/session.py`` in
``tests/core/test_session.py``, ``statecharts/browse.py`` in
``tests/statecharts/test_browse.py``.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterable, Iterator, Mapping, Set
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("simulator", "statecharts")


# -- reading the tree ---------------------------------------------------------------------


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    is_package: bool
    tree: ast.Module

    @property
    def where(self) -> str:
        try:
            return str(self.path.relative_to(ROOT))
        except ValueError:
            return str(self.path)


@dataclass(frozen=True)
class Import:
    """One import statement's target, as written (``raw``) and as a module of the tree."""

    importer: str
    raw: str
    target: str | None  # the nearest module of the tree, or None if outside it
    where: str  # path:line of the statement


def discover(root: Path, packages: Iterable[str] = PACKAGES) -> dict[str, Module]:
    """Every module under ``root``'s ``packages``, by dotted name."""
    modules: dict[str, Module] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            name = ".".join(parts)
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            modules[name] = Module(name, path, is_package, tree)
    return modules


def _written_imports(module: Module) -> Iterator[tuple[str, str | None, int]]:
    """(base module, imported name or None, line) of every import in ``module``."""
    for node in ast.walk(module.tree):  # every nesting: functions, TYPE_CHECKING, try
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = module.name if module.is_package else module.name.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{node.module}" if node.module else package
            else:
                base = node.module or ""
            for alias in node.names:
                yield base, alias.name, node.lineno
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.args[0].value, None, node.lineno


def nearest(name: str, known: Set[str]) -> str | None:
    """``name`` if it is a module of the tree, else its nearest enclosing one."""
    while name not in known:
        if "." not in name:
            return None
        name = name.rpartition(".")[0]
    return name


def imports_of(module: Module, known: Set[str], packages: Iterable[str] = PACKAGES) -> list[Import]:
    """The imports of ``module`` that name a module of ``packages``."""
    roots = tuple(packages)
    found: list[Import] = []
    for base, name, line in _written_imports(module):
        raw = f"{base}.{name}" if name not in (None, "*") and f"{base}.{name}" in known else base
        if raw.split(".")[0] not in roots:
            continue
        found.append(Import(module.name, raw, nearest(raw, known), f"{module.where}:{line}"))
    return found


def import_graph(modules: Mapping[str, Module]) -> dict[str, dict[str, list[str]]]:
    """importer -> imported -> where (path:line) each import of it stands."""
    known = set(modules)
    graph: dict[str, dict[str, list[str]]] = {name: {} for name in modules}
    for module in modules.values():
        for imp in imports_of(module, known):
            if imp.target is not None:
                places = graph[module.name].setdefault(imp.target, [])
                if imp.where not in places:  # one statement may import several names
                    places.append(imp.where)
    return graph


def find_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """One circle per strongly connected component that has one, each as a module path
    ``[a, b, ..., a]`` starting at the component's smallest name; sorted."""
    edges = {node: sorted(set(targets)) for node, targets in graph.items()}
    for targets in list(edges.values()):
        for target in targets:
            edges.setdefault(target, [])
    # Tarjan's algorithm, iteratively (no recursion limit to think of).
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(edges[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1 or node in edges[node]:
                    components.append(component)
    return sorted(_circle_in(component, edges) for component in components)


def _circle_in(component: set[str], edges: Mapping[str, list[str]]) -> list[str]:
    """The shortest circle through the smallest module of ``component``."""
    start = min(component)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for child in edges[node]:
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if child in component and child not in came_from:
                    came_from[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"no circle in component {sorted(component)}")  # pragma: no cover


def is_reexport(module: Module) -> bool:
    """A thin public face: after its docstring, only ``from X import ...`` of one other
    module, a star among them (``simulator.virtual`` re-exporting ``runners.virtual``)."""
    body = list(module.tree.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if not body or not all(isinstance(node, ast.ImportFrom) for node in body):
        return False
    sources = {node.module for node in body if isinstance(node, ast.ImportFrom)}
    star = any(
        alias.name == "*"
        for node in body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    )
    return star and len(sources) == 1 and module.name not in sources


def mirrored_test(name: str) -> Path:
    """Where the tests of module ``name`` live: ``simulator.core.session`` ->
    ``tests/core/test_session.py``, ``statecharts.browse`` ->
    ``tests/statecharts/test_browse.py``, ``simulator.cli.program`` ->
    ``tests/cli/test_program.py``."""
    parts = name.split(".")
    if parts[0] == "simulator":
        parts = parts[1:]
    return ROOT.joinpath("tests", *parts[:-1], f"test_{parts[-1]}.py")


def needs_a_test(module: Module) -> bool:
    """Every source module but packages' ``__init__``, ``__main__`` and re-export faces."""
    return not (module.is_package or module.name.endswith(".__main__") or is_reexport(module))


@cache
def the_tree() -> dict[str, Module]:
    return discover(ROOT)


# -- the walk itself ----------------------------------------------------------------------


def test_the_walk_sees_both_packages_and_their_imports() -> None:
    # A walk that found nothing would pass every rule below.
    modules = the_tree()
    assert set(PACKAGES) <= set(modules)
    assert {"simulator.core.session", "simulator.cli.program", "statecharts.generate"} <= set(
        modules
    )
    graph = import_graph(modules)
    assert "simulator.core.chart_specs" in graph["simulator.core.session"]
    assert "simulator.launch" in graph["simulator.cli.parsers"]


def test_the_scanner_counts_every_kind_of_import(tmp_path: Path) -> None:
    files = {
        "simulator/__init__.py": "",
        "simulator/sub/__init__.py": "from simulator.sub.leaf import VALUE\n",
        "simulator/sub/leaf.py": "VALUE = 1\n",
        "simulator/top.py": (
            "from typing import TYPE_CHECKING\n"
            "import json\n"
            "from simulator.sub import leaf\n"  # a module: simulator.sub.leaf
            "from simulator.sub import VALUE\n"  # a name: the package
            "if TYPE_CHECKING:\n"
            "    from simulator import other\n"
            "def later() -> None:\n"
            "    import simulator.sub.leaf as again\n"
            "    from . import rel\n"
            "    from .sub.leaf import VALUE\n"
            "    importlib.import_module('simulator.other')\n"
        ),
        "simulator/other.py": "",
        "simulator/rel.py": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    modules = discover(tmp_path, ["simulator"])
    assert modules["simulator.sub"].is_package and not modules["simulator.top"].is_package
    found = imports_of(modules["simulator.top"], set(modules), ["simulator"])
    assert [(imp.target, imp.where.rpartition(":")[2]) for imp in found] == [
        ("simulator.sub.leaf", "3"),
        ("simulator.sub", "4"),
        ("simulator.other", "6"),
        ("simulator.sub.leaf", "8"),
        ("simulator.rel", "9"),
        ("simulator.sub.leaf", "10"),
        ("simulator.other", "11"),
    ]
    # A package's __init__ is the package's module.
    assert set(import_graph(modules)["simulator.sub"]) == {"simulator.sub.leaf"}


# -- (a) no import circles ----------------------------------------------------------------


def test_the_cycle_finder_finds_a_planted_circle() -> None:
    graph = {
        "a": ["b"],
        "b": ["c", "d"],
        "c": ["a"],
        "d": [],
        "e": ["e"],  # a module importing itself
        "f": ["a", "g"],
        "g": ["f"],
    }
    assert find_cycles(graph) == [["a", "b", "c", "a"], ["e", "e"], ["f", "g", "f"]]
    del graph["c"], graph["e"], graph["g"]
    assert find_cycles(graph) == []


def test_the_cycle_finder_finds_a_circle_hidden_in_a_function(tmp_path: Path) -> None:
    (tmp_path / "simulator").mkdir()
    (tmp_path / "simulator/__init__.py").write_text("")
    (tmp_path / "simulator/one.py").write_text("from simulator.two import f\n")
    (tmp_path / "simulator/two.py").write_text("def f() -> None:\n    from simulator import one\n")
    graph = import_graph(discover(tmp_path, ["simulator"]))
    assert find_cycles(graph) == [["simulator.one", "simulator.two", "simulator.one"]]


def test_no_import_circles() -> None:
    graph = import_graph(the_tree())
    circles = find_cycles(graph)
    report = []
    for circle in circles:
        steps = [
            f"    {a} -> {b} at {', '.join(graph[a][b])}" for a, b in itertools.pairwise(circle)
        ]
        report.append(" -> ".join(circle) + "\n" + "\n".join(steps))
    assert not circles, "import circles:\n" + "\n".join(report)


def package_of(module: str) -> str:
    """The package a module belongs to, for the package graph: ``simulator.core`` for
    ``simulator.core.session``; a top-level module (``simulator.launch``) is its own."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "simulator" else parts[0]


def package_graph(graph: Mapping[str, Mapping[str, list[str]]]) -> dict[str, dict[str, list[str]]]:
    """The import graph with every module replaced by its package; imports within one
    package are left out."""
    packages: dict[str, dict[str, list[str]]] = {}
    for importer, targets in graph.items():
        edges = packages.setdefault(package_of(importer), {})
        for target, places in targets.items():
            if package_of(target) != package_of(importer):
                edges.setdefault(package_of(target), []).extend(places)
    return packages


def test_the_package_graph_finds_a_circle_between_packages(tmp_path: Path) -> None:
    for name in ("simulator/core", "simulator/scenario"):
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / "__init__.py").write_text("")
    (tmp_path / "simulator/__init__.py").write_text("")
    (tmp_path / "simulator/core/session.py").write_text("import simulator.scenario.world\n")
    (tmp_path / "simulator/scenario/world.py").write_text("import simulator.core.errors\n")
    (tmp_path / "simulator/core/errors.py").write_text("")
    graph = package_graph(import_graph(discover(tmp_path, ["simulator"])))
    assert find_cycles(graph) == [["simulator.core", "simulator.scenario", "simulator.core"]]


def test_no_package_circles() -> None:
    """No circle between packages either: the error tree is at the bottom
    (``simulator.errors``), so the core and scenarios can both raise it."""
    graph = package_graph(import_graph(the_tree()))
    circles = find_cycles(graph)
    report = [
        " -> ".join(circle)
        + "".join(f"\n    {a} -> {b} at {graph[a][b][0]}" for a, b in itertools.pairwise(circle))
        for circle in circles
    ]
    assert not circles, "package circles:\n" + "\n".join(report)


# -- (b), (c), (d) and the packages' own rules: layers point one way ----------------------

COMMAND_LINE = ("simulator.cli", "simulator.pytest_plugin", "simulator.__main__")
"""The command line and the pytest plugin: on top of everything."""
ABOVE_THE_CORE = (
    "simulator.runners",
    "simulator.hosts",
    "simulator.tools",
    "simulator.launch",  # builds sessions with homes: above the core, below the runners
    *COMMAND_LINE,
)

# layer -> (what it must not import, where the rule is written)
LAYERS = {
    "simulator.core": (ABOVE_THE_CORE, "DESIGN.md, simulator/core/__init__.py"),
    "simulator.scenario": (ABOVE_THE_CORE, "DESIGN.md, simulator/scenario/__init__.py"),
    # Charts are data and a model: they may import the core and scenarios.
    "statecharts": (ABOVE_THE_CORE, "statecharts/__init__.py"),
    "simulator.hosts": (
        ("simulator.runners", "simulator.tools", *COMMAND_LINE),
        "simulator/hosts/__init__.py, simulator/tools/__init__.py",
    ),
    # A runner builds its session with simulator.launch, never with the command line.
    "simulator.runners": (
        ("simulator.tools", *COMMAND_LINE),
        "simulator/tools/__init__.py, simulator/launch.py",
    ),
}


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def layer_violations(
    layer: str, forbidden: Iterable[str], modules: Mapping[str, Module] | None = None
) -> list[str]:
    """Each import by a module of ``layer`` of a module within ``forbidden``; importing a
    re-export face (``simulator.virtual``) counts as importing what it re-exports."""
    modules = the_tree() if modules is None else modules
    known = set(modules)
    faces = {
        name: imp.raw
        for name, module in modules.items()
        if is_reexport(module)
        for imp in imports_of(module, known)[:1]
    }
    forbidden = tuple(forbidden)
    found = set()
    for module in modules.values():
        if not _within(module.name, layer):
            continue
        for imp in imports_of(module, known):
            seen_as = {imp.raw, imp.target or imp.raw, faces.get(imp.target or "", imp.raw)}
            if any(_within(name, f) for name in seen_as for f in forbidden):
                found.add(f"{imp.where}: {module.name} imports {imp.raw}")
    return sorted(found)


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_layers_point_one_way(layer: str) -> None:
    forbidden, rule = LAYERS[layer]
    found = layer_violations(layer, forbidden)
    rule_text = f"{layer} must not import {', '.join(forbidden)} ({rule})"
    assert not found, rule_text + ":\n" + "\n".join(found)


def test_the_layer_check_finds_a_forbidden_import(tmp_path: Path) -> None:
    files = {
        "simulator/__init__.py": "",
        "simulator/core/__init__.py": "",
        "simulator/core/fine.py": "from simulator.core import ok\n",
        "simulator/core/ok.py": "",
        "simulator/core/bad.py": "def f() -> None:\n    from simulator.runners.stdio import x\n",
        "simulator/core/sly.py": "import simulator.face\n",
        "simulator/face.py": '"""A face."""\nfrom simulator.runners.stdio import *\n',
        "simulator/runners/__init__.py": "",
        "simulator/runners/stdio.py": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    modules = discover(tmp_path, ["simulator"])
    found = layer_violations("simulator.core", ["simulator.runners"], modules)
    assert [line.partition(": ")[2] for line in found] == [
        "simulator.core.bad imports simulator.runners.stdio",
        "simulator.core.sly imports simulator.face",
    ]


def test_the_public_faces_stay_thin() -> None:
    # Users import these; each must stay a re-export, as is_reexport tells one.
    faces = {name for name, module in the_tree().items() if is_reexport(module)}
    assert {"simulator.virtual", "simulator.pipes", "simulator.remote"} <= set(faces)
    assert not is_reexport(the_tree()["simulator.launch"])


# -- (e) one test module per source module ------------------------------------------------


def test_every_source_module_has_its_mirrored_test_module() -> None:
    missing = [
        f"{module.where} -> {mirrored_test(name).relative_to(ROOT)}"
        for name, module in sorted(the_tree().items())
        if needs_a_test(module) and not mirrored_test(name).is_file()
    ]
    assert not missing, "source modules without their test module:\n" + "\n".join(missing)


def test_the_mirror_rule_maps_paths_as_documented() -> None:
    assert mirrored_test("simulator.core.session") == ROOT / "tests/core/test_session.py"
    assert mirrored_test("simulator.cli.program") == ROOT / "tests/cli/test_program.py"
    assert mirrored_test("simulator.tools.load.stats") == ROOT / "tests/tools/load/test_stats.py"
    assert mirrored_test("statecharts.browse") == ROOT / "tests/statecharts/test_browse.py"
    modules = the_tree()
    assert not needs_a_test(modules["simulator.tools.load"])  # an __init__
    assert not needs_a_test(modules["simulator.__main__"])
    assert not needs_a_test(modules["simulator.virtual"])
    assert needs_a_test(modules["simulator.launch"])
