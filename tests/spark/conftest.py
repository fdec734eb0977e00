"""The Spark tests' one local session (tests/helpers/spark_support.py): every test that asks
for ``spark`` runs on the same pytest-xdist worker (tests/conftest.py), so one JVM serves
the run."""

from __future__ import annotations

import pytest
from helpers.spark_support import spark_session
from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> SparkSession:
    return spark_session()
