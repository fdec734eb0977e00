"""The record of one fault run: what the clients were told and what they read.

Values of the idempotent producers are ``PRODUCER:SEQ`` (SEQ zero-padded, increasing per
producer and partition), so the checker can tell order and origin from the log alone;
transactional values are ``tN:pI`` (transaction N's record for partition I).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

COMMITTED, ABORTED, UNKNOWN = "committed", "aborted", "unknown"


def plain_value(producer: str, seq: int) -> bytes:
    return f"{producer}:{seq:09d}".encode()


def parse_plain(value: bytes) -> tuple[str, int]:
    producer, _, seq = value.decode().rpartition(":")
    return producer, int(seq)


def txn_value(txn: int, partition: int) -> bytes:
    return f"t{txn}:p{partition}".encode()


def parse_txn(value: bytes) -> tuple[int, int]:
    txn, _, part = value.decode().partition(":")
    return int(txn[1:]), int(part[1:])


@dataclass(frozen=True)
class Ack:
    """An acks=all produce the client reported as acknowledged (monotonic time ``at``).
    ``offset`` None: acknowledged without one (confluent-kafka's ``msg.offset()`` None:
    librdkafka reports a retried batch it concludes was already persisted so); seen
    once in the short form (seed 3), where the checker then failed on it."""
    partition: int
    offset: int | None
    value: bytes
    at: float


@dataclass(frozen=True)
class Txn:
    """One transaction: its records' partitions, the source offset it sent to the group
    (``send_offsets_to_transaction``) and how it ended as far as the client knows."""
    number: int
    partitions: tuple[int, ...]
    sent_offset: int
    outcome: str  # COMMITTED, ABORTED or UNKNOWN (a fatal error: either is allowed)
    at: float  # when the outcome was known


@dataclass(frozen=True)
class CommitAck:
    """An offset commit (or a transaction's offsets, once committed) acknowledged."""
    group: str
    partition: int
    offset: int
    at: float


@dataclass(frozen=True)
class OffsetRead:
    """A committed offset read back (OffsetFetch), asked at ``start``."""
    group: str
    partition: int
    offset: int
    start: float


@dataclass(frozen=True)
class EndRead:
    """A partition's log end (high watermark) as the leader reported it, asked at ``start``."""
    partition: int
    end_offset: int
    start: float


@dataclass
class History:
    acks: list[Ack] = field(default_factory=list)
    txns: list[Txn] = field(default_factory=list)
    commits: list[CommitAck] = field(default_factory=list)
    offset_reads: list[OffsetRead] = field(default_factory=list)
    end_reads: list[EndRead] = field(default_factory=list)
    #: the idempotent topic read in full at the end (read_uncommitted): partition -> [(offset, value)]
    log: dict[int, list[tuple[int, bytes]]] = field(default_factory=dict)
    #: who wrote each record of ``log``: partition -> offset -> (producer id, producer
    #: epoch, sequence), from the final log's batch headers (faultrun.batches)
    writers: dict[int, dict[int, tuple[int, int, int]]] = field(default_factory=dict)
    #: the transactional topic read in full at the end with read_committed
    committed_log: dict[int, list[tuple[int, bytes]]] = field(default_factory=dict)
    #: the transactional group, whose offsets come from transactions only
    txn_group: str = ""

    def save(self, path: Path) -> None:
        """The whole history as JSON (values as text), to read a violation against."""
        def plain(obj: object) -> object:
            if isinstance(obj, bytes):
                return obj.decode(errors="replace")
            raise TypeError(type(obj).__name__)
        path.write_text(json.dumps(asdict(self), default=plain))
