"""The test suite's own layout (issue 23, docs/testing.md): what test modules share lives in
the one helpers package, ``tests/helpers/`` (``from helpers.x import ...``), and no test
module, conftest or helper imports a test module (``import test_x`` / ``from test_x import``).
A test module that imports another one runs that module's import-time code, couples two
files that look independent, and breaks as soon as either is moved to another folder.
Checked on the syntax trees, so an import inside a function is caught too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def imports_of_test_modules(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, module) of every import of a module named ``test_*`` anywhere in ``tree``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            if name.split(".")[0].startswith("test_"):
                yield node.lineno, name


def test_the_check_sees_every_form_of_import() -> None:
    source = ("import os\n"
              "import test_a\n"
              "from test_b import x as y\n"
              "from helpers.waiting import wait_until\n"
              "from . import test_relative\n"
              "def f():\n"
              "    import test_c.sub\n"
              "    from test_d import (\n"
              "        z,\n"
              "    )\n")
    found = sorted(imports_of_test_modules(ast.parse(source)))
    assert found == [(2, "test_a"), (3, "test_b"), (7, "test_c.sub"), (8, "test_d")]


def test_no_test_module_imports_another_one() -> None:
    files = sorted(TESTS.rglob("*.py"))
    assert len([f for f in files if f.name.startswith("test_")]) > 100  # the whole suite
    offenders = [f"{path.relative_to(TESTS)}:{line}: {name}"
                 for path in files
                 for line, name in imports_of_test_modules(ast.parse(path.read_text(), str(path)))]
    assert offenders == [], ("test modules import other test modules; move what they share "
                             "into tests/helpers/:\n" + "\n".join(offenders))
