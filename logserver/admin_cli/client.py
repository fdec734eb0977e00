"""The command line's Kafka connections: the project's blocking client, CLI errors.

A command sends a few requests and exits, so the blocking client (commonlib.kafkaclient)
is the glue; this only turns its failures into the CLI's errors and exit codes. Only
standard Kafka APIs are used, chosen at the highest version both sides speak, so the
commands work against Apache Kafka too.
"""

from __future__ import annotations

import time
from typing import Any

from commonlib.kafkaclient import (
    Backoff,
    BlockingConnection,
    Failures,
    KafkaConnectionError,
    KafkaError,
)
from commonlib.kafkaclient import parse_hostport as _parse_hostport
from kafkaproto import ApiKey, ErrorCode
from kafkaproto.errors import DecodeError, ProtocolError
from kafkaproto.messages import (
    FindCoordinatorRequest,
    MetadataRequest,
    MetadataResponse,
)
from kafkaproto.registry import API_SPECS

from .errors import CliError, ServerUnreachable, kafka_error

CLIENT_ID = "logserver-cli"
DEFAULT_BOOTSTRAP = "localhost:9092"
#: Waiting for a topic created on first use to get its leaders (Kafka's retry backoffs).
METADATA_BACKOFF = Backoff(100, 1000)


def parse_hostport(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``PLAINTEXT://HOST:PORT``, ``[::1]:PORT``) as a pair."""
    try:
        return _parse_hostport(text)
    except ValueError:
        raise CliError(f"bad --bootstrap-server {text.strip()!r}: expected HOST:PORT") from None


class BrokerLink(BlockingConnection):
    """One connection to one broker; requests answered in order, one at a time; every
    failure a :class:`CliError` (ServerUnreachable: exit code 3)."""

    timeout: float  # a command always has one

    def __init__(self, host: str, port: int, *, timeout: float) -> None:
        try:
            super().__init__(host, port, client_id=CLIENT_ID, timeout=timeout)
        except KafkaConnectionError as exc:
            raise ServerUnreachable(str(exc)) from None
        try:
            self.negotiate()
        except ServerUnreachable:
            self.close()
            raise
        except KafkaError as exc:
            self.close()
            raise kafka_error(f"ApiVersions from {self.address}", exc.code) from None

    def version(self, api_key: int, ceiling: int | None = None) -> int:
        try:
            return super().version(api_key, ceiling)
        except KafkaError:
            spec = API_SPECS.get(api_key)
            name = spec.name if spec is not None else f"API {api_key}"
            raise CliError(f"the server at {self.address} does not support {name} "
                           f"(API key {api_key}) at a version this tool speaks") from None

    def send_only(self, api_key: int, body: Any, *, ceiling: int | None = None) -> None:
        """Send a request the broker does not answer (a Produce with acks=0)."""
        version = self.version(api_key, ceiling)
        try:
            self.send(api_key, version, body, expect_response=False)
        except KafkaConnectionError as exc:
            raise ServerUnreachable(str(exc)) from None

    def request(self, api_key: int, version: int, body: Any, *,
                timeout: float | None = None) -> Any:
        try:
            return super().request(api_key, version, body, timeout=timeout)
        except KafkaConnectionError as exc:
            raise ServerUnreachable(str(exc)) from None
        except DecodeError as exc:
            raise CliError(f"cannot decode the answer of {self.address}: {exc}") from None
        except ProtocolError as exc:
            raise ServerUnreachable(f"unreadable answer from {self.address}: {exc} "
                                    f"(is it a Kafka server?)") from None


class Cluster:
    """The bootstrap connection, metadata, and a connection per broker on demand."""

    def __init__(self, bootstrap: str, *, timeout: float = 10.0) -> None:
        self.bootstrap = [parse_hostport(b) for b in bootstrap.split(",") if b.strip()]
        if not self.bootstrap:
            raise CliError("no --bootstrap-server given")
        self.timeout = timeout
        self.brokers: dict[int, tuple[str, int]] = {}
        self._links: dict[int, BrokerLink] = {}
        self._any: BrokerLink | None = None

    # ---- connections -------------------------------------------------------------
    def any(self) -> BrokerLink:
        """A connection to the first bootstrap server that answers."""
        if self._any is None:
            last: ServerUnreachable | None = None
            for host, port in self.bootstrap:
                try:
                    self._any = BrokerLink(host, port, timeout=self.timeout)
                    break
                except ServerUnreachable as exc:
                    last = exc
            else:
                assert last is not None
                raise last
        return self._any

    def node(self, node_id: int) -> BrokerLink:
        """A connection to broker ``node_id`` (learnt from metadata)."""
        link = self._links.get(node_id)
        if link is not None:
            return link
        if node_id not in self.brokers:
            self.metadata([])
        if node_id not in self.brokers:
            raise CliError(f"broker {node_id} is not in the cluster's metadata")
        host, port = self.brokers[node_id]
        bootstrap = self.any()
        if (host, port) == (bootstrap.host, bootstrap.port):
            link = bootstrap
        else:
            link = BrokerLink(host, port, timeout=self.timeout)
        self._links[node_id] = link
        return link

    def close(self) -> None:
        for link in {id(x): x for x in [*self._links.values(), self._any] if x}.values():
            link.close()

    # ---- metadata ----------------------------------------------------------------
    def metadata(self, topics: list[str] | None, *, auto_create: bool = False) -> MetadataResponse:
        """Metadata for ``topics`` (None: every topic); creating them only if
        ``auto_create`` and the server creates topics on first use."""
        link = self.any()
        version = link.version(ApiKey.METADATA, 12)
        request = MetadataRequest(
            topics=None if topics is None
            else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=auto_create)
        if version < 1 and topics is None:
            request.topics = []  # v0: an empty list means every topic
        response: MetadataResponse = link.request(ApiKey.METADATA, version, request)
        self.brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        return response

    def topic_partitions(self, topic: str, *, auto_create: bool = False) -> dict[int, int]:
        """Partition -> leader of an existing topic; CliError naming it if unknown.

        With ``auto_create`` (produce and consume, as Kafka's console tools), a topic the
        server creates on first use is waited for until its partitions have leaders.
        """
        deadline = time.monotonic() + self.timeout
        failures = Failures(METADATA_BACKOFF)
        while True:
            metadata = self.metadata([topic], auto_create=auto_create)
            meta = next((t for t in metadata.topics if t.name == topic), None)
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if meta is None else meta.error_code
            leaders = {} if meta is None else {p.partition_index: p.leader_id
                                               for p in meta.partitions}
            if code == 0 and leaders and min(leaders.values()) >= 0:
                return leaders
            if code not in (ErrorCode.LEADER_NOT_AVAILABLE, 0) or time.monotonic() > deadline:
                break
            time.sleep(failures.failed())
        if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            hint = " (and the server does not create topics on first use)" if auto_create else ""
            raise CliError(f"unknown topic {topic!r}{hint}")
        if code:
            raise kafka_error(f"topic {topic!r}", code)
        raise CliError(f"topic {topic!r} has partitions without a leader")

    def coordinator(self, group: str) -> BrokerLink:
        """The connection to ``group``'s coordinator (FindCoordinator)."""
        link = self.any()
        version = link.version(ApiKey.FIND_COORDINATOR, 4)
        request = FindCoordinatorRequest(key=group, key_type=0, coordinator_keys=[group])
        response = link.request(ApiKey.FIND_COORDINATOR, version, request)
        if version >= 4:
            (answer,) = response.coordinators
            code, node_id, host, port = answer.error_code, answer.node_id, answer.host, answer.port
        else:
            code, node_id = response.error_code, response.node_id
            host, port = response.host, response.port
        if code:
            raise kafka_error(f"finding the coordinator of group {group!r}", code)
        self.brokers.setdefault(node_id, (host, port))
        return self.node(node_id)
