"""Simulated devices publishing JSON telemetry, over MQTT or straight into the log.

Each device ``sensor-0000`` ... publishes readings (see ``schemas.py`` for the payload)
to MQTT ``devices/{device_id}/telemetry``, which the bridge maps to Kafka topic
``telemetry`` with key = device id. Without a bridge (``--via kafka``) the same
payloads go to the same topic and key with kafka-python, so everything downstream sees
the same records either way. ``--via auto`` uses MQTT when paho-mqtt is installed and
``--mqtt`` is given, else Kafka.

Event time: by default a backfilled timeline (device readings ``--step-ms`` apart,
the last one at "now"), sent as fast as possible, so a demo spans many windows in
seconds. ``--realtime`` sends one round every ``--step-ms`` with the current time.

The readings are deterministic for a ``--seed``; ``--anomaly-rate`` mixes in overheating
readings (80-95 C) and ``--malformed N`` adds N payloads that are not JSON.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from spark_examples.common import DEFAULT_BOOTSTRAP, Progress, setup_logging

log = logging.getLogger("spark_examples.simulate")


@dataclass(frozen=True)
class Reading:
    device_id: str
    payload: bytes  # what goes on the wire: JSON (or garbage for malformed ones)
    ts_ms: int


def device_ids(n: int, prefix: str = "sensor-") -> list[str]:
    return [f"{prefix}{i:04d}" for i in range(n)]


def reading_payload(device_index: int, device_id: str, seq: int, ts_ms: int, rng: random.Random, anomaly_rate: float) -> dict:
    """One JSON reading: a smooth per-device baseline plus noise, sometimes an anomaly."""
    base = 18.0 + (device_index % 7)
    temperature = base + 3.0 * math.sin(seq / 12.0 + device_index) + rng.gauss(0.0, 0.4)
    humidity = 45.0 + 10.0 * math.cos(seq / 20.0 + device_index) + rng.gauss(0.0, 1.0)
    if anomaly_rate > 0 and rng.random() < anomaly_rate:
        temperature = rng.uniform(80.0, 95.0)
    return {
        "device_id": device_id,
        "ts": ts_ms,
        "seq": seq,
        "temperature": round(temperature, 2),
        "humidity": round(min(100.0, max(0.0, humidity)), 1),
    }


def generate(
    devices: int,
    messages: int,
    *,
    step_ms: int = 5000,
    end_ms: int | None = None,
    seed: int = 1,
    anomaly_rate: float = 0.0,
    malformed: int = 0,
    prefix: str = "sensor-",
) -> Iterator[Reading]:
    """Backfilled readings, round by round (every device once per round); deterministic."""
    rng = random.Random(seed)
    ids = device_ids(devices, prefix)
    end_ms = int(time.time() * 1000) if end_ms is None else end_ms
    jitter = max(1, step_ms // 10)
    start_ms = end_ms - (messages - 1) * step_ms - jitter  # so no reading is after end_ms
    bad_rounds = set(rng.sample(range(messages), min(malformed, messages))) if malformed else set()
    for seq in range(messages):
        for i, dev in enumerate(ids):
            ts = start_ms + seq * step_ms + rng.randrange(0, jitter)
            body = reading_payload(i, dev, seq, ts, rng, anomaly_rate)
            yield Reading(dev, json.dumps(body, separators=(",", ":")).encode(), ts)
        if seq in bad_rounds:
            yield Reading(ids[seq % len(ids)], b"not json {" + str(seq).encode(), start_ms + seq * step_ms)


# --------------------------------------------------------------------------- transports
class KafkaSink:
    """Straight into the log: topic = stream, key = device id, as the bridge would."""

    def __init__(self, bootstrap_servers: str, topic: str) -> None:
        from kafka import KafkaProducer

        self.topic = topic
        self.producer = KafkaProducer(bootstrap_servers=bootstrap_servers, acks="all", linger_ms=5)
        self.futures: list = []

    def send(self, r: Reading) -> None:
        self.futures.append(self.producer.send(self.topic, key=r.device_id.encode(), value=r.payload))

    def abort(self) -> None:
        self.producer.close(timeout=1)

    def close(self) -> None:
        self.producer.flush(timeout=60)
        for f in self.futures:
            f.get(timeout=60)
        self.producer.close(timeout=10)


class MqttSink:
    """One MQTT connection per device (client id = device id), QoS 1, paho-mqtt."""

    def __init__(self, host: str, port: int, stream: str, topic_prefix: str = "devices") -> None:
        import paho.mqtt.client as mqtt

        self.mqtt = mqtt
        self.host, self.port = host, port
        self.stream, self.prefix = stream, topic_prefix
        self.clients: dict[str, object] = {}
        self.infos: list = []

    def _client(self, device_id: str):
        c = self.clients.get(device_id)
        if c is None:
            try:
                c = self.mqtt.Client(self.mqtt.CallbackAPIVersion.VERSION2, client_id=device_id)
            except AttributeError:  # paho-mqtt 1.x
                c = self.mqtt.Client(client_id=device_id)
            c.max_inflight_messages_set(100)
            c.connect(self.host, self.port, keepalive=30)
            c.loop_start()
            self.clients[device_id] = c
        return c

    def send(self, r: Reading) -> None:
        topic = f"{self.prefix}/{r.device_id}/{self.stream}"
        self.infos.append(self._client(r.device_id).publish(topic, r.payload, qos=1))

    def abort(self) -> None:
        for c in self.clients.values():
            c.disconnect()
            c.loop_stop()

    def close(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        try:
            for info in self.infos:
                info.wait_for_publish(timeout=max(0.1, deadline - time.monotonic()))
                if not info.is_published():
                    raise TimeoutError(f"MQTT publish not acknowledged within {timeout_s}s (mid {info.mid})")
        finally:
            for c in self.clients.values():
                c.disconnect()
                c.loop_stop()


def paho_available() -> bool:
    try:
        import paho.mqtt.client  # noqa: F401
    except ImportError:
        return False
    return True


def run(
    *,
    via: str,
    devices: int,
    messages: int,
    bootstrap_servers: str = DEFAULT_BOOTSTRAP,
    mqtt: str | None = None,
    stream: str = "telemetry",
    step_ms: int = 5000,
    realtime: bool = False,
    seed: int = 1,
    anomaly_rate: float = 0.0,
    malformed: int = 0,
    progress: bool = True,
    stop: threading.Event | None = None,
) -> list[Reading]:
    """Publish and wait for every acknowledgement; returns what was sent."""
    if via == "auto":
        via = "mqtt" if mqtt and paho_available() else "kafka"
    if via == "mqtt":
        if not mqtt:
            raise ValueError("--via mqtt needs --mqtt HOST:PORT")
        if not paho_available():
            raise ValueError("--via mqtt needs paho-mqtt (pip install paho-mqtt)")
        host, _, port = mqtt.rpartition(":")
        sink: KafkaSink | MqttSink = MqttSink(host or "127.0.0.1", int(port), stream)
    else:
        sink = KafkaSink(bootstrap_servers, stream)
    total = devices * messages + (min(malformed, messages) if malformed else 0)
    log.info("%d devices x %d readings via %s", devices, messages, via)
    prog = Progress(f"publishing via {via}", total) if progress else None
    sent: list[Reading] = []
    try:
        if realtime:
            rng = random.Random(seed)
            ids = device_ids(devices)
            for seq in range(messages):
                now = int(time.time() * 1000)
                for i, dev in enumerate(ids):
                    body = reading_payload(i, dev, seq, now, rng, anomaly_rate)
                    r = Reading(dev, json.dumps(body, separators=(",", ":")).encode(), now)
                    sink.send(r)
                    sent.append(r)
                    _check(stop)
                if prog:
                    prog.update(len(sent))
                time.sleep(step_ms / 1000)
        else:
            for r in generate(devices, messages, step_ms=step_ms, seed=seed, anomaly_rate=anomaly_rate, malformed=malformed):
                sink.send(r)
                sent.append(r)
                _check(stop)
                if prog and len(sent) % 50 == 0:
                    prog.update(len(sent))
    except BaseException:
        sink.abort()  # interrupted or failed: do not wait for the rest to be acknowledged
        raise
    sink.close()
    if prog:
        prog.update(len(sent))
        prog.done("acknowledged")
    return sent


def _check(stop: threading.Event | None) -> None:
    """Raise KeyboardInterrupt here, between two sends, once ``stop`` is set. A signal
    raised as an exception inside the Kafka client's send can leave one of its locks held,
    and its close() (in the abort below) then waits on that lock for ever."""
    if stop is not None and stop.is_set():
        raise KeyboardInterrupt


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m spark_examples.simulate",
        description="Simulate devices publishing JSON telemetry over MQTT (via the bridge) or straight to the log.",
    )
    p.add_argument("--devices", type=int, default=5, help="number of devices (default 5)")
    p.add_argument("--messages", type=int, default=60, help="readings per device (default 60)")
    p.add_argument("--via", choices=("auto", "mqtt", "kafka"), default="auto", help="transport (default auto: MQTT if --mqtt and paho-mqtt)")
    p.add_argument("--mqtt", metavar="HOST:PORT", default=None, help="MQTT bridge address, e.g. 127.0.0.1:1883")
    p.add_argument("--bootstrap-servers", default=DEFAULT_BOOTSTRAP, help=f"the log, for --via kafka (default {DEFAULT_BOOTSTRAP})")
    p.add_argument("--stream", default="telemetry", help="MQTT stream level / Kafka topic (default telemetry)")
    p.add_argument("--step-ms", type=int, default=5000, help="event-time step between a device's readings (default 5000)")
    p.add_argument("--realtime", action="store_true", help="send a round every --step-ms with current times")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--anomaly-rate", type=float, default=0.02, help="share of overheating readings (default 0.02)")
    p.add_argument("--malformed", type=int, default=0, metavar="N", help="also send N payloads that are not JSON")
    p.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    setup_logging(args.log_level)
    try:
        sent = run(
            via=args.via, devices=args.devices, messages=args.messages, bootstrap_servers=args.bootstrap_servers,
            mqtt=args.mqtt, stream=args.stream, step_ms=args.step_ms, realtime=args.realtime, seed=args.seed,
            anomaly_rate=args.anomaly_rate, malformed=args.malformed,
        )
    except ValueError as exc:
        parser.error(str(exc))
    except KeyboardInterrupt:
        return 130
    log.info("sent %d readings", len(sent))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
