"""Responses pipelined behind a parked long-poll Fetch keep coming, in request order.

librdkafka sends a Fetch that parks (nothing to read, max_wait_ms) and, right behind it
on the same connection, Metadata, FindCoordinator, CreateTopics... Once the parked Fetch
is answered, everything queued behind it leaves at once; when that is more than the
transport's high-water mark (a full Metadata of a few hundred topics, ~100 KB) the
connection used to stop reading for good (issue 21): the first round was answered and
nothing after it ever was. Here on the raw wire, rounds of [parked Fetch, large Metadata]
on one connection, with responses over 64 KB and over 1 MB; every response must arrive,
in request order (correlation ids), round after round.
"""

from __future__ import annotations

import logging
import struct

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic
from helpers import rawwire as rw
from helpers.waiting import wait_until

pytestmark = pytest.mark.timeout(300)

PARK_MS = 500  # librdkafka's default fetch.wait.max.ms
RECV_TIMEOUT = 10.0  # one response missing this long: the connection has stopped answering
NAME_CHARS = 200  # long names make a full Metadata large without many partition files
TOPICS = 500  # with 200-character names: a full Metadata v4 of ~117 KB


def topic_names(prefix: str, count: int, chars: int = NAME_CHARS) -> list[str]:
    return [f"{prefix}{i:05d}-".ljust(chars, "x") for i in range(count)]


def create_topics(bootstrap: str, names: list[str], batch: int = 250, partitions: int = 1) -> None:
    """CreateTopics in batches through librdkafka's admin client."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 60000})
    for start in range(0, len(names), batch):
        futures = admin.create_topics([NewTopic(name, partitions, 1) for name in names[start:start + batch]],
                                      operation_timeout=60, request_timeout=120)
        for future in futures.values():
            future.result()


@pytest.fixture(scope="module")
def many_topics(module_server) -> list[str]:
    """500 one-partition topics on the module's server (the tests add theirs only)."""
    names = topic_names("pipe-", TOPICS)
    create_topics(module_server.bootstrap, names)
    return names


def receive(conn: rw.Conn, round_no: int, expected: int) -> bytes:
    """The next response frame, which must answer ``expected`` (request order)."""
    try:
        frame = conn.recv_frame(RECV_TIMEOUT)
    except TimeoutError:
        pytest.fail(f"round {round_no}: no response to correlation id {expected} in "
                    f"{RECV_TIMEOUT:.0f} s: the connection stopped answering")
    assert frame is not None, f"round {round_no}: the server closed the connection"
    (correlation_id,) = struct.unpack_from(">i", frame)
    assert correlation_id == expected, (
        f"round {round_no}: response to {correlation_id} where {expected} was due")
    return frame[4:]


def parked_fetch_rounds(conn: rw.Conn, topic: str, metadata: bytes, rounds: int,
                        per_round: int = 1) -> list[int]:
    """``rounds`` times, [parked Fetch, Metadata] x ``per_round`` sent in one write; checks
    every answer (the Fetch empty and error-free) and returns the Metadata bodies' sizes."""
    sizes = []
    correlation_id = 1000
    for round_no in range(rounds):
        sent = []
        wire = b""
        for _ in range(per_round):
            fetch = rw.fetch_v4(topic, {0: 0}, max_wait_ms=PARK_MS)
            wire += rw.request(rw.API_FETCH, 4, correlation_id, fetch)
            wire += rw.request(rw.API_METADATA, 4, correlation_id + 1, metadata)
            sent += [(rw.API_FETCH, correlation_id), (rw.API_METADATA, correlation_id + 1)]
            correlation_id += 2
        assert conn.send(wire), f"round {round_no}: the server closed the connection"
        for api_key, expected in sent:
            body = receive(conn, round_no, expected)
            if api_key == rw.API_FETCH:
                assert rw.parse_fetch_v4(body) == [(topic, 0, 0, 0)]
            else:
                sizes.append(len(body))
    return sizes


def test_full_metadata_over_64k_behind_a_parked_fetch(module_server, many_topics):
    """Six rounds of [parked Fetch, full Metadata of 500 topics] on one connection."""
    with rw.Conn(module_server.port) as conn:
        sizes = parked_fetch_rounds(conn, many_topics[0], rw.metadata_v4(None, False), rounds=6)
        # still answering, also requests sent on their own after the rounds
        rw.api_versions_ok(conn=conn, correlation_id=5)
        answer = conn.call(rw.request(rw.API_METADATA, 4, 6, rw.metadata_v4(None, False)))
    assert len(sizes) == 6 and min(sizes) > 64 * 1024, sizes
    assert answer is not None and answer[0] == 6
    assert set(many_topics) <= set(rw.parse_metadata_v4(answer[1])["topics"])


def test_two_parked_fetches_with_large_metadata_interleaved(module_server, many_topics):
    """[Fetch, Metadata, Fetch, Metadata] in one write: the second parked Fetch waits
    behind the first's large follower, and all four leave in order, round after round."""
    with rw.Conn(module_server.port) as conn:
        sizes = parked_fetch_rounds(conn, many_topics[1], rw.metadata_v4(None, False), rounds=4,
                                    per_round=2)
    assert len(sizes) == 8 and min(sizes) > 64 * 1024, sizes


def test_metadata_over_1mb_behind_a_parked_fetch(module_server, many_topics):
    """Over 1 MB: a Metadata naming 4,200 long absent topic names, each answered
    UNKNOWN_TOPIC_OR_PARTITION under its name (cheaper than creating 4,000 topics), so
    the response is larger than the socket buffers and leaves in many writes."""
    absent = topic_names("absent-", 4200, chars=249)
    with rw.Conn(module_server.port) as conn:
        sizes = parked_fetch_rounds(conn, many_topics[2], rw.metadata_v4(absent, False), rounds=4)
        answer = conn.call(rw.request(rw.API_METADATA, 4, 7, rw.metadata_v4(absent, False)))
    assert len(sizes) == 4 and min(sizes) > 1024 * 1024, sizes
    assert answer is not None and answer[0] == 7
    topics = rw.parse_metadata_v4(answer[1])["topics"]
    assert len(topics) == len(absent)
    assert {error for error, _ in topics.values()} == {rw.UNKNOWN_TOPIC_OR_PARTITION}


def test_parked_fetch_answered_with_over_64k_of_small_batches(module_server, topic_name):
    """The parked request's own answer can be the large one: a Fetch that waits for more
    than there is comes back at max_wait_ms with three ~30 KB batches (each sent inline,
    under the sendfile threshold), ~90 KB in one write; the next rounds are answered too."""
    create_topics(module_server.bootstrap, [topic_name], partitions=3)
    value = b"v" * 30_000
    with rw.Conn(module_server.port) as conn:
        for partition in range(3):
            answer = conn.call(rw.request(rw.API_PRODUCE, 3, partition, rw.produce_v3(
                topic_name, partition, rw.record_batch([(None, value)]))))
            assert answer is not None
            assert rw.parse_produce_v3_response(answer[1])[(topic_name, partition)] == (0, 0)
        fetch = rw.fetch_v4(topic_name, {0: 0, 1: 0, 2: 0}, max_wait_ms=PARK_MS,
                            min_bytes=1 << 20)
        for round_no in range(4):
            correlation_id = 100 + round_no
            assert conn.send(rw.request(rw.API_FETCH, 4, correlation_id, fetch))
            answered = rw.parse_fetch_v4(receive(conn, round_no, correlation_id))
            assert [(p, error) for _, p, error, _ in answered] == [(0, 0), (1, 0), (2, 0)]
            assert sum(size for *_, size in answered) > 64 * 1024


class _Timeouts(logging.Handler):
    """librdkafka's own request timeouts (its REQTMOUT log lines), from its logger."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "REQTMOUT" in message or "Timed out" in message:
            self.lines.append(message)


def _rdkafka_logger(name: str) -> tuple[logging.Logger, _Timeouts]:
    timeouts = _Timeouts()
    logger = logging.getLogger(f"librdkafka.{name}")
    logger.addHandler(timeouts)
    logger.setLevel(logging.INFO)
    return logger, timeouts


def test_librdkafka_group_consumer_and_admin_on_500_topics(module_server, many_topics, request):
    """librdkafka pipelines its metadata refreshes, full Metadata (list_topics) and group
    requests behind the consumer's parked Fetch (fetch.wait.max.ms 500, an empty topic).
    Every request must be answered within the client's own request timeout
    (socket.timeout.ms 10 s): a request timing out is the failure, as librdkafka reports
    it (REQTMOUT). CreateTopics goes through an admin client (the Python binding has no
    admin calls on a consumer) that pipelines a full Metadata behind each CreateTopics."""
    bootstrap = module_server.bootstrap
    name = request.node.name
    logger, timeouts = _rdkafka_logger(name)
    config = {"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000, "logger": logger}
    assigned: list[object] = []
    consumer = Consumer({**config, "group.id": f"{name}-group", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "fetch.wait.max.ms": 500,
                         "topic.metadata.refresh.interval.ms": 1000})
    admin = AdminClient(config)
    try:
        # FindCoordinator, JoinGroup, SyncGroup; then fetches that park on the empty topic
        consumer.subscribe([many_topics[3]], on_assign=lambda _, parts: assigned.extend(parts))
        wait_until(lambda: consumer.poll(0.2) is None and assigned, 60, "the group assignment")
        for round_no in range(6):
            consumer.poll(0.7)  # a parked fetch, a metadata refresh
            metadata = consumer.list_topics(timeout=60)  # a full Metadata on the same client
            assert set(many_topics) <= set(metadata.topics)
            new = f"{name}-new-{round_no}"
            created = admin.create_topics([NewTopic(new, 1, 1)], operation_timeout=10,
                                          request_timeout=10)
            assert set(many_topics) <= set(admin.list_topics(timeout=60).topics)
            created[new].result()
            consumer.poll(0.1)
            admin.poll(0)  # serves the admin client's log lines
            assert not timeouts.lines, f"round {round_no}: librdkafka requests timed out: " \
                                       f"{timeouts.lines}"
    finally:
        consumer.close()
        logger.removeHandler(timeouts)
