"""DescribeCluster (60): the brokers, the controller and the cluster id, without topics
(KIP-700; v1 adds the endpoint type of KIP-919)."""

from __future__ import annotations

from ..schema import F
from ..spec import api
from .metadata import AUTHORIZED_OPERATIONS_OMITTED

# fmt: off

ENDPOINT_TYPE_BROKER, ENDPOINT_TYPE_CONTROLLER = 1, 2

DESCRIBE_CLUSTER = api(
    60,
    "DescribeCluster",
    "0-1",
    flexible="0+",
    request=(
        F("IncludeClusterAuthorizedOperations", "bool", "0+"),
        F("EndpointType", "int8", "1+", default=ENDPOINT_TYPE_BROKER),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "0+"),
        F("ErrorMessage", "string", "0+", nullable="0+", default=None),
        F("EndpointType", "int8", "1+", default=ENDPOINT_TYPE_BROKER),
        F("ClusterId", "string", "0+"),
        F("ControllerId", "int32", "0+", default=-1),
        F(
            "Brokers", "[]DescribeClusterBroker", "0+",
            F("BrokerId", "int32", "0+"),
            F("Host", "string", "0+"),
            F("Port", "int32", "0+"),
            F("Rack", "string", "0+", nullable="0+", default=None),
        ),
        F("ClusterAuthorizedOperations", "int32", "0+", default=AUTHORIZED_OPERATIONS_OMITTED),
    ),
)

DescribeClusterRequest = DESCRIBE_CLUSTER.request
DescribeClusterResponse = DESCRIBE_CLUSTER.response
