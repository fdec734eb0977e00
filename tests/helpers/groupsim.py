"""Drives the sans-I/O group logic (membership.py, offsets.py) the way the coordinator's
glue does, with a clock the test moves: no broker, no event loop, no sockets.

Replies are recorded by request id, timers are kept as deadlines and fired when the clock
passes them, appends wait until the test completes them (durable or failed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kafkaproto import ErrorCode
from logserver.groups.decisions import Append, ArmTimer, CancelTimer, Decision, Reply, TimerKey
from logserver.groups.group import Group
from logserver.groups.membership import GroupWritten, Membership, MembershipSettings
from logserver.groups.offsets import Offsets, OffsetSettings


@dataclass
class Sim:
    settings: MembershipSettings = field(default_factory=lambda: MembershipSettings(
        min_session_timeout_ms=100, max_session_timeout_ms=60_000,
        initial_rebalance_delay_ms=0, max_group_size=100))
    offset_settings: OffsetSettings = field(default_factory=OffsetSettings)
    now: int = 1_000_000
    replies: dict[int, Any] = field(default_factory=dict)
    timers: dict[TimerKey, int] = field(default_factory=dict)  # key -> deadline
    appends: list[Append] = field(default_factory=list)  # not yet durable
    written: list[Append] = field(default_factory=list)  # completed (any outcome)
    next_request: int = 0
    ids: int = 0

    def __post_init__(self) -> None:
        self.membership = Membership(self.settings, new_member_id=self._member_id)
        self.offsets = Offsets(self.membership, self.offset_settings)

    def _member_id(self, prefix: str) -> str:
        self.ids += 1
        return f"{prefix}-{self.ids}"

    def apply(self, decisions: list[Decision]) -> list[Decision]:
        for d in decisions:
            if isinstance(d, Reply):
                assert d.request not in self.replies, f"request {d.request} answered twice"
                self.replies[d.request] = d.result
            elif isinstance(d, ArmTimer):
                self.timers[d.key] = self.now + d.delay_ms
            elif isinstance(d, CancelTimer):
                self.timers.pop(d.key, None)
            elif isinstance(d, Append):
                self.appends.append(d)
        return decisions

    def request(self) -> int:
        self.next_request += 1
        return self.next_request

    # -- events ------------------------------------------------------------------------

    def join(self, group: str, member: str = "", *, instance: str | None = None,
             require_known: bool = False, skip: bool = False, protocol_type: str = "consumer",
             protocols: list[tuple[str, bytes]] | None = None, session: int = 10_000,
             rebalance: int = 20_000) -> int:
        """Sends a JoinGroup; returns its request id (see ``replies``)."""
        request = self.request()
        self.apply(self.membership.join_group(
            self.now, request, group_id=group, member_id=member, group_instance_id=instance,
            require_known_member_id=require_known, support_skip_assignment=skip,
            client_id="client", client_host="/127.0.0.1", rebalance_timeout_ms=rebalance,
            session_timeout_ms=session, protocol_type=protocol_type,
            protocols=[("range", b"meta")] if protocols is None else protocols, reason=None))
        return request

    def sync(self, group: str, generation: int, member: str,
             assignments: dict[str, bytes] | None = None, *, instance: str | None = None,
             protocol_type: str | None = "consumer", protocol_name: str | None = "range") -> int:
        request = self.request()
        self.apply(self.membership.sync_group(
            self.now, request, group_id=group, generation_id=generation, member_id=member,
            group_instance_id=instance, protocol_type=protocol_type, protocol_name=protocol_name,
            assignments=assignments or {}))
        return request

    def heartbeat(self, group: str, generation: int, member: str,
                  instance: str | None = None) -> int:
        error, decisions = self.membership.heartbeat(
            self.now, group_id=group, member_id=member, group_instance_id=instance,
            generation_id=generation)
        self.apply(decisions)
        return error

    def leave(self, group: str, *members: tuple[str, str | None]) -> tuple[int, list]:
        error, results, decisions = self.membership.leave_group(
            self.now, group, [(m, i, None) for m, i in members])
        self.apply(decisions)
        return error, results

    def fire(self, key: TimerKey) -> None:
        """Fire one armed timer now (moving the clock to its deadline if later)."""
        deadline = self.timers.pop(key)
        self.now = max(self.now, deadline)
        self.apply(self.membership.on_timer(self.now, key))

    def advance(self, ms: int) -> None:
        """Move the clock; fire every timer that falls due, earliest first."""
        until = self.now + ms
        while True:
            due = [(deadline, str(key), key) for key, deadline in self.timers.items()
                   if deadline <= until]
            if not due:
                break
            _, _, key = min(due)
            self.fire(key)
        self.now = until

    def complete(self, error: int = ErrorCode.NONE, *, index: int = 0,
                 base_offset: int = 0) -> Append:
        """The pending append ``index`` becomes durable (or fails with ``error``)."""
        append = self.appends.pop(index)
        self.written.append(append)
        if isinstance(append.then, GroupWritten):
            self.apply(self.membership.on_group_written(self.now, append.then, error))
        else:
            self.apply(self.offsets.on_written(self.now, append.then, error, base_offset))
        return append

    def complete_all(self) -> None:
        while self.appends:
            self.complete()

    # -- looking -----------------------------------------------------------------------

    def reply(self, request: int) -> Any:
        return self.replies[request]

    def group(self, group_id: str) -> Group:
        return self.membership.groups[group_id]
