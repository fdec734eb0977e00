"""Fixtures shared by several integration test modules (the suite-wide ones, ``server``,
``module_server``, ``server_factory``, ... are in tests/conftest.py).

- ``seeded``: for the bad-input tests (test_server_badinput.py, test_server_validation.py):
  a seeded topic on ``module_server`` and a healthy connection opened before the bad input,
  with a check that both are still served afterwards.
"""

from __future__ import annotations

import pytest
from helpers import rawwire as rw
from helpers.clienthelpers import create_topic, kp_produce, kp_read


@pytest.fixture
def seeded(module_server, topic_name):
    """A topic with a few records, a healthy raw connection opened before the bad input,
    and a check to run afterwards."""
    create_topic(module_server.bootstrap, topic_name, partitions=1)
    kp_produce(module_server.bootstrap, topic_name,
               [{"key": b"k%d" % i, "value": b"seed-%d" % i} for i in range(5)])
    before = kp_read(module_server.bootstrap, topic_name)
    assert len(before) == 5
    healthy = rw.Conn(module_server.port)
    rw.api_versions_ok(conn=healthy, correlation_id=1)

    def check_still_serving():
        # the connection opened before the bad input is still served
        rw.api_versions_ok(conn=healthy, correlation_id=2)
        # the log is unchanged
        assert kp_read(module_server.bootstrap, topic_name) == before
        # and new clients are served too: produce works and lands after the seed records
        rw.api_versions_ok(module_server.port)
        more = kp_produce(module_server.bootstrap, topic_name, [{"value": b"after"}])
        assert more[0].offset == 5
        assert module_server.running, "the server process died"

    try:
        yield topic_name, check_still_serving
    finally:
        healthy.close()
