"""Manual replica assignments of CreateTopics, checked as Kafka's controller checks them.

Pure: given the request's ``assignments`` and the registered brokers, either the replica
lists by partition index (the first replica of each is its preferred leader) or the
Kafka error and message the client gets."""

from __future__ import annotations

from collections.abc import Collection, Iterable

from kafkaproto import ErrorCode


class AssignmentError(Exception):
    def __init__(self, error: int, message: str) -> None:
        super().__init__(message)
        self.error = error


def manual_assignment(assignments: Iterable[tuple[int, list[int]]], num_partitions: int,
                      replication_factor: int, registered: Collection[int]) -> list[tuple[int, ...]]:
    """``assignments``: (partition index, broker ids) pairs as the request gives them.
    Both counts must be -1 with an assignment (INVALID_REQUEST); each partition needs at
    least one registered broker, none twice, the same replica count as the others, and the
    indexes must be 0..n-1 with none twice (INVALID_REPLICA_ASSIGNMENT)."""
    if num_partitions != -1:
        raise AssignmentError(ErrorCode.INVALID_REQUEST,
                              "a replica assignment was given, but num_partitions is not -1")
    if replication_factor != -1:
        raise AssignmentError(ErrorCode.INVALID_REQUEST,
                              "a replica assignment was given, but replication_factor is not -1")
    by_index: dict[int, tuple[int, ...]] = {}
    size: int | None = None
    for index, broker_ids in assignments:
        if index in by_index:
            raise AssignmentError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                  f"partition {index} is assigned more than once")
        if not broker_ids:
            raise AssignmentError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                  f"partition {index} has an empty replica list")
        for broker_id in sorted(broker_ids):
            if broker_id not in registered:
                raise AssignmentError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                      f"partition {index} names broker {broker_id}, which is "
                                      "not registered")
        if len(set(broker_ids)) != len(broker_ids):
            raise AssignmentError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                  f"partition {index} names a broker more than once: {broker_ids}")
        if size is not None and len(broker_ids) != size:
            raise AssignmentError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                  f"partition {index} has {len(broker_ids)} replicas, the "
                                  f"partitions before it {size}")
        size = len(broker_ids)
        by_index[index] = tuple(broker_ids)
    if sorted(by_index) != list(range(len(by_index))):
        raise AssignmentError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                              "partition indexes must be 0, 1, ... n-1 with none missing, "
                              f"got {sorted(by_index)}")
    return [by_index[i] for i in range(len(by_index))]
