"""ACLs against a real server with real clients: kafka-python's and confluent-kafka's admin
clients manage them, denials reach each client as its normal error, super.users and
allow.everyone.if.no.acl.found behave as in Kafka, and ACLs survive a restart.

On a PLAINTEXT listener every connection is User:ANONYMOUS, so the ACLs here are for
User:ANONYMOUS (tests/unit/test_security_authorizer.py covers named principals, sans-I/O).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import kafka.errors as kerrors
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicCollection
from confluent_kafka.admin import AclBinding as CkBinding
from confluent_kafka.admin import AclBindingFilter as CkFilter
from confluent_kafka.admin import AclOperation as CkOp
from confluent_kafka.admin import AclPermissionType as CkPerm
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import ResourcePatternType as CkPattern
from confluent_kafka.admin import ResourceType as CkType
from helpers.acls import ANON, acl_admin, kp_acl
from helpers.clienthelpers import ck_config, create_topic
from helpers.kafkaclient import BlockingClient
from helpers.kafkasec import STANDARD
from helpers.serverproc import ServerProcess, run_cli
from helpers.waiting import wait_until
from kafka import KafkaProducer
from kafka.admin import (
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePatternFilter,
    ResourceType,
)

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import DescribeUserScramCredentialsRequest, MetadataRequest
from kafkaproto.messages.metadata import AUTHORIZED_OPERATIONS_OMITTED

pytestmark = pytest.mark.timeout(120)

ANY_FILTER = ACLFilter(principal=None, host=None, operation=ACLOperation.ANY,
                       permission_type=ACLPermissionType.ANY,
                       resource_pattern=ResourcePatternFilter(ResourceType.ANY, None,
                                                              ACLResourcePatternType.ANY))
CK_ANY = CkFilter(CkType.ANY, None, CkPattern.ANY, None, None, CkOp.ANY, CkPerm.ANY)


def described(srv: ServerProcess) -> set[tuple[str, str, str, str, str]]:
    """Every ACL as kafka-python's admin client describes it."""
    with acl_admin(srv) as client:
        acls, error = client.describe_acls(ANY_FILTER)
    assert error is kerrors.NoError
    return {(a.resource_pattern.resource_type.name, a.resource_pattern.resource_name,
             a.resource_pattern.pattern_type.name, a.principal, a.operation.name) for a in acls}


def authorizing(server_factory: Callable[..., ServerProcess], **settings: object) -> ServerProcess:
    return server_factory(settings={"authorizer.class.name": STANDARD, **settings})


def test_admin_clients_create_describe_delete_and_acls_survive_restart(server_factory) -> None:
    srv = authorizing(server_factory, **{"super.users": ANON})
    with acl_admin(srv) as client:
        result = client.create_acls([
            kp_acl("orders", ACLOperation.READ, principal="User:alice"),
            kp_acl("logs-", ACLOperation.WRITE, ACLPermissionType.DENY, principal="User:bob",
                   pattern=ACLResourcePatternType.PREFIXED),
            kp_acl("orders", ACLOperation.READ, principal="alice"),  # no principal type
        ])
    assert len(result["succeeded"]) == 2
    assert result["failed"] == [kerrors.InvalidRequestError]

    ck = AdminClient(ck_config(srv.bootstrap))
    binding = CkBinding(CkType.GROUP, "billing", CkPattern.LITERAL, "User:carol", "*",
                        CkOp.READ, CkPerm.ALLOW)
    for future in ck.create_acls([binding]).values():
        assert future.result(timeout=30) is None
    found = ck.describe_acls(CK_ANY).result(timeout=30)
    assert binding in found and len(found) == 3
    expected = {("TOPIC", "orders", "LITERAL", "User:alice", "READ"),
                ("TOPIC", "logs-", "PREFIXED", "User:bob", "WRITE"),
                ("GROUP", "billing", "LITERAL", "User:carol", "READ")}
    assert described(srv) == expected

    del ck  # its connection would only retry during the restart
    srv.restart()
    assert described(srv) == expected
    ck = AdminClient(ck_config(srv.bootstrap))
    prefixed = CkFilter(CkType.TOPIC, "logs-", CkPattern.PREFIXED, None, None, CkOp.ANY, CkPerm.ANY)
    assert [b.name for b in ck.describe_acls(prefixed).result(timeout=30)] == ["logs-"]

    with acl_admin(srv) as client:
        results = client.delete_acls([ACLFilter(
            principal="User:alice", host=None, operation=ACLOperation.ANY,
            permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(ResourceType.TOPIC, "orders",
                                                   ACLResourcePatternType.LITERAL))])
    [(_, matched, error)] = results
    assert error is kerrors.NoError and [a.principal for a in matched] == ["User:alice"]
    [deleted_future] = ck.delete_acls([CkFilter(CkType.GROUP, None, CkPattern.ANY, None, None,
                                                CkOp.ANY, CkPerm.ANY)]).values()
    assert [b.name for b in deleted_future.result(timeout=30)] == ["billing"]
    del ck
    srv.restart()
    assert described(srv) == {("TOPIC", "logs-", "PREFIXED", "User:bob", "WRITE")}


def test_acl_apis_without_an_authorizer_answer_security_disabled(server) -> None:
    with acl_admin(server) as client, pytest.raises(kerrors.SecurityDisabledError):
        client.describe_acls(ANY_FILTER)


def test_denials_reach_clients_as_their_normal_errors(server_factory, topic_name) -> None:
    """allow.everyone.if.no.acl.found=true: what has no ACL is open, DENYs close the rest."""
    srv = authorizing(server_factory, **{"allow.everyone.if.no.acl.found": "true"})
    open_topic, secret = f"{topic_name}-open", f"{topic_name}-secret"
    create_topic(srv.bootstrap, open_topic, partitions=1)
    create_topic(srv.bootstrap, secret, partitions=1)
    with acl_admin(srv) as client:
        result = client.create_acls([
            kp_acl(secret, ACLOperation.ALL, ACLPermissionType.DENY),
            kp_acl("denied-group", ACLOperation.READ, ACLPermissionType.DENY, ResourceType.GROUP),
        ])
        assert len(result["succeeded"]) == 2
        topics = wait_until(lambda: set(client.list_topics()) if secret not in client.list_topics()
                          else None, what="the denied topic to leave Metadata")
    assert open_topic in topics  # no ACL applies: allowed

    producer = KafkaProducer(bootstrap_servers=srv.bootstrap, max_block_ms=10_000)
    try:
        producer.send(open_topic, b"fine").get(timeout=30)
        with pytest.raises(kerrors.TopicAuthorizationFailedError):
            producer.send(secret, b"nope").get(timeout=30)
    finally:
        producer.close(timeout=10)

    errors: list[KafkaError] = []
    ck_producer = Producer(ck_config(srv.bootstrap))
    ck_producer.produce(secret, b"nope", on_delivery=lambda err, _msg: errors.append(err))
    wait_until(lambda: ck_producer.flush(1) == 0 and errors, what="the delivery report")
    assert errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    consumer = Consumer(ck_config(srv.bootstrap, **{"group.id": "denied-group",
                                                    "auto.offset.reset": "earliest"}))
    try:
        consumer.subscribe([open_topic])

        def group_error() -> KafkaError | None:
            message = consumer.poll(0.5)
            if message is not None and message.error() is not None \
                    and message.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                return message.error()
            return None

        assert wait_until(group_error, what="GROUP_AUTHORIZATION_FAILED").code() == \
            KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        consumer.close()


def test_super_users_pass_every_deny(server_factory, topic_name) -> None:
    srv = authorizing(server_factory, **{"super.users": f"User:admin;{ANON}"})
    create_topic(srv.bootstrap, topic_name, partitions=1)
    with acl_admin(srv) as client:
        client.create_acls([kp_acl("*", ACLOperation.ALL, ACLPermissionType.DENY, principal="User:*")])
    producer = KafkaProducer(bootstrap_servers=srv.bootstrap, max_block_ms=10_000)
    try:
        metadata = producer.send(topic_name, b"still allowed").get(timeout=30)
    finally:
        producer.close(timeout=10)
    assert metadata.offset == 0


def test_without_super_user_only_acls_grant_access(server_factory, topic_name) -> None:
    """The default (allow.everyone.if.no.acl.found=false): set ACLs as a super user, restart
    without one, and only what the ACLs allow works; Metadata hides the rest and reports
    the authorized operations Kafka would."""
    srv = authorizing(server_factory, **{"super.users": ANON})
    mine, other = f"{topic_name}-mine", f"{topic_name}-other"
    create_topic(srv.bootstrap, mine, partitions=1)
    create_topic(srv.bootstrap, other, partitions=1)
    with acl_admin(srv) as client:
        result = client.create_acls([kp_acl(mine, ACLOperation.WRITE),
                                     kp_acl(mine, ACLOperation.READ)])
    assert len(result["succeeded"]) == 2
    srv.restart(settings={**srv.settings, "super.users": ""})

    raw = BlockingClient(srv.port)
    try:
        asked = raw.call(ApiKey.METADATA, 10, MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=mine),
                    MetadataRequest.MetadataRequestTopic(name=other)],
            allow_auto_topic_creation=False, include_cluster_authorized_operations=True,
            include_topic_authorized_operations=True))
        everything = raw.call(ApiKey.METADATA, 9, MetadataRequest(
            topics=None, allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False, include_topic_authorized_operations=False))
        created = raw.call(ApiKey.METADATA, 9, MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=f"{topic_name}-new")],
            allow_auto_topic_creation=True, include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False))
    finally:
        raw.close()
    by_name = {t.name: t for t in asked.topics}
    read_write_describe = (1 << 3) | (1 << 4) | (1 << 8)
    assert by_name[mine].error_code == ErrorCode.NONE
    assert by_name[mine].topic_authorized_operations == read_write_describe
    assert by_name[other].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert by_name[other].partitions == []
    assert asked.cluster_authorized_operations == 0  # no DESCRIBE on the cluster
    assert [t.name for t in everything.topics] == [mine]
    assert everything.topics[0].topic_authorized_operations == AUTHORIZED_OPERATIONS_OMITTED
    assert [t.error_code for t in created.topics] == [ErrorCode.TOPIC_AUTHORIZATION_FAILED]

    producer = KafkaProducer(bootstrap_servers=srv.bootstrap, max_block_ms=10_000)
    try:
        assert producer.send(mine, b"allowed").get(timeout=30).offset == 0
        with pytest.raises(kerrors.TopicAuthorizationFailedError):
            producer.send(other, b"denied").get(timeout=30)
    finally:
        producer.close(timeout=10)
    with acl_admin(srv) as client, pytest.raises(kerrors.ClusterAuthorizationFailedError):
        client.describe_acls(ANY_FILTER)

    ck = AdminClient(ck_config(srv.bootstrap))
    [future] = ck.describe_topics(TopicCollection([mine]),
                                  include_authorized_operations=True).values()
    operations = {op.name for op in future.result(timeout=30).authorized_operations}
    assert operations == {"READ", "WRITE", "DESCRIBE"}
    assert other not in ck.list_topics(timeout=30).topics


def test_start_up_refuses_other_authorizers_and_a_damaged_acl_file(tmp_path) -> None:
    base = ["--log.dirs", str(tmp_path), "--listeners", "PLAINTEXT://127.0.0.1:0"]
    other = run_cli([*base, "--authorizer.class.name", "com.example.CustomAuthorizer"])
    assert other.returncode == 2 and "authorizer.class.name" in other.stderr
    (tmp_path / "acls.json").write_text("{damaged")
    damaged = run_cli([*base, "--authorizer.class.name", STANDARD])
    assert damaged.returncode == 1 and "cannot read the ACLs" in damaged.stderr


def test_admin_changes_to_topics_need_their_acls(server_factory, topic_name) -> None:
    """CreatePartitions needs ALTER, DeleteRecords DELETE, config changes ALTER_CONFIGS on
    the topic, DescribeLogDirs DESCRIBE on the cluster: a DENY on each refuses it with the
    code Kafka uses, and the topic is left as it was. (An ACL on a resource turns off
    allow.everyone.if.no.acl.found for it, so DESCRIBE and DESCRIBE_CONFIGS are granted.)"""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
    )

    srv = authorizing(server_factory, **{"allow.everyone.if.no.acl.found": "true"})
    create_topic(srv.bootstrap, topic_name, partitions=1)
    with acl_admin(srv) as client:
        result = client.create_acls([
            kp_acl(topic_name, ACLOperation.DESCRIBE),
            kp_acl(topic_name, ACLOperation.DESCRIBE_CONFIGS),
            kp_acl(topic_name, ACLOperation.ALTER, ACLPermissionType.DENY),
            kp_acl(topic_name, ACLOperation.DELETE, ACLPermissionType.DENY),
            kp_acl(topic_name, ACLOperation.ALTER_CONFIGS, ACLPermissionType.DENY),
            kp_acl("kafka-cluster", ACLOperation.DESCRIBE, ACLPermissionType.DENY,
                   ResourceType.CLUSTER),
        ])
        assert len(result["succeeded"]) == 6
    ck = AdminClient(ck_config(srv.bootstrap))

    def failure(future: Any) -> KafkaError:
        with pytest.raises(Exception) as raised:
            future.result(timeout=30)
        return raised.value.args[0]

    grown = ck.create_partitions([NewPartitions(topic_name, 3)])[topic_name]
    assert failure(grown).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    deleted = ck.delete_records([TopicPartition(topic_name, 0, 0)])
    assert failure(next(iter(deleted.values()))).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    resource = ConfigResource("TOPIC", topic_name, incremental_configs=[
        ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)])
    altered = ck.incremental_alter_configs([resource])[resource]
    assert failure(altered).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with acl_admin(srv) as client:
        [answer] = client.describe_log_dirs()
    # Before v3 the answer has no error code: Kafka answers an empty list instead.
    assert answer.get("error_code", ErrorCode.CLUSTER_AUTHORIZATION_FAILED) == \
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert answer["log_dirs"] == []
    described_configs = ck.describe_configs([ConfigResource("TOPIC", topic_name)])
    entries = next(iter(described_configs.values())).result(timeout=30)
    assert entries["retention.ms"].value != "1000"
    assert ck.list_topics(topic_name, timeout=30).topics[topic_name].partitions.keys() == {0}


def test_scram_user_admin_needs_cluster_acls(server_factory) -> None:
    """DescribeUserScramCredentials needs DESCRIBE on the cluster, AlterUserScramCredentials
    ALTER: without ACLs both are refused and no user is created."""
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    srv = authorizing(server_factory)
    ck = AdminClient(ck_config(srv.bootstrap))
    upsert = UserScramCredentialUpsertion(
        "bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"secret")
    futures = ck.alter_user_scram_credentials([upsert])
    with pytest.raises(Exception) as altered_error:
        futures["bob"].result(timeout=30)
    assert altered_error.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # Raw: confluent-kafka 2.x crashes on any refused DescribeUserScramCredentials.
    raw = BlockingClient(srv.port)
    try:
        described = raw.call(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0,
                             DescribeUserScramCredentialsRequest(users=None))
    finally:
        raw.close()
    assert described.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert described.results == []
    assert srv.data_dir is not None
    credentials = srv.data_dir / "__scram_credentials.json"
    assert not credentials.exists() or "bob" not in credentials.read_text()


def test_acl_cli_create_list_delete(server_factory) -> None:
    """logserver acl create|list|delete (kafka-acls): what it creates is what kafka-python
    describes, list filters, delete removes only what matches."""
    from helpers.admin_cli import ok, ok_json

    srv = authorizing(server_factory, **{"super.users": ANON})
    b = srv.bootstrap
    rows = ok_json("acl", "create", "--topic", "orders", "--allow-principal", "User:alice",
                   "--operation", "read", "--operation", "describe", "-b", b)
    assert [(r["operation"], r["permission"], r["error"]) for r in rows] == [
        ("read", "allow", None), ("describe", "allow", None)]
    ok("acl", "create", "--topic", "logs-", "--resource-pattern-type", "prefixed",
       "--deny-principal", "User:bob", "--operation", "write", "-b", b)
    ok("acl", "create", "--group", "billing", "--allow-principal", "User:carol",
       "--operation", "read", "-b", b)
    assert described(srv) == {("TOPIC", "orders", "LITERAL", "User:alice", "READ"),
                              ("TOPIC", "orders", "LITERAL", "User:alice", "DESCRIBE"),
                              ("TOPIC", "logs-", "PREFIXED", "User:bob", "WRITE"),
                              ("GROUP", "billing", "LITERAL", "User:carol", "READ")}
    listed = ok_json("acl", "list", "-b", b)
    assert len(listed) == 4
    alice = ok_json("acl", "list", "--principal", "User:alice", "-b", b)
    assert {r["operation"] for r in alice} == {"read", "describe"}
    denied = ok_json("acl", "list", "--topic", "logs-", "--resource-pattern-type",
                     "prefixed", "-b", b)
    assert [(r["principal"], r["permission"], r["pattern_type"]) for r in denied] == [
        ("User:bob", "deny", "prefixed")]
    text = ok("acl", "list", "--group", "billing", "-b", b)
    assert text.splitlines()[0].split()[:4] == ["PRINCIPAL", "HOST", "OPERATION", "PERMISSION"]
    gone = ok_json("acl", "delete", "--topic", "orders", "--operation", "describe", "-b", b)
    assert [(r["principal"], r["operation"]) for r in gone] == [("User:alice", "describe")]
    assert ("TOPIC", "orders", "LITERAL", "User:alice", "DESCRIBE") not in described(srv)
    assert len(described(srv)) == 3
