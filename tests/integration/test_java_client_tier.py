"""The real Java client (kafka-clients 3.9, ../shared/jars/spark-4.3) against one server
with Kafka's authorizer: idempotent and transactional producers, classic and KIP-848
consumer groups, and the AdminClient's topic, config, partition, record, group and ACL
calls, each run of tests/helpers/java/ClientTier.java checked fact by fact
(tests/helpers/java_tier.py; the 3-broker run: tests/cluster/test_java_client_cluster.py).
"""

from __future__ import annotations

import pytest
from helpers.java_tier import (
    AUTHORIZER,
    check_acls,
    check_admin,
    check_groups,
    check_idempotent,
    check_transactions,
    run_check,
)
from helpers.serverproc import ServerProcess

# One worker runs them all (--dist loadgroup): one server a run, not one per worker.
pytestmark = [pytest.mark.timeout(120), pytest.mark.xdist_group("java-client-tier")]


@pytest.fixture(scope="module")
def tier_server(request, tmp_path_factory) -> ServerProcess:
    srv = ServerProcess(tmp_path_factory.mktemp("java-tier") / "data", settings=AUTHORIZER)
    request.addfinalizer(srv.stop)
    srv.start()
    return srv


def test_idempotent_producer(java_client_tier, tier_server) -> None:
    check_idempotent(run_check(java_client_tier, "idempotent", tier_server.bootstrap, 1, "idem"))


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_transactions_consume_transform_produce(java_client_tier, tier_server, protocol) -> None:
    check_transactions(run_check(java_client_tier, "transactions", tier_server.bootstrap, 1,
                                 f"txn-{protocol}", protocol))


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_two_members_share_partitions(java_client_tier, tier_server, protocol) -> None:
    check_groups(run_check(java_client_tier, "groups", tier_server.bootstrap, 1,
                           f"groups-{protocol}", protocol), protocol)


def test_admin_topics_configs_partitions_records(java_client_tier, tier_server) -> None:
    check_admin(run_check(java_client_tier, "admin", tier_server.bootstrap, 1, "adm"), 1, 1)


def test_admin_acls(java_client_tier, tier_server) -> None:
    check_acls(run_check(java_client_tier, "acls", tier_server.bootstrap, 1, "acl"), "acl")
