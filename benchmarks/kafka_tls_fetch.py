"""What TLS costs a consumer: the same topic read over PLAINTEXT (sendfile) and over SSL
(record bytes read and written in chunks, encrypted by Python's ssl) from one logserver,
with librdkafka (confluent-kafka) so that the client is not the bottleneck.

    python -m benchmarks.kafka_tls_fetch [--mb 256] [--repeat 3]

Runs alternate PLAINTEXT, SSL, PLAINTEXT, ... Prints MB/s min/median/max per listener
and the ratio of the medians. A self-signed certificate is made with ``openssl``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from commonlib.childproc import HOST, can_connect, free_port, python_path_env

TOPIC = "tls-bench"
RECORD = 64 * 1024


def _certificate(directory: Path) -> Path:
    key, cert = directory / "key.pem", directory / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj",
                    "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    keystore = directory / "keystore.pem"
    keystore.write_text(key.read_text() + cert.read_text())
    return keystore


def _fill(bootstrap: str, megabytes: int) -> int:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "batch.size": 1 << 20, "compression.type": "none"})
    payload = bytes(RECORD)
    count = megabytes * (1 << 20) // RECORD
    for _ in range(count):
        while True:
            try:
                producer.produce(TOPIC, payload, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0
    return count


def _read_all(config: dict[str, str], count: int) -> float:
    """Seconds to read ``count`` records from the start of the partition."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**config, "group.id": "tls-bench", "enable.auto.commit": False,
                         "fetch.max.bytes": 8 << 20, "max.partition.fetch.bytes": 8 << 20})
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        seen = 0
        start = time.perf_counter()
        while seen < count:  # poll returns as soon as a record is there (consume(n) waits for n)
            message = consumer.poll(5)
            if message is not None and message.error() is None:
                seen += 1
        return time.perf_counter() - start
    finally:
        consumer.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        keystore = _certificate(directory)
        plain, tls = free_port(), free_port()
        log = (directory / "server.log").open("w")
        server = subprocess.Popen(
            [sys.executable, "-m", "logserver", "--log.dirs", str(directory / "data"),
             "--listeners", f"PLAINTEXT://{HOST}:{plain},SSL://{HOST}:{tls}",
             "--ssl.keystore.location", str(keystore)],
            env=python_path_env(), stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 20
            while not (can_connect(plain) and can_connect(tls)):
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit(f"server did not start: {(directory / 'server.log').read_text()}")
                time.sleep(0.1)
            count = _fill(f"{HOST}:{plain}", args.mb)
            configs = {"PLAINTEXT": {"bootstrap.servers": f"{HOST}:{plain}"},
                       "SSL": {"bootstrap.servers": f"{HOST}:{tls}", "security.protocol": "SSL",
                               "ssl.ca.location": str(directory / "cert.pem")}}
            rates: dict[str, list[float]] = {name: [] for name in configs}
            for _ in range(args.repeat):
                for name, config in configs.items():  # alternating
                    rates[name].append(args.mb / _read_all(config, count))
        finally:
            server.terminate()
            server.wait(30)
            log.close()
    print(f"read {args.mb} MB ({RECORD // 1024} KiB records) x {args.repeat} repeats, "
          "MB/s min / median / max")
    for name, xs in rates.items():
        print(f"  {name:10s} {min(xs):8.1f} {statistics.median(xs):8.1f} {max(xs):8.1f}")
    ratio = statistics.median(rates["SSL"]) / statistics.median(rates["PLAINTEXT"])
    print(f"  SSL / PLAINTEXT (medians): {ratio:.2f}")


if __name__ == "__main__":
    main()
