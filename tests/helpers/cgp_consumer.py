"""A confluent-kafka consumer with ``group.protocol=consumer`` (KIP-848), run as a child
process by tests/integration/test_groups_consumer_protocol.py, which kills it with SIGKILL.

``python cgp_consumer.py BOOTSTRAP TOPIC GROUP``: prints ``ASSIGN p,p,...`` whenever its
assignment changes and ``MSG <value>`` for each record, after committing it
synchronously (so a printed record is a committed one), forever.
"""

from __future__ import annotations

import sys

from confluent_kafka import Consumer


def main(bootstrap: str, topic: str, group: str) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "group.protocol": "consumer", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    last: list[int] | None = None
    while True:
        message = consumer.poll(0.2)
        assigned = sorted(tp.partition for tp in consumer.assignment())
        if assigned != last:
            last = assigned
            print("ASSIGN " + ",".join(map(str, assigned)), flush=True)
        if message is None or message.error():
            continue
        consumer.commit(message=message, asynchronous=False)
        print(f"MSG {message.value().decode()}", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
