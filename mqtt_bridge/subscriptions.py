"""Subscription index (a topic trie with ``+``/``#``/``$share``) and the retained store."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from .codec import SubOptions, topic_matches
from .codec.topics import split_shared


class _Node:
    __slots__ = ("children", "subs", "shared")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.subs: dict[Any, SubOptions] = {}
        self.shared: dict[str, dict[Any, SubOptions]] = {}


class SubscriptionIndex:
    """Which sessions want a topic. Sessions are any hashable objects with ``online``."""

    def __init__(self) -> None:
        self.root = _Node()
        self.count = 0
        self._rr = 0

    def add(self, session: Any, topic_filter: str, opts: SubOptions) -> bool:
        """Add or replace; True if it was new."""
        group, f = split_shared(topic_filter)
        node = self.root
        for level in f.split("/"):
            node = node.children.setdefault(level, _Node())
        target = node.subs if group is None else node.shared.setdefault(group, {})
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
        """Every session that gets ``topic``, with its strongest matching options.

        A shared group delivers to one online member, round robin.
        """
        out: dict[Any, SubOptions] = {}
        levels = topic.split("/")
        dollar = topic.startswith("$")
        self._walk(self.root, levels, 0, out, dollar)
        return out

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

    def _collect(self, node: _Node, out: dict[Any, SubOptions]) -> None:
        for s, o in node.subs.items():
            prev = out.get(s)
            if prev is None or o.qos > prev.qos:
                out[s] = o
        for members in node.shared.values():
            online = [(s, o) for s, o in members.items() if s.online]
            if online:
                self._rr += 1
                s, o = online[self._rr % len(online)]
                prev = out.get(s)
                if prev is None or o.qos > prev.qos:
                    out[s] = o


class RetainedStore:
    """Last retained message per topic (in memory; see the README for durability)."""

    def __init__(self) -> None:
        self.messages: dict[str, Any] = {}

    def set(self, topic: str, message: Any) -> None:
        if message is None:
            self.messages.pop(topic, None)
        else:
            self.messages[topic] = message

    def matching(self, topic_filter: str) -> Iterator[Any]:
        _group, f = split_shared(topic_filter)
        now = time.time()
        for topic, msg in list(self.messages.items()):
            if topic_matches(f, topic):
                expires_at = getattr(msg, "expires_at", None)
                if expires_at is not None and expires_at <= now:
                    del self.messages[topic]  # a retained message ends with its expiry
                    continue
                yield msg
