"""A confluent-kafka (librdkafka) transactional producer against a real server with the
authorizer on: ACLs for User:ANONYMOUS (the PLAINTEXT principal) set with confluent-kafka's
admin client. Without WRITE on its transactional id init_transactions fails with Kafka's
TRANSACTIONAL_ID_AUTHORIZATION_FAILED; with it, a transaction commits and a read_committed
consumer sees it. The per-API rules for named principals are in tests/unit/test_security_txn.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AclBinding, AdminClient
from confluent_kafka.admin import AclOperation as Op
from confluent_kafka.admin import AclPermissionType as Perm
from confluent_kafka.admin import ResourcePatternType as Pattern
from confluent_kafka.admin import ResourceType as Type
from helpers.clienthelpers import ck_config, create_topic
from helpers.kafkasec import STANDARD
from helpers.serverproc import ServerProcess

pytestmark = pytest.mark.timeout(120)

ANON = "User:ANONYMOUS"
DEADLINE_S = 30.0


def anonymous_may(resource_type: Type, name: str, operation: Op) -> AclBinding:
    return AclBinding(resource_type, name, Pattern.LITERAL, ANON, "*", operation, Perm.ALLOW)


def transactional_producer(srv: ServerProcess, txn_id: str) -> Producer:
    return Producer(ck_config(srv.bootstrap, **{"transactional.id": txn_id, "linger.ms": 5}))


def committed_values(srv: ServerProcess, topic: str, group: str, expected: int) -> list[bytes]:
    consumer = Consumer(ck_config(srv.bootstrap, **{
        "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "isolation.level": "read_committed"}))
    values: list[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + DEADLINE_S
        while len(values) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            values.append(msg.value())
    finally:
        consumer.close()
    return values


def test_init_transactions_needs_write_on_the_transactional_id(
        server_factory: Callable[..., ServerProcess], topic_name: str) -> None:
    # Set up as a super user, then restart without one: only the ACLs grant access.
    srv = server_factory(settings={"authorizer.class.name": STANDARD, "super.users": ANON})
    create_topic(srv.bootstrap, topic_name, partitions=1)
    group = f"{topic_name}-check"
    admin = AdminClient(ck_config(srv.bootstrap))
    bindings = [anonymous_may(Type.TOPIC, topic_name, Op.WRITE),
                anonymous_may(Type.TOPIC, topic_name, Op.READ),
                anonymous_may(Type.GROUP, group, Op.READ),
                anonymous_may(Type.TRANSACTIONAL_ID, "tx-granted", Op.WRITE),
                # DESCRIBE only: FindCoordinator passes, InitProducerId must not.
                anonymous_may(Type.TRANSACTIONAL_ID, "tx-refused", Op.DESCRIBE)]
    for future in admin.create_acls(bindings).values():
        assert future.result(timeout=30) is None
    del admin  # its connection would only retry during the restart
    srv.restart(settings={**srv.settings, "super.users": ""})

    refused = transactional_producer(srv, "tx-refused")
    with pytest.raises(KafkaException) as failure:
        refused.init_transactions(30)
    error = failure.value.args[0]
    assert error.code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, error
    del refused

    producer = transactional_producer(srv, "tx-granted")
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic_name, value=b"v%d" % i)
    producer.commit_transaction(30)
    assert committed_values(srv, topic_name, group, 3) == [b"v0", b"v1", b"v2"]
