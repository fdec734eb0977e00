"""Shared pytest fixtures: real ``logserver`` processes on 127.0.0.1.

Fixtures
- ``server``: a fresh server (own data dir under tmp_path) for one test.
- ``module_server``: one server shared by the tests of a module (fresh data dir per
  module); tests sharing it must use their own topic names (``topic_name``).
- ``server_factory``: ``server_factory(settings={...}, env={...}, ...)`` starts more
  servers (or servers with special settings); all of them are stopped after the test.
- ``java_client_tier``: the Java client tier (tests/helpers/java/ClientTier.java),
  compiled once a run (all workers); the command that runs it.

A failing test's report gets the output (stderr and stdout) of every server it used.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
from pathlib import Path

import pytest
from helpers.serverproc import ServerProcess

from commonlib import childproc

_SERVERS_KEY = pytest.StashKey[list]()
_counter = itertools.count()


def pytest_configure(config):
    _own_port_range()
    config.addinivalue_line("markers", "slow: takes more than a few seconds (deselect: -m 'not slow')")
    config.addinivalue_line("markers", "kcat: needs Debian's kcat binary")
    config.addinivalue_line(
        "markers", "alone: run with no other test beside it (tests/run.sh runs these after "
        "the parallel part): checks millisecond timing guarantees a loaded machine breaks")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups (--dist loadgroup)
def pytest_collection_modifyitems(config, items):
    """Every test that uses the shared Spark session (a ``spark`` fixture) runs on one
    pytest-xdist worker: one JVM (local[2], 1 GiB heap) for the run, not one per worker."""
    if not config.pluginmanager.hasplugin("xdist"):
        return  # one process (the pyspark tier's venv has no xdist): nothing to group
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("spark-session"))
    if os.environ.get("PYTEST_XDIST_WORKER"):
        _longest_first(items)


_DURATIONS = Path(__file__).with_name("durations.txt")


def _longest_first(items: list[pytest.Item]) -> None:
    """Under xdist, the tests tests/durations.txt lists as long go first, longest first; the
    rest keep their order. Workers take tests in collection order (the spark-session group,
    the largest unit, first of all), so a 100 s test collected late would start near the end
    and run on alone while the other workers idle. Every worker collects the same order."""
    seconds: dict[str, float] = {}
    for line in _DURATIONS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            value, nodeid = line.split(maxsplit=1)
            seconds[nodeid] = float(value)
    items.sort(key=lambda item: -seconds.get(item.nodeid, 0.0))  # stable: the rest keep their order


def _own_port_range() -> None:
    """Under pytest-xdist, give this worker its own slice of free_port's range: workers are
    separate processes, and two of them could otherwise pick the same port at once (each
    process only remembers its own). Children inherit the slice through the environment."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")  # gw0, gw1, ...
    if not worker:
        return
    index, count = int(worker.removeprefix("gw")), int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    low, high = childproc.port_range()  # the whole range, or the one the user gave
    size = (high - low) // count
    os.environ[childproc.PORT_RANGE_ENV] = f"{low + index * size}-{low + (index + 1) * size}"


def _register(node, server: ServerProcess) -> None:
    node.stash.setdefault(_SERVERS_KEY, []).append(server)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:
        servers = list(item.stash.get(_SERVERS_KEY, []))
        # module-scoped servers the test used
        for name in getattr(item, "fixturenames", ()):
            value = item.funcargs.get(name) if hasattr(item, "funcargs") else None
            if isinstance(value, ServerProcess) and value not in servers:
                servers.append(value)
        for srv in servers:
            report.sections.append(
                (f"logserver {srv.bootstrap} output ({srv.log_path})", srv.output_tail())
            )
    return report


def _start(request, server: ServerProcess) -> ServerProcess:
    _register(request.node, server)
    request.addfinalizer(server.stop)  # by pid, even when the test failed
    server.start()
    return server


@pytest.fixture
def server(request, tmp_path) -> ServerProcess:
    """A fresh logserver for this test, data in ``tmp_path/data``."""
    return _start(request, ServerProcess(tmp_path / "data"))


@pytest.fixture(scope="module")
def module_server(request, tmp_path_factory) -> ServerProcess:
    """One logserver per test module (3 partitions per auto-created topic)."""
    base = tmp_path_factory.mktemp("module-server")
    srv = ServerProcess(base / "data", settings={"num.partitions": 3})
    request.addfinalizer(srv.stop)
    srv.start()
    return srv


@pytest.fixture
def server_factory(request, tmp_path):
    """Start extra servers: ``server_factory(settings=..., env=..., start=True)``."""

    def make(*, start: bool = True, data_dir=None, **kwargs) -> ServerProcess:
        n = next(_counter)
        if data_dir is None and kwargs.get("base_flags", True):
            data_dir = tmp_path / f"data{n}"
        kwargs.setdefault("log_path", tmp_path / f"logserver-{n}.log")
        srv = ServerProcess(data_dir, **kwargs)
        _register(request.node, srv)
        request.addfinalizer(srv.stop)
        if start:
            srv.start()
        return srv

    return make


@pytest.fixture
def topic_name(request) -> str:
    """A topic name unique to this test (legal Kafka topic characters only)."""
    base = re.sub(r"[^A-Za-z0-9._-]", "-", request.node.name)[:180]
    return f"t-{base}-{next(_counter)}"


@pytest.fixture(scope="session")
def java_client_tier(tmp_path_factory) -> list[str]:
    """tests/helpers/java/ClientTier.java compiled once a run (javac costs seconds of CPU),
    shared by the pytest-xdist workers: the command that runs it (helpers.javaclient.run_facts)."""
    from helpers.javaclient import compile_shared

    base = tmp_path_factory.getbasetemp()
    return compile_shared("ClientTier", base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base)


@pytest.fixture(scope="session")
def kcat_bin() -> str:
    """Path of Debian's kcat; skipped locally when absent, a failure under CI."""
    path = shutil.which("kcat") or shutil.which("kafkacat")
    if path is None:
        msg = "kcat not installed (bash tests/run.sh installs it with apt-get)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return path



# -- clusters: real etcd and three brokers (tests/helpers/clusterprocs.py) ---------------------------

@pytest.fixture
def etcd(tmp_path):
    """A fresh etcd on free loopback ports, stopped by its pid afterwards."""
    from helpers.clusterprocs import EtcdProcess

    proc = EtcdProcess(tmp_path / "etcd-data")
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def cluster(tmp_path, etcd):
    """Three brokers, replication factor 3, min.insync.replicas 2 (files may override)."""
    from helpers.clusterprocs import Cluster

    nodes = Cluster(tmp_path, etcd, 3, **{"min.insync.replicas": 2,
                                          "default.replication.factor": 3,
                                          "replica.lag.time.max.ms": 5000})
    try:
        yield nodes.start()
    finally:
        nodes.stop()


@pytest.fixture(params=["single", "cluster"])
def log_bootstrap(request) -> str:
    """The bootstrap string of the log a test runs against: one ``server``, or the
    3-broker ``cluster`` (RF 3, min.insync.replicas 2). Tests taking this run twice."""
    if request.param == "single":
        return request.getfixturevalue("server").bootstrap
    return request.getfixturevalue("cluster").bootstrap
