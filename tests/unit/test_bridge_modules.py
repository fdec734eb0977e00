"""The MQTT bridge is components with narrow interfaces (issue 22, docs/architecture.md).

No import cycle among ``mqtt_bridge`` modules, counting every import there is: at the top
of a module, inside a function (a lazy import), under ``TYPE_CHECKING``, through
``importlib.import_module``, and a package's ``__init__`` (``from .codec import X`` imports
``mqtt_bridge.codec``, whose ``__init__`` imports its modules). A cycle means two modules
know each other's insides; a component depends on the others through a Protocol or a
small class instead. And no module over 1,000 lines (the project's rule). Checked on
the sources' syntax trees, so an import that only runs on some path is caught too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "mqtt_bridge"
MAX_LINES = 1000


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> source file, for every module of ``package`` under ``root``
    (a package's ``__init__.py`` is the package itself)."""
    names = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _imported(tree: ast.AST, name: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of every import anywhere in ``tree``, relative ones resolved
    against module ``name``; ``from x import y`` yields ``x.y`` (y may be a module) and ``x``."""
    here = name.split(".") if is_package else name.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            target = ".".join([*base, *([node.module] if node.module else [])])
            for alias in node.names:
                yield node.lineno, f"{target}.{alias.name}"
            yield node.lineno, target
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            first = node.args[0]
            if (called in ("import_module", "__import__") and isinstance(first, ast.Constant)
                    and isinstance(first.value, str)):
                yield node.lineno, first.value


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports (in any form)."""
    modules = module_names(root, package)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        edges: set[str] = set()
        for _line, target in _imported(tree, name, path.name == "__init__.py"):
            if target in modules and target != name:
                edges.add(target)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def oversized(root: Path, package: str) -> list[str]:
    out = []
    for name, path in module_names(root, package).items():
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > MAX_LINES:
            out.append(f"{name}: {n} lines")
    return out


def test_no_import_cycle_among_bridge_modules() -> None:
    graph = import_graph(ROOT, PACKAGE)
    assert "mqtt_bridge.bridge" in graph and graph["mqtt_bridge.bridge"], "the walk found no imports"
    assert cycles(graph) == []


def test_no_bridge_module_over_the_limit() -> None:
    assert oversized(ROOT, PACKAGE) == []


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize("back_edge", [
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import A\n",
    "def later():\n    from . import a\n",
    "import importlib\nX = importlib.import_module('pkg.a')\n",
    "from pkg.sub import thing\n",  # through sub/__init__.py, which imports .. a
])
def test_the_walk_sees_a_cycle_through_every_kind_of_import(tmp_path: Path, back_edge: str) -> None:
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from .b import B\n",
        "pkg/b.py": back_edge,
        "pkg/sub/__init__.py": "from ..a import A as thing\n",
        "pkg/c.py": "from .b import B\n",  # outside the cycle
    })
    found = cycles(import_graph(tmp_path, "pkg"))
    assert len(found) == 1 and {"pkg.a", "pkg.b"} <= set(found[0]) and "pkg.c" not in found[0], found


def test_no_cycle_when_the_edges_go_one_way(tmp_path: Path) -> None:
    _write(tmp_path, {
        "pkg/__init__.py": "from .a import A\n",
        "pkg/a.py": "from .b import B\nfrom .sub.leaf import L\n",
        "pkg/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .sub import leaf\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/leaf.py": "import os\n",
    })
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.a"] == {"pkg.b", "pkg.sub.leaf"} and graph["pkg.b"] == {"pkg.sub", "pkg.sub.leaf"}
    assert cycles(graph) == []


def test_the_size_check_counts_lines(tmp_path: Path) -> None:
    _write(tmp_path, {"pkg/__init__.py": "", "pkg/big.py": "x = 1\n" * (MAX_LINES + 1),
                      "pkg/ok.py": "x = 1\n" * MAX_LINES})
    assert oversized(tmp_path, "pkg") == [f"pkg.big: {MAX_LINES + 1} lines"]
