"""Every value DescribeConfigs reports is accepted back by AlterConfigs and
IncrementalAlterConfigs, and describing again gives the same values (issue 21, item 8).

Admin tools (and people) copy a described config set back to a topic or a broker: a
default the server reports but refuses (``flush.messages=9223372036854775807``,
``compression.type=producer``...) makes that fail. Real server, confluent-kafka's admin.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(120)


def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 15000})


def _describe(admin, restype, name: str) -> dict[str, tuple[str | None, bool]]:
    from confluent_kafka.admin import ConfigResource

    futures = admin.describe_configs([ConfigResource(restype, name)])
    entries = next(iter(futures.values())).result(15)
    return {key: (entry.value, entry.is_read_only) for key, entry in entries.items()}


def _writable(described: dict[str, tuple[str | None, bool]]) -> dict[str, str]:
    """What a client may write back: every entry not read-only (Kafka too refuses the
    read-only broker settings) that has a value (sensitive and unset ones have none)."""
    return {key: value for key, (value, read_only) in described.items()
            if not read_only and value is not None}


def _write_back_both_ways(admin, restype, name: str, values: dict[str, str]) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    # AlterConfigs: the whole set at once, replacing every override.
    legacy = ConfigResource(restype, name, set_config=values)
    next(iter(admin.alter_configs([legacy]).values())).result(15)
    # IncrementalAlterConfigs: each value SET, also one at a time (one bad name or value
    # must not hide behind another in the same request).
    incremental = ConfigResource(restype, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
        for key, value in values.items()])
    next(iter(admin.incremental_alter_configs([incremental]).values())).result(15)
    for key, value in values.items():
        one = ConfigResource(restype, name, incremental_configs=[
            ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
        try:
            next(iter(admin.incremental_alter_configs([one]).values())).result(15)
        except Exception as exc:
            raise AssertionError(f"{name}: {key}={value!r} was refused: {exc}") from exc


def test_topic_configs_round_trip(server, topic_name):
    from confluent_kafka.admin import NewTopic, ResourceType

    admin = _admin(server.bootstrap)
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(15)
    before = _describe(admin, ResourceType.TOPIC, topic_name)
    assert before["flush.messages"][0] == str(2**63 - 1)
    assert before["compression.type"][0] == "producer"
    read_only = sorted(key for key, (_, ro) in before.items() if ro)
    assert not read_only, f"topic configs are all alterable in Kafka: {read_only}"
    _write_back_both_ways(admin, ResourceType.TOPIC, topic_name, _writable(before))
    after = _describe(admin, ResourceType.TOPIC, topic_name)
    assert {k: v for k, (v, _) in after.items()} == {k: v for k, (v, _) in before.items()}


def test_broker_configs_round_trip(server_factory):
    from confluent_kafka.admin import ResourceType

    srv = server_factory(settings={"node.id": 3})
    admin = _admin(srv.bootstrap)
    before = _describe(admin, ResourceType.BROKER, "3")
    values = _writable(before)
    assert {"log.flush.interval.messages", "log.retention.ms", "compression.type"} <= set(values)
    _write_back_both_ways(admin, ResourceType.BROKER, "3", values)
    after = _describe(admin, ResourceType.BROKER, "3")
    assert {k: v for k, (v, _) in after.items()} == {k: v for k, (v, _) in before.items()}
