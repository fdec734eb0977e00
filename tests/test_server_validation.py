"""Produce validates every record, not only the CRC (issue 11, point 3), on a real server.

CRC-valid batches whose records lie about themselves, compressed payloads that do not
inflate or inflate past ``max.message.bytes`` (decompression bombs), and null keys on a
compacted topic are refused with Kafka's error codes; nothing is appended, the
connection and the server keep serving.
"""

from __future__ import annotations

import pytest
import rawwire as rw
from batchforge import forge, raw_record
from bombs import zeros_bomb
from confluent_kafka.admin import AdminClient, NewTopic
from test_server_badinput import seeded  # noqa: F401 - the shared fixture

from kafkaproto.batch import Compression

pytestmark = pytest.mark.timeout(120)


def _produce(port: int, topic: str, batch: bytes, correlation_id: int) -> int:
    with rw.Conn(port) as c:
        res = c.call(rw.request(rw.API_PRODUCE, 3, correlation_id, rw.produce_v3(topic, 0, batch)))
        assert res is not None, "the server closed the connection on a bad batch"
        assert res[0] == correlation_id
        ((err, _),) = rw.parse_produce_v3_response(res[1]).values()
        return err


@pytest.mark.parametrize(
    "make, want",
    [
        pytest.param(lambda: forge(b"\x07not records at all", record_count=1),
                     rw.CORRUPT_MESSAGE, id="garbage-records"),
        pytest.param(lambda: forge(raw_record(offset_delta=0) + raw_record(offset_delta=1),
                                   record_count=3),
                     rw.INVALID_RECORD, id="count-says-3-records-hold-2"),
        pytest.param(lambda: forge(raw_record(offset_delta=0) + raw_record(offset_delta=5),
                                   record_count=2),
                     rw.INVALID_RECORD, id="offset-delta-out-of-order"),
        pytest.param(lambda: forge(raw_record(offset_delta=0, value_length=-7), record_count=1),
                     rw.CORRUPT_MESSAGE, id="negative-value-length"),
        pytest.param(lambda: forge(b"\x00" * 40, record_count=1, attributes=int(Compression.GZIP)),
                     rw.CORRUPT_MESSAGE, id="garbage-gzip"),
        pytest.param(lambda: forge(zeros_bomb(Compression.GZIP, 64 << 20), record_count=1,
                                   attributes=int(Compression.GZIP)),
                     rw.CORRUPT_MESSAGE, id="gzip-bomb-64MiB"),
        pytest.param(lambda: forge(zeros_bomb(Compression.ZSTD, 1 << 30), record_count=1,
                                   attributes=int(Compression.ZSTD)),
                     rw.CORRUPT_MESSAGE, id="zstd-bomb-1GiB"),
    ],
)
def test_crc_valid_but_wrong_batches_are_refused(module_server, seeded, make, want):  # noqa: F811
    topic, check = seeded
    assert _produce(module_server.port, topic, bytes(make()), 71) == want
    check()


def test_null_key_on_a_compacted_topic_is_invalid_record(module_server, topic_name):
    admin = AdminClient({"bootstrap.servers": module_server.bootstrap})
    futures = admin.create_topics([NewTopic(topic_name, 1, config={"cleanup.policy": "compact"})])
    futures[topic_name].result(30)
    assert _produce(module_server.port, topic_name, rw.record_batch([(None, b"v")]), 72) == \
        rw.INVALID_RECORD
    assert _produce(module_server.port, topic_name, rw.record_batch([(b"k", b"v")]), 73) == 0
