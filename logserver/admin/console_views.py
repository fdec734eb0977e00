"""The console's read-only views of configs and ACLs.

Configs are what DescribeConfigs answers (Kafka's sources and sensitive values hidden
as null): a topic's from this broker, a broker's from that broker itself (as Kafka's
AdminClient sends a BROKER resource to its node), so a down broker's configs answer 503.
ACLs are this broker's authorizer's bindings, which every broker keeps in step from etcd.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import DescribeConfigsRequest, DescribeConfigsResponse
from logserver.admin import peers

if TYPE_CHECKING:
    from logserver.cluster_access import WithCluster

TOPIC, BROKER = 2, 4  # DescribeConfigs resource types
DESCRIBE_CONFIGS_VERSION = 4
#: Kafka's ConfigEntry.ConfigSource by wire code
SOURCES = ("UNKNOWN", "DYNAMIC_TOPIC_CONFIG", "DYNAMIC_BROKER_CONFIG",
           "DYNAMIC_DEFAULT_BROKER_CONFIG", "STATIC_BROKER_CONFIG", "DEFAULT_CONFIG",
           "DYNAMIC_BROKER_LOGGER_CONFIG", "CLIENT_METRICS_CONFIG", "GROUP_CONFIG")


class ConfigsError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def configs(broker: WithCluster, resource_type: int, name: str,
                  known: Collection[int] = ()) -> dict[str, Any]:
    """The configs of a topic or a broker (by node id) as DescribeConfigs gives them;
    ``known``: the brokers listed (a known one not live is down: 503, else 404)."""
    addresses = peers.live_addresses(broker)
    if resource_type == BROKER:
        node = int(name)
        name = str(node)
        address = addresses.get(node)
        if address is None and node in known:
            raise ConfigsError(503, f"broker {node} is down")
        if address is None:
            raise ConfigsError(404, f"unknown broker {node}")
    else:
        address = addresses[broker.node_id]
    try:
        [answer] = await peers.ask(broker, address, [(
            ApiKey.DESCRIBE_CONFIGS, DESCRIBE_CONFIGS_VERSION, DescribeConfigsRequest(
                resources=[DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=resource_type, resource_name=name,
                    configuration_keys=None)]))])
    except peers.PeerUnreachable as exc:
        raise ConfigsError(503, str(exc)) from exc
    assert isinstance(answer, DescribeConfigsResponse)
    [result] = answer.results
    if result.error_code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             ErrorCode.INVALID_TOPIC_EXCEPTION):
        raise ConfigsError(404, f"unknown topic {name!r}")
    if result.error_code in (ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                             ErrorCode.CLUSTER_AUTHORIZATION_FAILED):
        raise ConfigsError(403, ErrorCode(result.error_code).name)
    if result.error_code != ErrorCode.NONE:
        raise ConfigsError(502, result.error_message or ErrorCode(result.error_code).name)
    return {"resource_type": "topic" if resource_type == TOPIC else "broker",
            "name": name, "configs": [
                {"name": c.name, "value": c.value, "read_only": c.read_only,
                 "sensitive": c.is_sensitive,
                 "source": SOURCES[c.config_source] if 0 <= c.config_source < len(SOURCES)
                 else "UNKNOWN"}
                for c in sorted(result.configs, key=lambda c: c.name)]}


def acls(broker: WithCluster) -> dict[str, Any]:
    """Every ACL binding (Kafka's JSON names), and whether an authorizer is on."""
    authorizer = broker.authorizer
    if authorizer is None:
        return {"authorizer": False, "acls": []}
    return {"authorizer": True, "acls": [acl.to_json() for acl in sorted(authorizer.acls)]}
