"""The topic settings flush.messages and flush.ms are applied per partition, as in Kafka
(they were refused while DescribeConfigs reported them; issue 21, item 8).

Witness: the fsync-round histogram of /metrics (one count per flush round)."""

from __future__ import annotations

import pytest
from helpers.admin_http import scrape, value
from helpers.clienthelpers import kp_send_each
from helpers.waiting import wait_until

pytestmark = pytest.mark.timeout(120)

ROUNDS = "kafka_log_logflushstats_logflushrateandtimems_count"


def _create(bootstrap: str, name: str, config: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 15000})
    admin.create_topics([NewTopic(name, 1, 1, config=config)])[name].result(15)


def test_flush_messages_and_flush_ms_per_topic(server_factory):
    server = server_factory()  # broker default: ack after write, no fsync
    bootstrap = server.bootstrap
    _create(bootstrap, "lazy", {})
    _create(bootstrap, "synced", {"flush.messages": "1"})
    _create(bootstrap, "timed", {"flush.ms": "200"})
    before = value(scrape(server), ROUNDS)
    kp_send_each(bootstrap, "lazy", 5)
    assert value(scrape(server), ROUNDS) == before  # the broker default: no fsync
    kp_send_each(bootstrap, "synced", 5)  # one at a time, each acknowledged after its fsync
    after_synced = value(scrape(server), ROUNDS)
    assert after_synced - before == 5
    kp_send_each(bootstrap, "timed", 1)
    wait_until(lambda: value(scrape(server), ROUNDS) > after_synced, 20,
               "the fsync flush.ms=200 asks for")
