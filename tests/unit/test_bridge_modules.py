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

from pathlib import Path

import pytest
from helpers.import_graph import MAX_LINES, cycles, import_graph, oversized

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "mqtt_bridge"


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
