"""Consumer groups rebuilt from ``__consumer_offsets`` at start-up.

The classic replay (``groups/loading.py``) hands every record of a consumer group type
(3, 5-8) to ``ConsumerReplay``: the last value per key wins and a tombstone deletes, so
the groups come back as they were last persisted, epochs and assignments included.
Their members must heartbeat again within their session timeout (armed at adoption);
partitions are mapped back from topic ids, and those of topics gone since are dropped.
"""

from __future__ import annotations

import logging
from typing import Any

from logserver.groups.consumer import records as rec
from logserver.groups.consumer.machine import TopicCatalog
from logserver.groups.consumer.model import ConsumerGroup, Member, MemberState, Partitions

log = logging.getLogger(__name__)


class ConsumerReplay:
    def __init__(self) -> None:
        self.values: dict[bytes, tuple[rec.ParsedKey, bytes]] = {}

    def apply(self, key: bytes, value: bytes | None) -> bool:
        """True if the record was a consumer group's (raises ``RecordFormatError``)."""
        parsed = rec.parse_key(key)
        if parsed is None:
            return False
        if value is None:
            self.values.pop(key, None)
        else:
            rec.parse_value(parsed.record_type, value)  # unreadable: refused here
            self.values[key] = (parsed, value)
        return True

    def restore(self, now_ms: int, catalog: TopicCatalog) -> list[ConsumerGroup]:
        groups: dict[str, ConsumerGroup] = {}
        members: dict[tuple[str, str], dict[int, Any]] = {}
        for key, raw in self.values.values():
            value: Any = rec.parse_value(key.record_type, raw)
            if key.member_id is None:
                group = groups.get(key.group_id)
                if group is None:
                    group = groups[key.group_id] = ConsumerGroup(key.group_id, now_ms)
                if key.record_type == rec.GROUP_METADATA:
                    group.group_epoch = value.epoch
                    group.restored_metadata_hash = value.metadata_hash
                else:
                    group.assignment_epoch = value.assignment_epoch
            else:
                members.setdefault((key.group_id, key.member_id), {})[key.record_type] = value

        def names(tps: list[Any]) -> Partitions:
            out: Partitions = {}
            for tp in tps:
                topic = catalog.topic_for_id(bytes(tp.topic_id))
                if topic is not None and tp.partitions:
                    out.setdefault(topic, set()).update(tp.partitions)
            return out

        for (group_id, member_id), values in members.items():
            group = groups.get(group_id)
            meta = values.get(rec.MEMBER_METADATA)
            if group is None or meta is None:
                continue  # a member of a deleted group, or half a member
            member = Member(member_id, instance_id=meta.instance_id, rack_id=meta.rack_id,
                            client_id=meta.client_id, client_host=meta.client_host,
                            rebalance_timeout_ms=meta.rebalance_timeout_ms,
                            subscribed_names=tuple(meta.subscribed_topic_names),
                            subscribed_regex=meta.subscribed_topic_regex,
                            server_assignor=meta.server_assignor)
            current = values.get(rec.CURRENT_MEMBER)
            if current is not None:
                member.epoch = current.member_epoch
                member.previous_epoch = current.previous_member_epoch
                member.state = MemberState.from_code(current.state)
                member.assigned = names(current.assigned_partitions)
                member.revoking = names(current.partitions_pending_revocation)
            group.add(member)
            target = values.get(rec.TARGET_MEMBER)
            if target is not None:
                group.target[member_id] = names(target.topic_partitions)
        for group in groups.values():
            group.persisted = {k: raw for k, (key, raw) in self.values.items()
                               if key.group_id == group.group_id}
        return list(groups.values())

    def live_records(self) -> int:
        return len(self.values)
