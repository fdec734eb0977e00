"""The import graph of a package, read from its sources' syntax trees, and its cycles.

Every import counts: at the top of a module, inside a function (a lazy import), under
``TYPE_CHECKING``, through ``importlib.import_module``, and a package's ``__init__``
(``from .codec import X`` imports ``pkg.codec``, whose ``__init__`` imports its
modules). Used by tests/unit/test_import_cycles.py and test_bridge_modules.py.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

__all__ = ["MAX_LINES", "cycles", "import_graph", "module_names", "oversized"]

MAX_LINES = 1000  # the project's limit on a module's length


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
