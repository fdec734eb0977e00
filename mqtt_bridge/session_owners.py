"""Which bridge holds each persistent session, told by headers on the session topic.

Several bridges in front of one log share the session topic. A bridge that accepts a
client id first writes a *claim* record; the bridge that held the session sees it,
closes its connection (MQTT "session taken over"), and writes a *release* record with
the session's final state, which the claimant waits for (up to a timeout, for a holder
that died). The newest claim in log order wins, so two bridges claiming one client id
at once agree on the winner. Sans-I/O: records in, verdicts out.

Headers: ``mqtt.bridge`` = the writer, ``mqtt.holder`` = who holds the session after
this record (absent: nobody), ``mqtt.claim`` / ``mqtt.release`` = the claim's nonce,
``mqtt.clean`` = ``1`` on the claim of a connection with Clean Start (the session ends).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from kafkaproto.records import Header

ORIGIN = "mqtt.bridge"
HOLDER = "mqtt.holder"
CLAIM = "mqtt.claim"
RELEASE = "mqtt.release"
CLEAN = "mqtt.clean"


@dataclass(frozen=True)
class Marker:
    """What a session record says about ownership."""

    origin: str | None = None
    holder: str | None = None
    claim: str | None = None
    release: str | None = None
    clean: bool = False

    @classmethod
    def of(cls, headers: Sequence[Header]) -> Marker:
        found: dict[str, str] = {}
        for name, value in headers:
            if name in (ORIGIN, HOLDER, CLAIM, RELEASE, CLEAN) and value is not None:
                found[name] = value.decode("utf-8", "replace")
        return cls(found.get(ORIGIN), found.get(HOLDER), found.get(CLAIM), found.get(RELEASE),
                   found.get(CLEAN) == "1")

    def headers(self) -> list[Header]:
        out: list[Header] = []
        for name, value in ((ORIGIN, self.origin), (HOLDER, self.holder), (CLAIM, self.claim),
                            (RELEASE, self.release)):
            if value is not None:
                out.append((name, value.encode()))
        if self.clean:
            out.append((CLEAN, b"1"))
        return out


class Verdict(enum.Enum):
    IGNORE = "ignore"  # our own record, an older claim, or a late write of a former holder
    APPLY = "apply"  # another bridge's state: update the local copy
    TAKEN = "taken"  # another bridge claimed a session: whoever holds it must give it up


@dataclass(slots=True)
class _Owner:
    holder: str | None
    claim_offset: int = -1  # offset of the newest claim seen for the client id


class SessionOwners:
    """Holder per client id, from the records of the session topic in log order."""

    def __init__(self, me: str) -> None:
        self.me = me
        self._owners: dict[str, _Owner] = {}
        self._seen: dict[str, int] = {}  # newest offset applied per client id

    def holder(self, client_id: str) -> str | None:
        o = self._owners.get(client_id)
        return o.holder if o is not None else None

    def held_elsewhere(self, client_id: str) -> bool:
        h = self.holder(client_id)
        return h is not None and h != self.me

    def observe(self, client_id: str, m: Marker, offset: int) -> Verdict:
        """One record of the session topic (each offset once; replays are ignored)."""
        if self._seen.get(client_id, -1) >= offset:
            return Verdict.IGNORE
        self._seen[client_id] = offset
        owner = self._owners.setdefault(client_id, _Owner(None))
        if m.claim is not None:
            if owner.claim_offset > offset:
                return Verdict.IGNORE  # a newer claim already won
            owner.claim_offset = offset
            owner.holder = m.origin
            return Verdict.IGNORE if m.origin == self.me else Verdict.TAKEN
        if m.origin == self.me:
            return Verdict.IGNORE
        if owner.holder is None or m.origin == owner.holder:
            owner.holder = m.holder  # the holder saves, or gives the session up
            return Verdict.APPLY
        if m.holder == owner.holder:
            return Verdict.APPLY  # a former holder's final state, handed to the holder
        # A late write of a former holder, or its release to a claim that a newer claim
        # has beaten since: neither may make that claimant the holder again.
        return Verdict.IGNORE

    def claimed(self, client_id: str, offset: int) -> bool:
        """Our claim was written at ``offset``; False if a newer claim already won."""
        self._seen[client_id] = max(self._seen.get(client_id, -1), offset)
        owner = self._owners.setdefault(client_id, _Owner(None))
        if owner.claim_offset > offset:
            return False
        owner.claim_offset = offset
        owner.holder = self.me
        return True

    def released(self, client_id: str, holder: str | None) -> None:
        """We gave the session up to ``holder`` (None: to nobody, e.g. at shutdown)."""
        owner = self._owners.get(client_id)
        if owner is not None and owner.holder == self.me:
            owner.holder = holder

    def claim_marker(self, nonce: str, *, clean: bool = False) -> Marker:
        return Marker(origin=self.me, holder=self.me, claim=nonce, clean=clean)

    def save_marker(self, *, release: str | None = None, to: str | None = None) -> Marker:
        if release is None:
            return Marker(origin=self.me, holder=self.me)
        return Marker(origin=self.me, holder=to, release=release)
