"""What the Java client tier (tests/helpers/java/ClientTier.java) must report, the same on
one node and on a 3-broker cluster: each check's facts against Kafka's behaviour. Used by
tests/integration/test_java_client_tier.py and tests/cluster/test_java_client_cluster.py.
"""

from __future__ import annotations

from helpers.javaclient import run_facts
from helpers.kafkasec import STANDARD

#: a server every check runs against: Kafka's authorizer (for the ACL calls), the
#: PLAINTEXT connections' User:ANONYMOUS a super user (allowed everything else)
AUTHORIZER = {"authorizer.class.name": STANDARD, "super.users": "User:ANONYMOUS"}
#: the kafka-clients version the tier runs (../shared/jars/spark-4.3)
CLIENT_MINOR = "3.9."


def run_check(command: list[str], check: str, bootstrap: str, replication: int, prefix: str,
              *extra: str) -> dict[str, str]:
    facts = run_facts(command, check, bootstrap, str(replication), prefix, *extra)
    assert facts["client.version"].startswith(CLIENT_MINOR), facts["client.version"]
    return facts


def check_idempotent(facts: dict[str, str]) -> None:
    for partition in range(3):
        assert facts[f"idempotent.acked.p{partition}"] == "0..99", facts
    assert (facts["idempotent.read"], facts["idempotent.distinct"], facts["idempotent.in_order"]) == (
        "300", "300", "true"), facts


def check_transactions(facts: dict[str, str]) -> None:
    committed = [f"c-in{i}" for i in range(10)]
    assert facts["txn.inputs"] == "10", facts
    assert facts["txn.offset_after_abort"] == "5", facts  # the aborted offset commit is gone
    assert facts["txn.offset_final"] == "10", facts
    assert facts["txn.read_committed"].split(",") == committed, facts
    assert facts["txn.read_uncommitted"].split(",") == (
        committed[:5] + [f"a-in{i}" for i in range(5, 10)] + committed[5:]), facts
    assert facts["txn.end_offset"] == "18", facts  # 15 records and 3 transaction markers


def check_groups(facts: dict[str, str], protocol: str) -> None:
    assert facts["group.assignment_sizes"] == "2,2", facts
    assert (facts["group.read"], facts["group.duplicates"]) == ("80", "0"), facts
    assert facts["group.second_batch_members"] == "2", facts  # both members consumed
    assert facts["group.described.state"] == "Stable", facts
    assert facts["group.described.type"] == ("Classic" if protocol == "classic" else "Consumer"), facts
    assert facts["group.described.members"] == "2", facts
    assert facts["group.described.partitions"] == "4", facts
    assert facts["group.described.client_ids"].endswith(f"group-{protocol}-b"), facts
    assert facts["group.described.coordinator_known"] == "true", facts
    assert facts["group.listed.state"] == "Empty", facts
    assert facts["group.listed.type"] == facts["group.described.type"], facts
    assert facts["group.offsets"] == "{0=20, 1=20, 2=20, 3=20}", facts
    assert facts["group.listed_after_delete"] == "false", facts
    assert facts["group.offsets_after_delete"] == "0", facts


def check_admin(facts: dict[str, str], replication: int, nodes: int) -> None:
    assert (facts["created.partitions"], facts["created.replication"]) == ("3", str(replication)), facts
    assert facts["created.config.retention.ms"] == "3600000 DYNAMIC_TOPIC_CONFIG", facts
    assert facts["created.config.segment.bytes"] == "1048576 DYNAMIC_TOPIC_CONFIG", facts
    assert facts["created.config.cleanup.policy"] == "delete DEFAULT_CONFIG", facts
    assert facts["created.topic_id_set"] == "true", facts
    assert (facts["validate_only.partitions"], facts["validate_only.listed"]) == ("2", "false"), facts
    assert facts["create_again"] == "TopicExistsException", facts
    assert facts["listed"] == "true", facts
    assert facts["describe.partitions"] == "3", facts
    assert facts["describe.replicas"] == ",".join([str(replication)] * 3), facts
    assert facts["describe.leader_is_first_replica"] == "true", facts
    assert facts["describe.topic_id_matches"] == "true", facts
    assert facts["describe.internal"] == "false", facts
    assert facts["describe.by_id.name"].endswith("-admin"), facts
    assert facts["partitions.after_increase"] == "5", facts
    assert facts["partitions.decrease"] == "InvalidPartitionsException", facts
    assert facts["partitions.leaders"] == "true", facts
    assert facts["config.before.retention.ms"] == "3600000 DYNAMIC_TOPIC_CONFIG", facts
    assert facts["config.before.cleanup.policy"] == "delete DEFAULT_CONFIG", facts
    assert facts["config.after.retention.ms"] == "7200000 DYNAMIC_TOPIC_CONFIG", facts
    assert facts["config.after.segment.bytes"] == "1073741824 DEFAULT_CONFIG", facts
    assert facts["config.after.cleanup.policy"] == "delete,compact DYNAMIC_TOPIC_CONFIG", facts
    assert facts["config.unknown"] == "InvalidConfigurationException", facts
    assert facts["config.broker.has_entries"] == "true", facts
    assert (facts["offsets.earliest"], facts["offsets.latest"]) == ("0", "10"), facts
    assert facts["offsets.max_timestamp"] == "6", facts
    assert facts["offsets.for_timestamp"] == "4", facts
    assert facts["delete_records.low_watermark"] == "4", facts
    assert facts["offsets.earliest_after_delete"] == "4", facts
    assert facts["delete_records.consumer_starts_at"] == "4", facts
    assert facts["cluster.nodes"] == str(nodes), facts
    assert (facts["cluster.controller_known"], facts["cluster.id_known"]) == ("true", "true"), facts
    assert facts["deleted.listed"] == "false", facts
    assert facts["deleted.describe"] == "UnknownTopicOrPartitionException", facts


def check_acls(facts: dict[str, str], prefix: str) -> None:
    topic = f"TOPIC:{prefix}-orders:LITERAL:User:alice:*:READ:ALLOW"
    group = f"GROUP:{prefix}-g-:PREFIXED:User:bob:*:DESCRIBE:DENY"
    assert facts["acls.create_invalid"] == "InvalidRequestException", facts
    assert facts["acls.all"] == f"{group};{topic}", facts
    assert facts["acls.topics"] == topic, facts
    assert facts["acls.match_group"] == group, facts
    assert facts["acls.deleted"] == topic, facts
    assert facts["acls.after_delete"] == group, facts
    assert facts["acls.after_delete_all"] == "", facts
