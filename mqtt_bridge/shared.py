"""Shared subscriptions (``$share/group/filter``) when a member leaves.

A message that matches a shared subscription goes to one online member of the group
(``SubscriptionIndex.match_copies``). When that member's connection ends, what it was given
through the shared subscription and not yet sent goes to another member instead of
being lost; when its session ends too (clean session / expiry 0), so does what it had
sent and not yet had acknowledged (MQTT 5 section 4.8.2: the server SHOULD send it to
another client of the shared subscription). A persistent member keeps its in-flight
messages, which go out again with DUP when it reconnects.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from .codec import topic_matches
from .codec.topics import split_shared

if TYPE_CHECKING:
    from .session import Delivery, OutMessage, Session
    from .subscriptions import SubscriptionIndex

log = logging.getLogger(__name__)


def hand_over(index: SubscriptionIndex, session: Session, *, ending: bool) -> list[Delivery]:
    """Give the leaving ``session``'s shared-subscription messages to other members.

    Call after the session went offline and before its queue is cleared. A message
    that also matches one of its non-shared subscriptions stays (it may have come
    through that one). Returns the deliveries that moved (the session drops them).
    """
    shared: list[tuple[str, str]] = []
    plain: list[str] = []
    for f in session.subs:
        group, flt = split_shared(f)
        if group is None:
            plain.append(f)
        else:
            shared.append((group, flt))
    if not shared:
        return []
    items: list[Delivery] = [*session.queue, *session.held]
    if ending:
        items += [d for d in session.inflight.values() if d[1]]
    moved: list[Delivery] = []
    touched: set[Session] = set()
    for item in items:
        msg, qos, retain = item
        topic = msg.topic
        if any(topic_matches(f, topic) for f in plain):
            continue
        for group, flt in shared:
            if not topic_matches(flt, topic):
                continue
            picked = index.pick_shared(group, flt, session)
            if picked is None:
                break
            other, opts = picked
            # the other member's copy of this shared subscription, with its identifier
            name = f"$share/{group}/{flt}"
            ids = [other.sub_ids[name]] if name in other.sub_ids else []
            other.enqueue(_impersonal(msg), min(qos, opts.qos), retain, ids)
            touched.add(other)
            moved.append(item)
            break
    for other in touched:
        other.pump()
    if moved:
        log.info("shared subscriptions of %s: %d messages handed to other members", session.client_id, len(moved))
    return moved


def _impersonal(msg: OutMessage) -> OutMessage:
    """The message without the leaving session's subscription identifiers."""
    props = msg.properties
    if not props or "subscription_identifier" not in props:
        return msg
    rest = {k: v for k, v in props.items() if k != "subscription_identifier"}
    out = type(msg)(msg.topic, msg.payload, rest or None, msg.tp, msg.offset)
    out.expires_at = msg.expires_at
    return out
