"""Subscription index (a topic trie with ``+``/``#``/``$share``) and the retained store."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

from .codec import SubOptions, topic_matches
from .codec.topics import split_shared


class _Node:
    __slots__ = ("children", "subs", "shared", "names")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.subs: dict[Any, SubOptions] = {}
        self.shared: dict[str, dict[Any, SubOptions]] = {}
        #: group -> the shared filter as subscribed (``$share/group/filter``)
        self.names: dict[str, str] = {}


#: one copy a shared subscription gives: (session, its options, ``$share/group/filter``)
SharedCopy = tuple[Any, SubOptions, str]


class SubscriptionIndex:
    """Which sessions want a topic. Sessions are any hashable objects with ``online``."""

    def __init__(self) -> None:
        self.root = _Node()
        self.count = 0
        self._rr = 0
        self._picks: list[SharedCopy] = []  # scratch of match_copies

    def add(self, session: Any, topic_filter: str, opts: SubOptions) -> bool:
        """Add or replace; True if it was new."""
        group, f = split_shared(topic_filter)
        node = self.root
        for level in f.split("/"):
            node = node.children.setdefault(level, _Node())
        if group is None:
            target = node.subs
        else:
            target = node.shared.setdefault(group, {})
            node.names[group] = topic_filter
        new = session not in target
        target[session] = opts
        self.count += new
        return new

    def remove(self, session: Any, topic_filter: str) -> bool:
        group, f = split_shared(topic_filter)
        path = [self.root]
        for level in f.split("/"):
            nxt = path[-1].children.get(level)
            if nxt is None:
                return False
            path.append(nxt)
        node = path[-1]
        if group is None:
            found = node.subs.pop(session, None) is not None
        else:
            members = node.shared.get(group, {})
            found = members.pop(session, None) is not None
            if not members:
                node.shared.pop(group, None)
                node.names.pop(group, None)
        self.count -= found
        # prune empty nodes
        levels = f.split("/")
        for i in range(len(levels), 0, -1):
            n = path[i]
            if n.children or n.subs or n.shared:
                break
            del path[i - 1].children[levels[i - 1]]
        return found

    def match(self, topic: str) -> dict[Any, SubOptions]:
        """Every session that gets ``topic`` (at least once), with the options of one of
        its matching subscriptions; for delivery use :meth:`match_copies`."""
        out, shared = self.match_copies(topic)
        for session, opts, _name in shared:
            out.setdefault(session, opts)
        return out

    def match_copies(self, topic: str) -> tuple[dict[Any, SubOptions], Sequence[SharedCopy]]:
        """(each session whose non-shared subscriptions match ``topic``, with their
        strongest options; the copies shared subscriptions give).

        Overlapping non-shared subscriptions of a session give one copy at their highest
        QoS (MQTT 5 3.3.4). A shared group gives one copy to one online member, round
        robin, and that copy is the member's own (MQTT 5 4.8.2), with that subscription's
        identifier: it is listed in the second item, with the shared filter, also when
        the member has no non-shared match. Without shared subscriptions on the way that
        item is an empty tuple, no per-message work.
        """
        out: dict[Any, SubOptions] = {}
        levels = topic.split("/")
        dollar = topic.startswith("$")
        self._walk(self.root, levels, 0, out, dollar)
        picks = self._picks
        if not picks:
            return out, ()
        self._picks = []
        return out, picks

    def _walk(self, node: _Node, levels: list[str], i: int, out: dict[Any, SubOptions], dollar: bool) -> None:
        wild_ok = not (dollar and i == 0)
        if wild_ok:
            h = node.children.get("#")
            if h is not None:
                self._collect(h, out)
        if i == len(levels):
            self._collect(node, out)
            return
        child = node.children.get(levels[i])
        if child is not None:
            self._walk(child, levels, i + 1, out, dollar)
        if wild_ok:
            plus = node.children.get("+")
            if plus is not None:
                self._walk(plus, levels, i + 1, out, dollar)

    def pick_shared(self, group: str, topic_filter: str, exclude: Any) -> tuple[Any, SubOptions] | None:
        """Another online member of shared subscription ``$share/group/topic_filter``
        (round robin), or None; for messages a leaving member will not get."""
        node = self.root
        for level in topic_filter.split("/"):
            nxt = node.children.get(level)
            if nxt is None:
                return None
            node = nxt
        online = [(s, o) for s, o in node.shared.get(group, {}).items() if s.online and s is not exclude]
        if not online:
            return None
        self._rr += 1
        return online[self._rr % len(online)]

    def _collect(self, node: _Node, out: dict[Any, SubOptions]) -> None:
        for s, o in node.subs.items():
            prev = out.get(s)
            if prev is None or o.qos > prev.qos:
                out[s] = o
        for group, members in node.shared.items():
            online = [(s, o) for s, o in members.items() if s.online]
            if online:
                self._rr += 1
                s, o = online[self._rr % len(online)]
                self._picks.append((s, o, node.names[group]))  # a copy of its own


class RetainedStore:
    """Last retained message per topic, bounded in count and bytes (0 = no bound).

    Size of one message = its topic's and its payload's bytes; ``fits`` tells whether a
    message may be stored (a replacement counts only its growth), ``set`` refuses what does
    not fit and returns False so the caller can count and log the refusal. Each message
    keeps the QoS it was published with: a subscriber gets the lower of it and its own.
    """

    def __init__(self, max_messages: int = 0, max_bytes: int = 0) -> None:
        self.messages: dict[str, Any] = {}
        self.sizes: dict[str, int] = {}
        self.qos: dict[str, int] = {}  # only those below 2
        self.bytes = 0
        self.max_messages = max_messages
        self.max_bytes = max_bytes

    @staticmethod
    def size_of(topic: str, payload: bytes) -> int:
        return len(topic.encode()) + len(payload)

    def fits(self, topic: str, payload: bytes) -> bool:
        old = self.sizes.get(topic)
        count = len(self.messages) + (old is None)
        total = self.bytes - (old or 0) + self.size_of(topic, payload)
        return ((not self.max_messages or count <= self.max_messages)
                and (not self.max_bytes or total <= self.max_bytes))

    def set(self, topic: str, message: Any, qos: int = 2) -> bool:
        if message is None:
            self._remove(topic)
            return True
        payload = getattr(message, "payload", b"")
        if not self.fits(topic, payload):
            return False
        self._remove(topic)
        size = self.size_of(topic, payload)
        self.messages[topic] = message
        self.sizes[topic] = size
        self.bytes += size
        if qos < 2:
            self.qos[topic] = qos
        return True

    def _remove(self, topic: str) -> None:
        if self.messages.pop(topic, None) is not None:
            self.bytes -= self.sizes.pop(topic, 0)
            self.qos.pop(topic, None)

    def matching(self, topic_filter: str) -> Iterator[tuple[Any, int]]:
        """(message, the QoS it was published with) for each retained topic the filter matches."""
        _group, f = split_shared(topic_filter)
        now = time.time()
        for topic, msg in list(self.messages.items()):
            if topic_matches(f, topic):
                expires_at = getattr(msg, "expires_at", None)
                if expires_at is not None and expires_at <= now:
                    self._remove(topic)  # a retained message ends with its expiry
                    continue
                yield msg, self.qos.get(topic, 2)
