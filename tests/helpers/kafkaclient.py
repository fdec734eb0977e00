"""A blocking Kafka client for tests: a socket around the sans-I/O core ``kafkaproto.client``.

The core matches every response to the oldest request still waiting, so a response to a
request that should have had none (acks=0), or one out of order, fails the test.
Below it: Produce, ListOffsets and Fetch requests of one partition for it, and a produce
retried while a new leader still answers NOT_LEADER_OR_FOLLOWER.
"""

from __future__ import annotations

import socket
import time
from collections import deque
from typing import Any

from helpers.rawwire import record_batch
from helpers.serverproc import HOST
from kafkaproto import ApiKey, ErrorCode
from kafkaproto.client import ClientConnection, Response
from kafkaproto.messages import (
    FetchRequest,
    ListOffsetsRequest,
    ProduceRequest,
)


class BlockingClient:
    """One connection; ``send``/``recv`` apart so that requests can overlap."""

    def __init__(self, port: int, client_id: str = "tests", timeout: float = 30.0,
                 host: str = HOST) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.core = ClientConnection(client_id)
        self._responses: deque[Response] = deque()

    def send(self, api_key: int, version: int, body: Any, *, expect_response: bool = True) -> int:
        """Sends a request; returns its correlation id (no answer for acks=0: say so)."""
        correlation_id, frame = self.core.request(api_key, version, body,
                                                  expect_response=expect_response)
        self.sock.sendall(frame)
        return correlation_id

    def recv(self) -> Any:
        """The body of the next response (to the oldest request still waiting)."""
        while not self._responses:
            data = self.sock.recv(1 << 16)
            if not data:
                raise ConnectionError("server closed the connection")
            self._responses.extend(self.core.receive_data(data))
        response = self._responses.popleft()
        if response.error is not None:
            raise response.error
        return response.body

    def call(self, api_key: int, version: int, body: Any) -> Any:
        self.send(api_key, version, body)
        return self.recv()

    def close(self) -> None:
        self.sock.close()


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
    while True:
        response = client.call(ApiKey.PRODUCE, 7, request)
        error = response.responses[0].partition_responses[0].error_code
        if error != ErrorCode.NOT_LEADER_OR_FOLLOWER or time.monotonic() > deadline:
            return int(error)
        time.sleep(0.1)


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
