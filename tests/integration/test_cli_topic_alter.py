"""``logserver topic alter-config`` (IncrementalAlterConfigs, 44) and ``topic
add-partitions`` (CreatePartitions, 37) against a real server, checked with kafka-python.

The server side of both APIs comes from another branch: these tests pass once it is
merged (until then the commands say in one line that the server lacks the API).
"""

from __future__ import annotations

import pytest
from helpers.admin_cli import logserver, ok, ok_json, one_error_line
from helpers.clienthelpers import create_topic, kp_admin, kp_produce, kp_read

pytestmark = pytest.mark.timeout(120)


def _kp_topic_config(bootstrap: str, topic: str) -> dict[str, str]:
    """The topic's configs as kafka-python's admin client reads them (DescribeConfigs)."""
    from kafka.admin import ConfigResource, ConfigResourceType

    admin = kp_admin(bootstrap)
    try:
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        return {name: entry["value"] for name, entry in described["topic"][topic].items()}
    finally:
        admin.close()


def _kp_partitions(bootstrap: str, topic: str) -> int:
    admin = kp_admin(bootstrap)
    try:
        (described,) = admin.describe_topics([topic])
        return len(described["partitions"])
    finally:
        admin.close()


def test_alter_config_set_and_delete(module_server, topic_name) -> None:
    b = module_server.bootstrap
    ok("topic", "create", topic_name, "-c", "retention.ms=3600000", "-b", b)
    out = ok("topic", "alter-config", topic_name, "--set", "retention.ms=7200000",
             "--set", "max.message.bytes=2000000", "-b", b)
    assert out.splitlines()[1].split() == [topic_name, "OK"], out
    configs = {c["name"]: c for c in ok_json("topic", "describe", topic_name, "-b", b)["configs"]}
    assert configs["retention.ms"]["value"] == "7200000"
    assert configs["max.message.bytes"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert _kp_topic_config(b, topic_name)["retention.ms"] == "7200000"  # a real client agrees

    ok("topic", "alter-config", topic_name, "--delete", "retention.ms", "-b", b)
    configs = {c["name"]: c for c in ok_json("topic", "describe", topic_name, "-b", b)["configs"]}
    assert configs["retention.ms"]["source"] == "DEFAULT_CONFIG"
    assert configs["max.message.bytes"]["value"] == "2000000"  # untouched by the delete

    # Kafka's spelling (kafka-configs --add-config/--delete-config) does the same.
    ok("topic", "alter-config", topic_name, "--add-config", "retention.ms=60000,segment.ms=600000",
       "--delete-config", "max.message.bytes", "-b", b)
    config = _kp_topic_config(b, topic_name)
    assert (config["retention.ms"], config["segment.ms"]) == ("60000", "600000")


def test_alter_config_errors(module_server, topic_name) -> None:
    b = module_server.bootstrap
    ok("topic", "create", topic_name, "-b", b)
    bad = logserver("topic", "alter-config", topic_name, "--set", "retention.ms=soon", "-b", b)
    assert bad.returncode == 1 and "INVALID_CONFIG" in one_error_line(bad)
    missing = logserver("topic", "alter-config", f"{topic_name}-nope", "--set",
                        "retention.ms=1000", "-b", b)
    assert missing.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in one_error_line(missing)
    nothing = logserver("topic", "alter-config", topic_name, "-b", b)
    assert nothing.returncode == 2 and "nothing to change" in one_error_line(nothing)


def test_add_partitions(module_server, topic_name) -> None:
    b = module_server.bootstrap
    create_topic(b, topic_name, partitions=2)
    kp_produce(b, topic_name, [{"value": b"before", "partition": 1}])
    out = ok("topic", "add-partitions", topic_name, "--num", "2", "-b", b)
    assert topic_name in out and "OK" in out, out
    assert _kp_partitions(b, topic_name) == 4
    described = ok_json("topic", "describe", topic_name, "-b", b)
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2, 3]
    kp_produce(b, topic_name, [{"value": b"new", "partition": 3}])  # the new one takes records
    assert {(r.partition, r.value) for r in kp_read(b, topic_name)} == {(1, b"before"), (3, b"new")}

    ok("topic", "add-partitions", topic_name, "--total", "5", "-b", b)
    assert _kp_partitions(b, topic_name) == 5
    fewer = logserver("topic", "add-partitions", topic_name, "--total", "3", "-b", b)
    assert fewer.returncode == 1 and "INVALID_PARTITIONS" in one_error_line(fewer)
    assert _kp_partitions(b, topic_name) == 5


def test_config_describe_and_alter_topic_and_broker(module_server, topic_name) -> None:
    """logserver config (kafka-configs): a topic's and a broker's dynamic configs set,
    shown with their source, seen by a real client (confluent-kafka), and deleted."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    b = module_server.bootstrap
    ok("topic", "create", topic_name, "-b", b)
    out = ok("config", "alter", "--topic", topic_name, "--set", "retention.ms=3600000",
             "--add-config", "cleanup.policy=compact,max.message.bytes=2000000", "-b", b)
    assert out.strip() == f"topic '{topic_name}': OK", out
    shown = {r["name"]: r for r in ok_json("config", "describe", "--topic", topic_name, "-b", b)}
    assert {k: (v["value"], v["source"]) for k, v in shown.items()} == {
        "cleanup.policy": ("compact", "DYNAMIC_TOPIC_CONFIG"),
        "max.message.bytes": ("2000000", "DYNAMIC_TOPIC_CONFIG"),
        "retention.ms": ("3600000", "DYNAMIC_TOPIC_CONFIG")}
    everything = ok_json("config", "describe", "--topic", topic_name, "--all", "-b", b)
    assert len(everything) > len(shown)
    admin = AdminClient({"bootstrap.servers": b})
    resource = ConfigResource(ResourceType.TOPIC, topic_name)
    seen = admin.describe_configs([resource])[resource].result(timeout=30)
    assert seen["retention.ms"].value == "3600000"
    ok("config", "alter", "--topic", topic_name, "--delete", "retention.ms", "-b", b)
    assert "retention.ms" not in {r["name"] for r in ok_json(
        "config", "describe", "--topic", topic_name, "-b", b)}

    node = ok_json("cluster", "info", "-b", b)["brokers"][0]["node_id"]
    ok("config", "alter", "--broker", str(node), "--set",
       "log.cleaner.delete.retention.ms=123456", "-b", b)
    try:
        broker = {r["name"]: r for r in ok_json("config", "describe", "--broker", str(node),
                                                "-b", b)}
        assert broker["log.cleaner.delete.retention.ms"]["value"] == "123456"
        assert broker["log.cleaner.delete.retention.ms"]["source"] == "DYNAMIC_BROKER_CONFIG"
    finally:
        ok("config", "alter", "--broker", str(node), "--delete",
           "log.cleaner.delete.retention.ms", "-b", b)
    bad = logserver("config", "alter", "--topic", topic_name, "--set", "retention.ms=soon",
                    "-b", b)
    assert bad.returncode == 1 and "INVALID_CONFIG" in one_error_line(bad), bad.stderr
