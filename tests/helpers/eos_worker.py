"""An exactly-once consume-transform-produce worker (confluent-kafka), run as a child
process by tests/integration/test_txn_eos_kill.py, which kills it with SIGKILL at random moments.

``python eos_worker.py BOOTSTRAP SOURCE SINK GROUP TRANSACTIONAL_ID``: reads SOURCE as
GROUP with read_committed, writes ``out-<value>`` to SINK and commits the consumed
offsets in the same transaction (send_offsets_to_transaction), forever.
"""

from __future__ import annotations

import sys

from confluent_kafka import Consumer, Producer


def main(bootstrap: str, source: str, sink: str, group: str, txn_id: str) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed",
                         # a killed predecessor leaves the group after this, not after 45 s
                         # (the test's server allows sessions this short)
                         "session.timeout.ms": 3000, "heartbeat.interval.ms": 300})
    consumer.subscribe([source])
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                         "linger.ms": 2})
    producer.init_transactions(30)
    while True:
        messages = [m for m in consumer.consume(10, 0.5) if not m.error()]
        if not messages:
            continue
        producer.begin_transaction()
        for message in messages:
            producer.produce(sink, key=message.key(), value=b"out-" + message.value())
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)


if __name__ == "__main__":
    main(*sys.argv[1:6])
