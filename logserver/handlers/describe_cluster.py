"""DescribeCluster: the brokers, the controller and the cluster id (what Metadata says of
the cluster, without the topics), and the cluster's authorized operations when asked.

As Kafka: no authorization is needed to describe the cluster; the authorized operations
are 0 without DESCRIBE on it. Only the broker endpoint type is served (v1): a request
for the controllers' endpoints gets MISMATCHED_ENDPOINT_TYPE. In cluster mode the
brokers are the live members the cluster model lists, as in its Metadata.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import DescribeClusterRequest, DescribeClusterResponse
from kafkaproto.messages.cluster import ENDPOINT_TYPE_BROKER
from kafkaproto.messages.metadata import AUTHORIZED_OPERATIONS_OMITTED
from logserver.security import checks
from logserver.security.acl import CLUSTER_NAME, ResourceType

if TYPE_CHECKING:
    from logserver.services import BrokerServices

Broker_ = DescribeClusterResponse.DescribeClusterBroker


def handle(broker: BrokerServices, header: RequestHeader,
           request: DescribeClusterRequest) -> DescribeClusterResponse:
    if request.endpoint_type != ENDPOINT_TYPE_BROKER:
        # v0 cannot carry another type; Kafka answers INVALID_REQUEST there
        return DescribeClusterResponse(
            throttle_time_ms=0, cluster_id=broker.cluster_id, brokers=[],
            error_code=(ErrorCode.MISMATCHED_ENDPOINT_TYPE if header.api_version >= 1
                        else ErrorCode.INVALID_REQUEST),
            error_message=f"this is a broker endpoint (type {ENDPOINT_TYPE_BROKER}); the request "
                          f"asked for endpoint type {request.endpoint_type}")
    operations = AUTHORIZED_OPERATIONS_OMITTED
    if request.include_cluster_authorized_operations:
        operations = (checks.authorized_operations(broker, ResourceType.CLUSTER, CLUSTER_NAME)
                      if checks.allowed(broker, checks.DESCRIBE_CLUSTER) else 0)
    cluster_id, controller_id, brokers = _members(broker)
    return DescribeClusterResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, endpoint_type=ENDPOINT_TYPE_BROKER,
        cluster_id=cluster_id, controller_id=controller_id, brokers=brokers,
        cluster_authorized_operations=operations)


def _members(broker: BrokerServices) -> tuple[str, int, list[DescribeClusterResponse.DescribeClusterBroker]]:
    control = broker.control
    brokers = [Broker_(broker_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
               for b in control.members()]
    return control.cluster_id(), control.controller_id(), brokers
