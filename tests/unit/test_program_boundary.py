"""The server and the MQTT bridge are two independent programs (issue 22, docs/architecture.md).

Neither ``logserver`` nor ``mqtt_bridge`` imports the other, in any form: at the top of a
module, inside a function (a lazy import), under ``TYPE_CHECKING`` or through
``importlib.import_module``; the server starts the bridge as a program
(``python -m mqtt_bridge``). What both need lives in ``commonlib`` or, where it is
protocol, in ``kafkaproto``, and those two import neither program. Checked on the
sources' syntax trees, so an import that only runs on some path is caught too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: package -> the top-level packages none of its modules may import
FORBIDDEN = {
    "logserver": {"mqtt_bridge"},
    "mqtt_bridge": {"logserver"},
    "commonlib": {"logserver", "mqtt_bridge"},
    "kafkaproto": {"logserver", "mqtt_bridge"},
}


def imported_modules(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, module name) of every absolute import anywhere in ``tree``: statements at
    any depth (functions, ``if TYPE_CHECKING:``, try blocks) and ``import_module("...")``
    or ``__import__("...")`` calls with a literal name. Relative imports stay inside
    their own package, so they cannot reach another top-level package."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                yield node.lineno, node.module
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            first = node.args[0]
            if (name in ("import_module", "__import__") and isinstance(first, ast.Constant)
                    and isinstance(first.value, str)):
                yield node.lineno, first.value


def crossings(package: str) -> list[str]:
    """``path:line imports name`` for each import of a package ``package`` must not use."""
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, name in imported_modules(tree):
            if name.split(".")[0] in FORBIDDEN[package]:
                found.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_module_imports_the_other_program(package: str) -> None:
    assert crossings(package) == []


def test_the_walk_sees_every_kind_of_import() -> None:
    source = (
        "from __future__ import annotations\n"
        "import importlib\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from mqtt_bridge.bridge import Bridge\n"
        "def start():\n"
        "    import mqtt_bridge.cli as cli\n"
        "    from . import sibling\n"
        "    return importlib.import_module('mqtt_bridge.admin'), __import__('logserver')\n"
        "class Late:\n"
        "    def method(self):\n"
        "        from logserver import server\n"
    )
    found = sorted(imported_modules(ast.parse(source)))
    assert found == [(1, "__future__"), (2, "importlib"), (3, "typing"),
                     (5, "mqtt_bridge.bridge"), (7, "mqtt_bridge.cli"),
                     (9, "logserver"), (9, "mqtt_bridge.admin"), (12, "logserver")]


def test_the_walk_reads_the_real_packages() -> None:
    """Not vacuous: every package has its modules, and the shared code is reached by both
    programs (the server's TLS listener and the bridge's, the one log format)."""
    for package in FORBIDDEN:
        assert len(list((ROOT / package).rglob("*.py"))) > 5, package
    server = ast.parse((ROOT / "logserver" / "server.py").read_text(encoding="utf-8"))
    bridge = ast.parse((ROOT / "mqtt_bridge" / "cli.py").read_text(encoding="utf-8"))
    assert "commonlib.tls_accept" in {name for _, name in imported_modules(server)}
    assert "commonlib" in {name for _, name in imported_modules(bridge)}
