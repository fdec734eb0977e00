"""Topic name and topic filter rules (MQTT 4.7): wildcards, levels, shared subscriptions."""

from __future__ import annotations


class TopicError(ValueError):
    """A topic name or filter that breaks the rules."""


def validate_topic(topic: str) -> None:
    """A PUBLISH topic name: non-empty, no wildcards."""
    if not topic:
        raise TopicError("empty topic name")
    if "+" in topic or "#" in topic:
        raise TopicError(f"wildcard in topic name {topic!r}")


def split_shared(topic_filter: str) -> tuple[str | None, str]:
    """``$share/group/filter`` -> (group, filter); other filters -> (None, filter)."""
    if not topic_filter.startswith("$share/"):
        return None, topic_filter
    parts = topic_filter.split("/", 2)
    if len(parts) < 3 or not parts[1] or "+" in parts[1] or "#" in parts[1] or not parts[2]:
        raise TopicError(f"bad shared subscription {topic_filter!r}")
    return parts[1], parts[2]


def validate_filter(topic_filter: str) -> None:
    """A SUBSCRIBE filter: ``#`` only as the whole last level, ``+`` only as a whole level."""
    if not topic_filter:
        raise TopicError("empty topic filter")
    _group, f = split_shared(topic_filter)
    levels = f.split("/")
    for i, level in enumerate(levels):
        if "#" in level and (level != "#" or i != len(levels) - 1):
            raise TopicError(f"'#' not alone at the end of {topic_filter!r}")
        if "+" in level and level != "+":
            raise TopicError(f"'+' not a whole level in {topic_filter!r}")


def topic_matches(topic_filter: str, topic: str) -> bool:
    """Does ``topic`` match ``topic_filter``? Wildcards do not match ``$``-topics at level 0."""
    if topic.startswith("$") and topic_filter[:1] in ("+", "#"):
        return False
    fl = topic_filter.split("/")
    tl = topic.split("/")
    for i, f in enumerate(fl):
        if f == "#":
            return True
        if i >= len(tl):
            return False
        if f != "+" and f != tl[i]:
            return False
    return len(fl) == len(tl)


def filters_overlap(a: str, b: str) -> bool:
    """Could some topic match both filters? (Used to find which log topics a session follows.)"""
    al = a.split("/")
    bl = b.split("/")
    for i in range(max(len(al), len(bl))):
        x = al[i] if i < len(al) else None
        y = bl[i] if i < len(bl) else None
        if x == "#" or y == "#":
            return True
        if x is None or y is None:
            return False
        if x != "+" and y != "+" and x != y:
            return False
    return True
