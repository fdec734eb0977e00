"""A blocking Kafka client for tests: the project's blocking client (commonlib.kafkaclient).

Its sans-I/O core matches every response to the oldest request still waiting, so a
response to a request that should have had none (acks=0), or one out of order, fails the
test. Below it: Produce, ListOffsets and Fetch requests of one partition for it, and a
produce retried (with the project's Backoff) while a new leader still answers
NOT_LEADER_OR_FOLLOWER. Tests that must bypass our code use helpers.rawwire instead.
"""

from __future__ import annotations

import time
from typing import Any

from commonlib.kafkaclient import Backoff, BlockingConnection, Failures
from helpers.rawwire import record_batch
from helpers.serverproc import HOST
from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import (
    FetchRequest,
    ListOffsetsRequest,
    ProduceRequest,
)


class BlockingClient(BlockingConnection):
    """One connection; ``send``/``recv`` apart so that requests can overlap."""

    def __init__(self, port: int, client_id: str = "tests", timeout: float = 30.0,
                 host: str = HOST) -> None:
        super().__init__(host, port, client_id=client_id, timeout=timeout)

    def call(self, api_key: int, version: int, body: Any) -> Any:
        """Send, then the body of the next response (whichever request it answers)."""
        self.send(api_key, version, body)
        return self.recv()


def produce_request(topic: str, partition: int, values: list[bytes], acks: int = -1,
                    timeout_ms: int = 10000) -> ProduceRequest:
    return ProduceRequest(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(
                index=partition, records=record_batch([(None, v) for v in values]))])])


def produce_to_leader(client: BlockingClient, request: ProduceRequest) -> int:
    """The error code of a produce, retried while the new leader is still opening its log
    (NOT_LEADER_OR_FOLLOWER is retriable; clients retry it the same way)."""
    deadline = time.monotonic() + 20
    failures = Failures(Backoff())  # retry.backoff.ms, retry.backoff.max.ms
    while True:
        response = client.call(ApiKey.PRODUCE, 7, request)
        error = response.responses[0].partition_responses[0].error_code
        if error != ErrorCode.NOT_LEADER_OR_FOLLOWER or time.monotonic() > deadline:
            return int(error)
        time.sleep(failures.failed())


def list_offsets_request(topic: str, partition: int, timestamp: int = -1) -> ListOffsetsRequest:
    return ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=partition,
                                                    current_leader_epoch=-1,
                                                    timestamp=timestamp)])])


def fetch_request(topic: str, partition: int, offset: int, epoch: int = -1) -> FetchRequest:
    return FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                        isolation_level=0, session_id=0, session_epoch=-1, topics=[
                            FetchRequest.FetchTopic(topic=topic, partitions=[
                                FetchRequest.FetchPartition(
                                    partition=partition, current_leader_epoch=epoch,
                                    fetch_offset=offset, last_fetched_epoch=-1,
                                    log_start_offset=-1, partition_max_bytes=1 << 20)])],
                        forgotten_topics_data=[], rack_id="")
