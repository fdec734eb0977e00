"""Who may publish and subscribe to what: the default identity binding, or an ACL file.

Default (no ACL file): a device is bound to its identity. Its device id is its client id;
when it authenticated (password or certificate), the client id must equal its identity
(the username, or the certificate's CN), or it gets no device topics at all. A device may
publish under ``devices/{its id}/...`` and subscribe to exactly the topics the downlink
delivers to it (its own command topic and the broadcast topics, e.g. ``ota``).

ACL file (mosquitto's format): ``user NAME`` starts a user's section; ``topic [read|write|
readwrite|deny] FILTER`` grants (or denies) access for that user, or, before the first
``user`` line, for anonymous clients; ``pattern [...] FILTER`` applies to every client,
with ``%c`` the client id and ``%u`` the username. Deny entries win over grants. A
subscription is granted only when every topic its filter can match is readable (the
filter lies within a read entry and overlaps no deny entry), so messages need no second
check on delivery.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from .codec.topics import filters_overlap, topic_matches

log = logging.getLogger(__name__)

READ, WRITE = 1, 2
_ACCESS = {"read": READ, "write": WRITE, "readwrite": READ | WRITE, "deny": 0}


@dataclass(frozen=True, slots=True)
class Identity:
    """A connected client as the authorizer sees it."""

    client_id: str
    username: str | None = None  # the authenticated name (password user or certificate CN)

    @property
    def device_id(self) -> str | None:
        """The id whose ``devices/{id}/...`` topics this client owns, if any."""
        cid = self.client_id
        if not cid or any(c in cid for c in "/+#"):
            return None
        if self.username is not None and cid != self.username:
            return None
        return cid


class Authorizer(Protocol):
    def may_publish(self, who: Identity, topic: str) -> bool: ...

    def may_subscribe(self, who: Identity, topic_filter: str) -> bool: ...


def filter_within(topic_filter: str, acl: str) -> bool:
    """Does every topic that ``topic_filter`` matches also match ``acl``?"""
    f = topic_filter.split("/")
    a = acl.split("/")
    for i, want in enumerate(a):
        if want == "#":
            return True
        if i >= len(f):
            return False
        got = f[i]
        if want == "+":
            if got == "#":
                return False
            continue
        if got in ("+", "#") or got != want:
            return False
    return len(f) == len(a)


def strip_share(topic_filter: str) -> str:
    """``$share/GROUP/FILTER`` -> ``FILTER`` (access is about the topics, not the group)."""
    if topic_filter.startswith("$share/"):
        parts = topic_filter.split("/", 2)
        return parts[2] if len(parts) == 3 else ""
    return topic_filter


class IdentityBinding:
    """The default policy: devices confined to their own topics and the downlink."""

    def __init__(self, downlink_templates: list[str]) -> None:
        # templates use {key} for the device id (``devices/{key}/commands``) or none (``ota``)
        self.broadcast = frozenset(t for t in downlink_templates if "{key}" not in t)
        self.keyed = [t for t in downlink_templates if "{key}" in t]

    def may_publish(self, who: Identity, topic: str) -> bool:
        dev = who.device_id
        return dev is not None and topic.startswith(f"devices/{dev}/")

    def may_subscribe(self, who: Identity, topic_filter: str) -> bool:
        topic_filter = strip_share(topic_filter)
        if topic_filter in self.broadcast:
            return True
        dev = who.device_id
        return dev is not None and any(t.replace("{key}", dev) == topic_filter for t in self.keyed)


@dataclass
class _Entries:
    grants: list[tuple[str, int]] = field(default_factory=list)
    denies: list[str] = field(default_factory=list)


class AclFile:
    """Access lists in mosquitto's ``acl_file`` format."""

    def __init__(self, anonymous: _Entries, users: dict[str, _Entries], patterns: _Entries) -> None:
        self.anonymous = anonymous
        self.users = users
        self.patterns = patterns

    @classmethod
    def load(cls, path: str | Path) -> AclFile:
        return cls.parse(Path(path).read_text(), str(path))

    @classmethod
    def parse(cls, text: str, source: str = "acl") -> AclFile:
        anonymous, patterns = _Entries(), _Entries()
        users: dict[str, _Entries] = {}
        current = anonymous
        for n, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            word, _, rest = line.partition(" ")
            rest = rest.strip()
            if word == "user":
                if not rest:
                    raise ValueError(f"{source}:{n}: 'user' needs a name")
                current = users.setdefault(rest, _Entries())
                continue
            if word not in ("topic", "pattern"):
                raise ValueError(f"{source}:{n}: expected user, topic or pattern, got {word!r}")
            first, _, after = rest.partition(" ")
            if first in _ACCESS and after.strip():
                access, topic = _ACCESS[first], after.strip()
            else:
                access, topic = READ | WRITE, rest
            if not topic:
                raise ValueError(f"{source}:{n}: {word} needs a topic")
            target = patterns if word == "pattern" else current
            if access == 0:
                target.denies.append(topic)
            else:
                target.grants.append((topic, access))
        acl = cls(anonymous, users, patterns)
        log.info("loaded ACLs from %s: %d users, %d patterns", source, len(users),
                 len(patterns.grants) + len(patterns.denies))
        return acl

    def _rules(self, who: Identity) -> tuple[list[tuple[str, int]], list[str]]:
        own = self.anonymous if who.username is None else self.users.get(who.username, _Entries())
        grants, denies = list(own.grants), list(own.denies)
        for template, access in self.patterns.grants:
            t = _substitute(template, who)
            if t is not None:
                grants.append((t, access))
        for template in self.patterns.denies:
            t = _substitute(template, who)
            # a deny pattern that cannot be filled in still denies: with a wildcard in its place
            denies.append(t if t is not None else template.replace("%c", "+").replace("%u", "+"))
        return grants, denies

    def may_publish(self, who: Identity, topic: str) -> bool:
        grants, denies = self._rules(who)
        if any(topic_matches(d, topic) for d in denies):
            return False
        return any(access & WRITE and topic_matches(t, topic) for t, access in grants)

    def may_subscribe(self, who: Identity, topic_filter: str) -> bool:
        topic_filter = strip_share(topic_filter)
        if not topic_filter:
            return False
        grants, denies = self._rules(who)
        if any(filters_overlap(d, topic_filter) for d in denies):
            return False
        return any(access & READ and filter_within(topic_filter, t) for t, access in grants)


def _substitute(template: str, who: Identity) -> str | None:
    """Fill ``%c``/``%u`` in; None if a value is missing or would act as a wildcard."""
    out = template
    for mark, value in (("%c", who.client_id), ("%u", who.username)):
        if mark in out:
            if not value or any(c in value for c in "/+#"):
                return None
            out = out.replace(mark, value)
    return out
