"""The real Java client (kafka-clients 3.9, ../shared/jars/spark-4.3) against 3 brokers on
one etcd (replication factor 3, min.insync.replicas 2, Kafka's authorizer): the checks of
tests/integration/test_java_client_tier.py, the same facts (tests/helpers/java_tier.py),
with every topic replicated on all three brokers and groups, transactions and ACLs
coordinated wherever the cluster puts them."""

from __future__ import annotations

import pytest
from helpers.clusterprocs import Cluster, running_cluster
from helpers.java_tier import (
    AUTHORIZER,
    check_acls,
    check_admin,
    check_groups,
    check_idempotent,
    check_transactions,
    run_check,
)

# One worker runs them all (--dist loadgroup): one cluster a run, not one per worker.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(180),
              pytest.mark.xdist_group("java-client-cluster")]

RF = 3


@pytest.fixture(scope="module")
def tier_cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("java-cluster")
    with running_cluster(root, 3, **{**AUTHORIZER, "min.insync.replicas": 2,
                                     "default.replication.factor": RF}) as nodes:
        yield nodes


def test_idempotent_producer(java_client_tier, tier_cluster: Cluster) -> None:
    check_idempotent(run_check(java_client_tier, "idempotent", tier_cluster.bootstrap, RF, "idem"))


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_transactions_consume_transform_produce(java_client_tier, tier_cluster: Cluster,
                                                protocol) -> None:
    check_transactions(run_check(java_client_tier, "transactions", tier_cluster.bootstrap, RF,
                                 f"txn-{protocol}", protocol))


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_two_members_share_partitions(java_client_tier, tier_cluster: Cluster, protocol) -> None:
    check_groups(run_check(java_client_tier, "groups", tier_cluster.bootstrap, RF,
                           f"groups-{protocol}", protocol), protocol)


def test_admin_topics_configs_partitions_records(java_client_tier, tier_cluster: Cluster) -> None:
    check_admin(run_check(java_client_tier, "admin", tier_cluster.bootstrap, RF, "adm"), RF, 3)


def test_admin_acls(java_client_tier, tier_cluster: Cluster) -> None:
    check_acls(run_check(java_client_tier, "acls", tier_cluster.bootstrap, RF, "acl"), "acl")
