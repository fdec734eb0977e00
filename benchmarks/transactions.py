"""Transactional produce and read_committed consume against plain idempotent produce and
read_uncommitted consume, on one logserver, back to back in alternating order.

Produce: confluent-kafka writes N records of 1 KiB to a 1-partition topic, either
idempotent (no transaction) or in transactions of 100 or 10,000 records (commit each);
the figure is records per second until the last commit / flush returns. Consume: a
confluent-kafka consumer (assign, from the beginning) reads N transactional records
(written in transactions of 100) with read_committed and with read_uncommitted.

    python -m benchmarks.transactions [--records 20000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .stats import Spread
from .targets import LogserverTarget

RECORD = b"x" * 1024


def _topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, 1, 1)]).values():
        future.result(30)


def produce(bootstrap: str, topic: str, records: int, per_txn: int | None, txn_id: str) -> float:
    """Records per second; ``per_txn`` None means idempotent, no transactions."""
    conf: dict[str, object] = {"bootstrap.servers": bootstrap, "linger.ms": 5,
                               "enable.idempotence": True}
    if per_txn is not None:
        conf["transactional.id"] = txn_id
    producer = Producer(conf)
    if per_txn is not None:
        producer.init_transactions(30)
    started = time.perf_counter()
    sent = 0
    while sent < records:
        chunk = min(per_txn or records, records - sent)
        if per_txn is not None:
            producer.begin_transaction()
        for _ in range(chunk):
            while True:
                try:
                    producer.produce(topic, value=RECORD)
                    break
                except BufferError:
                    producer.poll(0.01)
        sent += chunk
        if per_txn is not None:
            producer.commit_transaction(60)
    producer.flush(60)
    return records / (time.perf_counter() - started)


def consume(bootstrap: str, topic: str, records: int, isolation: str) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench",
                         "enable.auto.commit": False, "isolation.level": isolation})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    started = time.perf_counter()
    deadline = time.monotonic() + 120
    while got < records and time.monotonic() < deadline:
        got += sum(1 for m in consumer.consume(1000, 1.0) if not m.error())
    elapsed = time.perf_counter() - started
    consumer.close()
    if got < records:
        raise RuntimeError(f"{isolation}: read {got} of {records}")
    return records / elapsed


def _line(label: str, spread: Spread, base: Spread | None) -> str:
    ratio = f"  ratio {spread.median / base.median:.2f}x" if base is not None else ""
    return (f"  {label:<34} median {spread.median:>9,.0f} rec/s "
            f"[{spread.low:,.0f}-{spread.high:,.0f}]{ratio}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.transactions",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/transactions.json"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    modes: list[tuple[str, int | None]] = [("idempotent", None), ("txn-100", 100),
                                           ("txn-10000", 10_000)]
    produced: dict[str, list[float]] = {name: [] for name, _ in modes}
    consumed: dict[str, list[float]] = {"read_uncommitted": [], "read_committed": []}
    with tempfile.TemporaryDirectory(prefix="txn-bench-") as workdir:
        target = LogserverTarget(Path(workdir))
        with target:
            bootstrap = target.bootstrap
            assert bootstrap is not None
            for repeat in range(args.repeats):
                order = modes if repeat % 2 == 0 else list(reversed(modes))
                for name, per_txn in order:
                    topic = f"p-{name}-{repeat}"
                    _topic(bootstrap, topic)
                    produced[name].append(produce(bootstrap, topic, args.records, per_txn,
                                                  f"bench-{name}"))
                source = f"p-txn-100-{repeat}"
                isolations = list(consumed) if repeat % 2 == 0 else list(reversed(consumed))
                for isolation in isolations:
                    consumed[isolation].append(consume(bootstrap, source, args.records, isolation))
    spreads = {k: Spread.of(v) for k, v in {**produced, **consumed}.items()}
    print(f"transactions, {args.records} records of 1 KiB, {args.repeats} repeats, alternating order")
    print("produce (ratio against idempotent):")
    for name, _ in modes:
        print(_line(name, spreads[name], None if name == "idempotent" else spreads["idempotent"]))
    print("catch-up consume of transactional data (ratio against read_uncommitted):")
    for isolation in consumed:
        print(_line(isolation, spreads[isolation],
                    None if isolation == "read_uncommitted" else spreads["read_uncommitted"]))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({k: s.to_json() for k, s in spreads.items()}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
