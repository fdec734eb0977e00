"""No import cycle among the production modules, and none over 1,000 lines (issue 22).

Every import counts, as tests/helpers/import_graph.py reads them: lazy imports inside
functions, imports under ``TYPE_CHECKING``, ``importlib.import_module`` and a package's
``__init__``. The layering this keeps (docs/architecture.md): ``logserver.broker`` is the
composition root that nothing imports; components name ``logserver.services``'
``BrokerServices`` or their own narrow Protocols instead, and shared constants live in
small modules below them (``logserver.internal_topics``, ``logserver.handlers.versions``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.import_graph import cycles, import_graph, oversized

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ["logserver", "kafkaproto", "mqtt_bridge", "commonlib"]


# One import each package is known to have: the walk did find the imports. (commonlib's
# modules import none of each other.)
KNOWN_EDGE = {
    "logserver": ("logserver.server", "logserver.broker"),
    "kafkaproto": ("kafkaproto.frames", "kafkaproto.registry"),
    "mqtt_bridge": ("mqtt_bridge.bridge", "mqtt_bridge.config"),
    "commonlib": None,
}


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycle(package: str) -> None:
    graph = import_graph(ROOT, package)
    known = KNOWN_EDGE[package]
    assert graph and (known is None or known[1] in graph[known[0]]), "the walk missed imports"
    assert cycles(graph) == []


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_over_the_limit(package: str) -> None:
    assert oversized(ROOT, package) == []



def test_nothing_imports_the_composition_root() -> None:
    """Only the process entry points build a Broker; every other module depends on
    ``BrokerServices`` (a name in a docstring or comment is not an import)."""
    graph = import_graph(ROOT, "logserver")
    importers = sorted(name for name, edges in graph.items() if "logserver.broker" in edges)
    assert importers == ["logserver.server"], importers
