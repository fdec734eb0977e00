"""Who may answer a request for a partition in cluster mode: its leader, at its epoch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaproto import ErrorCode

if TYPE_CHECKING:
    from logserver.broker import Broker
    from logserver.cluster.node import ClusterNode


def node_of(broker: Broker) -> ClusterNode:
    node = broker.cluster
    assert node is not None, "cluster handlers serve only in cluster mode"
    return node


def leader_error(node: ClusterNode, topic: str, index: int) -> int:
    state = node.model.partition(topic, index)
    if state is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if state.leader != node.node_id or (topic, index) not in node.leaders:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return ErrorCode.NONE
