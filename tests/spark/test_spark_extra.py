"""The ``spark`` extra installs everything ``spark_examples`` imports, at the versions
the rest of the project is tested with (pyspark: the 3.5 and 4 lines, whose connector
spark_examples.session picks; the ``test`` extra pins the one CI runs)."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib

from helpers.serverproc import REPO_ROOT
from packaging.requirements import Requirement

# The packages this project installs (pyproject's package list), not third-party imports.
OUR_PACKAGES = {name.rstrip("*") for name in tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
                ["tool"]["setuptools"]["packages"]["find"]["include"]}


def _extras() -> dict[str, list[str]]:
    doc = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    return doc["project"]["optional-dependencies"]


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _third_party_imports() -> set[str]:
    found = set()
    for path in (REPO_ROOT / "spark_examples").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m not in OUR_PACKAGES}


def test_spark_extra_installs_every_import_of_spark_examples():
    spark = {_name(r) for r in _extras()["spark"]}
    base = {_name(r) for r in
            tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]}
    distributions = importlib.metadata.packages_distributions()
    imports = _third_party_imports()
    assert {"pyspark", "kafka", "paho"} <= imports  # the scan sees what the demo needs
    for module in imports:
        names = {d.lower().replace("_", "-") for d in distributions.get(module, [])}
        assert names, f"spark_examples imports {module}, which no installed distribution provides"
        assert names & (spark | base), f"{module} ({names}) is not in the spark extra: {spark}"


def test_spark_extra_pins_what_the_tests_use():
    extras = _extras()
    pins = {_name(r): r for r in extras["test"]}
    for requirement in extras["spark"]:
        name = _name(requirement)
        if name in pins and name != "pyspark":
            assert requirement.replace(" ", "") == pins[name].replace(" ", ""), (requirement,
                                                                                  pins[name])
    assert "pyspark==3.5.9" in extras["test"]
    assert importlib.metadata.version("pyspark") == "3.5.9"


def test_spark_extra_takes_pyspark_3_5_and_4():
    """Both Spark lines users run (Scala 2.12 and 2.13 builds), the tested pin among them."""
    (pyspark,) = [Requirement(r) for r in _extras()["spark"] if _name(r) == "pyspark"]
    accepted = ["3.5.9", "3.5.10", "4.0.0", "4.0.1", "4.1.0", "4.3.0"]
    refused = ["3.4.4", "3.5.8", "5.0.0"]
    assert [v for v in accepted + refused if pyspark.specifier.contains(v)] == accepted
    (tested,) = [Requirement(r) for r in _extras()["test"] if _name(r) == "pyspark"]
    assert all(pyspark.specifier.contains(s.version) for s in tested.specifier)
