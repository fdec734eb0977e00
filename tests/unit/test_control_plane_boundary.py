"""One control plane (issue 22): the handlers in ``logserver/handlers/`` serve both modes
through ``broker.control`` (logserver/control), so none of them branches on the mode.

Checked on the sources' syntax trees: no handler compares a ``.cluster`` attribute to
None (``broker.cluster is not None``, ``node.cluster is None``, ``== None``), none reads
``broker.cluster`` at all (what a handler needs of the cluster is the control plane's),
and the cluster-only handler table (``logserver/cluster/handlers.py``) that replaced
handlers in cluster mode does not exist. The checker itself is tried on sources that
break each rule, so a checker that finds nothing cannot pass.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HANDLERS = ROOT / "logserver" / "handlers"


def _is_cluster_attribute(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "cluster"


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def mode_branches(source: str) -> list[tuple[int, str]]:
    """(line, what) of each mode check in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_cluster_attribute(s) for s in sides) and any(_is_none(s) for s in sides):
                found.append((node.lineno, "`.cluster` compared to None"))
        elif _is_cluster_attribute(node) and isinstance(node, ast.Attribute) \
                and isinstance(node.value, ast.Name) and node.value.id == "broker":
            found.append((node.lineno, "reads broker.cluster"))
    return found


@pytest.mark.parametrize("source, expected", [
    ("if broker.cluster is not None:\n    pass\n", 2),  # the compare and the read
    ("x = self.broker.cluster is None\n", 1),
    ("ok = None == b.cluster\n", 1),
    ("node = broker.cluster\n", 1),
    ("x = broker.control.topic_names()\n", 0),
    ("y = operations.cluster_bits\n", 0),
])
def test_the_checker_finds_mode_branches(source: str, expected: int) -> None:
    assert len(mode_branches(source)) == expected


def test_no_handler_branches_on_the_mode() -> None:
    modules = sorted(HANDLERS.glob("*.py"))
    assert len(modules) > 40  # the handlers are where they are expected
    offenders = [f"{path.relative_to(ROOT)}:{line}: {what}"
                 for path in modules
                 for line, what in mode_branches(path.read_text(encoding="utf-8"))]
    assert offenders == []


def test_the_cluster_handler_table_is_gone() -> None:
    assert not (ROOT / "logserver" / "cluster" / "handlers.py").exists()
    assert (ROOT / "logserver" / "control" / "api.py").exists()
