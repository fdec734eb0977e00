"""What the sans-I/O group logic asks its asyncio glue to do, as plain data.

The membership state machine and the offsets bookkeeping never touch a future, a loop
or the log. Each event they handle returns a list of these decisions, which the
coordinator carries out in order: answer a parked request, arm or cancel a timer,
append records to ``__consumer_offsets``. A timer that fires and an append that has
become durable come back to them as events of their own.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

RequestId = int  # a parked request, numbered by the coordinator


class TimerKind(enum.Enum):
    HEARTBEAT = "heartbeat"  # a member's session (or a new member's join) timeout
    PENDING_MEMBER = "pending-member"  # a KIP-394 member id handed out, not yet used
    JOIN = "join"  # a group's initial delay or rebalance timeout
    SYNC = "sync"  # a generation's members that have not sent SyncGroup yet
    OFFSET_EXPIRY = "offset-expiry"  # offsets.retention.check.interval.ms
    # the consumer group protocol (KIP-848, groups/consumer)
    CONSUMER_SESSION = "consumer-session"  # group.consumer.session.timeout.ms
    CONSUMER_REVOCATION = "consumer-revocation"  # a member's rebalance timeout


@dataclass(frozen=True, slots=True)
class TimerKey:
    """Which timer: arming a key that is armed already replaces it."""

    kind: TimerKind
    group_id: str = ""
    member_id: str = ""
    generation: int = -1


@dataclass(frozen=True, slots=True)
class ArmTimer:
    key: TimerKey
    delay_ms: int


@dataclass(frozen=True, slots=True)
class CancelTimer:
    key: TimerKey


@dataclass(frozen=True, slots=True)
class Reply:
    """Answer a parked request (ignored if its client is gone)."""

    request: RequestId
    result: Any


@dataclass(frozen=True, slots=True)
class Append:
    """Append records to the group's partition of ``__consumer_offsets``.

    ``then`` comes back with the append's error once the records are as durable as the
    durability setting promises (or the append failed).
    """

    group_id: str
    records: tuple[tuple[bytes, bytes | None], ...]
    then: Any


Decision = ArmTimer | CancelTimer | Reply | Append


class DecisionMaker:
    """The decisions of the one event being handled, and the time it came with.

    Every public event method starts with ``_begin`` and returns ``_done()``; events
    never nest, so one list per maker is enough.
    """

    def __init__(self) -> None:
        self._now = 0
        self._out: list[Decision] = []

    def _begin(self, now_ms: int) -> None:
        self._now = now_ms
        self._out = []

    def _done(self) -> list[Decision]:
        out, self._out = self._out, []
        return out
