"""The log cleaner runs on its own cadence, ``log.cleaner.backoff.ms`` (issue 21, item 9),
not on the retention check interval: a compacted topic's rolled segments are cleaned
within seconds while ``log.retention.check.interval.ms`` is an hour."""

from __future__ import annotations

import pytest
from helpers.clienthelpers import ck_produce, kp_read
from helpers.waiting import wait_until

pytestmark = pytest.mark.timeout(120)

KEYS = [b"k%02d" % k for k in range(20)]


def _create(bootstrap: str, name: str, config: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 15000})
    admin.create_topics([NewTopic(name, 1, 1, config=config)])[name].result(15)


def _produce_rounds(bootstrap: str, topic: str, rounds: range) -> dict[bytes, bytes]:
    """Every key once per round, one record per batch (so that segments roll often)."""
    items = [{"key": key, "value": b"r%03d-" % r + key + b"." * 80, "partition": 0}
             for r in rounds for key in KEYS]
    ck_produce(bootstrap, topic, items, **{"linger.ms": 0, "batch.num.messages": 1})
    return {item["key"]: item["value"] for item in items}


def _only_latest(bootstrap: str, topic: str, latest: dict[bytes, bytes]) -> bool:
    """A reader from the beginning sees one record per key, its latest value: every
    earlier round sat in segments that were rolled, and the cleaner removed it."""
    got = [(r.key, r.value) for r in kp_read(bootstrap, topic)]
    return got == list(latest.items())


def test_compaction_runs_on_the_cleaner_backoff_not_the_retention_interval(server_factory,
                                                                            topic_name):
    srv = server_factory(settings={"log.cleaner.backoff.ms": 200,
                                   "log.retention.check.interval.ms": 3_600_000})
    bootstrap = srv.bootstrap
    # ~1 KB segments: the last round alone (20 batches of ~180 bytes) spans several, so
    # the active segment holds only latest values.
    _create(bootstrap, topic_name, {"cleanup.policy": "compact", "segment.bytes": "1024"})
    latest = _produce_rounds(bootstrap, topic_name, range(10))
    assert len(srv.segment_files(topic_name, 0)) > 10
    wait_until(lambda: _only_latest(bootstrap, topic_name, latest), 20,
               "the cleaner to leave only the latest value per key")
    # and again for segments rolled later: the cleaner keeps running on its cadence
    latest = _produce_rounds(bootstrap, topic_name, range(10, 13))
    wait_until(lambda: _only_latest(bootstrap, topic_name, latest), 20,
               "the cleaner to clean the segments rolled since")
