"""End-to-end demo: devices -> MQTT bridge -> logserver -> Spark -> aggregates and alerts.

    1. start logserver (a temporary data dir, a free port on 127.0.0.1)
    2. start the MQTT bridge (``python -m mqtt_bridge``) when it is runnable and
       paho-mqtt is installed; otherwise the simulator writes straight to the log
    3. simulate N devices publishing JSON telemetry (event times spread over minutes)
    4. run device_telemetry and anomaly_alerts:
       - streaming (``readStream.format("kafka")``, trigger availableNow, the three
         queries at once) when Spark's Kafka connector is available (local jars, or
         downloadable);
       - otherwise the same transformations in batch mode on the records fetched from
         the log with kafka-python (and the alert commands written with kafka-python),
         said so on the console
    5. show the aggregates (and the commands the bridge delivered over MQTT)
    6. stop everything it started, by pid, also on Ctrl-C or SIGTERM

Streaming writes only windows the watermark has closed; batch mode shows every window.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from types import FrameType

from commonlib.childproc import ListeningChild
from spark_examples import common, procs, simulate
from spark_examples.session import (
    ENV_JARS,
    ConnectorError,
    build_session,
    find_connector,
    has_kafka_source,
    maven_resolvable,
)

log = logging.getLogger("spark_examples.demo")


#: The bridge confines each device to its own topics by default; the demo's command
#: listener (anonymous, on loopback) also reads every device's commands, so the demo
#: states its rules in the bridge's ACL file (mosquitto's format).
DEMO_ACL = """\
# devices: own telemetry, own commands, broadcasts
pattern write devices/%c/#
pattern read devices/%c/commands
topic read ota
# the demo's command listener
topic read devices/+/commands
"""


#: The demo's few hundred records: two shuffle partitions (each is a task and, in the
#: streaming aggregations, a state store per micro-batch) and no web UI (the session ends
#: as soon as the queries have read the log): less work for the JVM on a small machine.
DEMO_CONF = {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"}


class CommandListener:
    """An MQTT client subscribed to ``devices/+/commands``: counts what the bridge delivers."""

    def __init__(self, host: str, port: int) -> None:
        import paho.mqtt.client as mqtt

        try:
            self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="demo-command-listener")
        except AttributeError:  # paho-mqtt 1.x
            self.client = mqtt.Client(client_id="demo-command-listener")
        self.received: Counter[str] = Counter()
        self.samples: list[tuple[str, bytes]] = []
        self._lock = threading.Lock()
        self._subscribed = threading.Event()
        self.client.on_message = self._on_message
        self.client.on_subscribe = lambda *a, **k: self._subscribed.set()
        self.client.connect(host, port, keepalive=30)
        self.client.loop_start()
        self.client.subscribe("devices/+/commands", qos=1)
        if not self._subscribed.wait(10):
            raise TimeoutError("no SUBACK from the bridge within 10s")

    def _on_message(self, client, userdata, msg) -> None:  # noqa: ARG002 - paho's signature
        device = msg.topic.split("/")[1]
        with self._lock:
            self.received[device] += 1
            if len(self.samples) < 5:
                self.samples.append((msg.topic, msg.payload))

    def total(self) -> int:
        with self._lock:
            return sum(self.received.values())

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.disconnect()
            self.client.loop_stop()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m spark_examples.demo",
        description="End-to-end demo: logserver + MQTT bridge + simulated devices + Spark aggregates and alerts.",
        epilog=common.CONNECTOR_EPILOG,
    )
    p.add_argument("--devices", type=int, default=5, help="simulated devices (default 5)")
    p.add_argument("--messages", type=int, default=120, help="readings per device (default 120)")
    p.add_argument("--step-ms", type=int, default=5000, help="event-time step between readings (default 5000: 120 readings = 10 minutes)")
    p.add_argument("--anomaly-rate", type=float, default=0.02, help="share of overheating readings (default 0.02)")
    p.add_argument("--mode", choices=("auto", "stream", "batch"), default="auto", help="auto: streaming if the Kafka connector is available, else batch")
    p.add_argument("--no-bridge", action="store_true", help="do not start the MQTT bridge; publish straight to the log")
    p.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    p.add_argument("--kafka-jars", metavar="DIR", default=None, help="connector jars directory (overrides SPARK_KAFKA_JARS)")
    p.add_argument("--workdir", default=None, help="keep data, output and logs here (default: a temporary dir, removed)")
    p.add_argument("--show", type=int, default=20, metavar="N", help="aggregate rows to print (default 20)")
    p.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    return p


class _Interrupts:
    """Ctrl-C and SIGTERM: raised as KeyboardInterrupt at once, except while the simulator
    publishes, where the signal is only noted and the simulator stops between two sends
    (an exception raised inside the Kafka client can leave its locks held)."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.deferred = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:  # noqa: ARG002
        self.stop.set()
        if not self.deferred:
            raise KeyboardInterrupt


def wait_for_records(bootstrap: str, topic: str, expected: int, timeout_s: float = 60.0) -> int:
    """Until the topic's end offsets add up to ``expected`` (the bridge writes asynchronously)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    prog = common.Progress(f"records in topic {topic}", expected)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            parts = consumer.partitions_for_topic(topic) or set()
            total = sum(consumer.end_offsets([TopicPartition(topic, p) for p in parts]).values()) if parts else 0
            prog.update(total)
            if total >= expected:
                prog.done()
                return total
            if time.monotonic() > deadline:
                prog.done("(timed out)")
                raise TimeoutError(f"{topic}: {total} of {expected} records after {timeout_s:.0f}s")
            time.sleep(0.3)
    finally:
        consumer.close()


def _read_all(bootstrap: str, topic: str) -> list:
    """Every record of a topic; none when the sink never created it (nothing to write)."""
    from spark_examples.kafkaframe import fetch_records

    try:
        return fetch_records(bootstrap, topic, timeout_s=10)
    except TimeoutError:
        return []


def run_streaming(spark, bootstrap: str, work: Path, show: int) -> int:
    """The real pipelines against the log: Kafka source, Parquet + Kafka sinks.

    The three queries (telemetry to Parquet, telemetry to Kafka, alerts to Kafka) read
    the same topic independently, so they run at the same time: one wait, and Spark
    overlaps one query's planning and checkpoint writes with another's tasks. Each
    takes two micro-batches (availableNow): the data, then the batch in which the
    watermark has moved and closes the windows.
    """
    from spark_examples import anomaly_alerts, device_telemetry

    out = work / "telemetry-aggregates"
    targs = device_telemetry.build_parser().parse_args([
        "--bootstrap-servers", bootstrap, "--output-dir", str(out),
        "--checkpoint-dir", str(work / "checkpoints" / "device_telemetry"), "--available-now",
    ])
    aargs = anomaly_alerts.build_parser().parse_args([
        "--bootstrap-servers", bootstrap, "--starting-offsets", "earliest",
        "--checkpoint-dir", str(work / "checkpoints" / "anomaly_alerts"), "--available-now",
    ])
    queries = device_telemetry.start_queries(spark, targs)
    queries.append(anomaly_alerts.start_query(spark, aargs))
    if common.run_queries(spark, queries) != 0:
        raise RuntimeError("a streaming query failed (see the log above)")
    stats = spark.read.parquet(str(out)).orderBy("device_id", "window_start")
    print(f"\nPer-device aggregates of the windows the watermark closed ({stats.count()} rows, Parquet in {out}):")
    stats.show(show, truncate=False)
    commands = _read_all(bootstrap, "commands")
    aggregates = _read_all(bootstrap, "telemetry-aggregates")
    print(f"topic telemetry-aggregates: {len(aggregates)} records; topic commands: {len(commands)} alert commands")
    return len(commands)


def run_batch(spark, bootstrap: str, work: Path, show: int) -> int:
    """Same transformations, batch, on records kafka-python fetched from the log."""
    from spark_examples import anomaly_alerts, device_telemetry
    from spark_examples.kafkaframe import fetch_records, produce_messages, records_to_frame
    from spark_examples.transforms import thresholds_frame, to_kafka_messages

    prog = common.Progress("fetching telemetry with kafka-python")
    records = fetch_records(bootstrap, "telemetry", progress=prog.update)
    prog.done()
    kafka_df = records_to_frame(spark, records).cache()
    stats = device_telemetry.transform(kafka_df).orderBy("device_id", "window_start").cache()
    out = work / "telemetry-aggregates"
    stats.write.mode("overwrite").parquet(str(out))
    print(f"\nPer-device aggregates, batch mode: every window, open ones too ({stats.count()} rows, Parquet in {out}):")
    stats.show(show, truncate=False)
    agg_msgs = [(r["key"], r["value"]) for r in to_kafka_messages(stats).collect()]
    produce_messages(bootstrap, "telemetry-aggregates", agg_msgs)
    commands = [(r["key"], r["value"]) for r in anomaly_alerts.transform(kafka_df, thresholds_frame(spark)).collect()]
    produce_messages(bootstrap, "commands", commands)
    print(
        f"written with kafka-python (what the Spark sink would write): {len(agg_msgs)} records to "
        f"telemetry-aggregates, {len(commands)} alert commands to commands"
    )
    return len(commands)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    common.setup_logging(args.log_level)
    interrupts = _Interrupts()
    signal.signal(signal.SIGTERM, interrupts)
    signal.signal(signal.SIGINT, interrupts)
    temp = args.workdir is None
    work = Path(tempfile.mkdtemp(prefix="logserver-demo-")) if temp else Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    children: list[ListeningChild] = []
    listener: CommandListener | None = None
    spark = None
    try:
        server = procs.logserver(work / "data", work / "logserver.log").start()
        children.append(server)
        bootstrap = f"{procs.HOST}:{server.port}"
        print(f"logserver on {bootstrap} (pid {server.pid}), data in {work / 'data'}")

        via, mqtt_addr = "kafka", None
        if not args.no_bridge:
            ok, why = procs.bridge_available()
            if ok and simulate.paho_available():
                try:
                    acl = work / "mqtt-acl"
                    acl.write_text(DEMO_ACL)
                    bridge = procs.mqtt_bridge(bootstrap, work / "mqtt-bridge.log",
                                               "--acl-file", str(acl)).start()
                    children.append(bridge)
                    via, mqtt_addr = "mqtt", f"{procs.HOST}:{bridge.port}"
                    print(f"mqtt-bridge on {mqtt_addr} (pid {bridge.pid})")
                    listener = CommandListener(procs.HOST, bridge.port)
                except (RuntimeError, OSError, TimeoutError) as exc:
                    log.warning("MQTT bridge unusable, publishing straight to the log instead: %s", exc)
                    via = "kafka"
            else:
                print(f"no MQTT bridge ({why if not ok else 'paho-mqtt is not installed'}): publishing straight to the log")

        interrupts.deferred = True
        try:
            sent = simulate.run(
                via=via, devices=args.devices, messages=args.messages, bootstrap_servers=bootstrap,
                mqtt=mqtt_addr, step_ms=args.step_ms, anomaly_rate=args.anomaly_rate,
                stop=interrupts.stop,
            )
        finally:
            interrupts.deferred = False
        if interrupts.stop.is_set():
            raise KeyboardInterrupt
        wait_for_records(bootstrap, "telemetry", len(sent))

        connector = find_connector(jars_dir=args.kafka_jars) if args.mode != "batch" else None
        mode = "batch"
        if connector is not None and connector.mode == "packages" and args.mode == "auto" and not maven_resolvable():
            connector.source = (
                f"{ENV_JARS} is not set, the Ivy cache has no connector, and Maven Central does not "
                f"resolve from here, so {connector.packages} cannot be downloaded"
            )
            connector.mode = "none"
        if connector is not None and connector.mode in ("jars", "packages"):
            try:
                spark = build_session("demo", master=args.master, connector=connector, conf=DEMO_CONF)
                mode = "stream" if has_kafka_source(spark) else "batch"
            except ConnectorError as exc:
                log.warning("%s", exc)
        if args.mode == "stream" and mode != "stream":
            print("error: --mode stream needs Spark's Kafka connector (see --help)", file=sys.stderr)
            return 2
        if spark is None:
            spark = build_session("demo", master=args.master, conf=DEMO_CONF)
        if mode == "stream":
            print(f"Spark {spark.version}: streaming with readStream.format('kafka') ({connector.source})")
            n_commands = run_streaming(spark, bootstrap, work, args.show)
        else:
            why = connector.source if connector is not None else "--mode batch"
            print(
                f"Spark {spark.version}: Kafka connector not available ({why}); running the same "
                "transformations in batch mode on records fetched with kafka-python"
            )
            n_commands = run_batch(spark, bootstrap, work, args.show)

        if listener is not None and n_commands:
            deadline = time.monotonic() + 15
            while listener.total() < n_commands and time.monotonic() < deadline:
                time.sleep(0.2)
            print(
                f"MQTT: {listener.total()} of {n_commands} commands delivered to devices/+/commands "
                f"({dict(sorted(listener.received.items()))})"
            )
            for topic, payload in listener.samples[:3]:
                print(f"  {topic}: {payload.decode(errors='replace')}")
        print(f"\ndone: {len(sent)} readings from {args.devices} devices via {via}, Spark mode {mode}")
        return 0
    except KeyboardInterrupt:
        print("\ninterrupted: stopping", file=sys.stderr)
        return 130
    finally:
        if listener is not None:
            listener.close()
        if spark is not None:
            with contextlib.suppress(Exception):
                spark.stop()
        for child in reversed(children):
            child.stop()
        if temp:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work} (data, output, logs)")


if __name__ == "__main__":
    raise SystemExit(main())
