"""Limits kept per source address: failed-login backoff and new-connection rate.

Sans-I/O (the caller passes the monotonic time and sleeps or refuses itself), shared by
the Kafka listener's SASL and the MQTT bridge's CONNECT. Both tables are bounded: the
oldest address is forgotten first, so a flood of addresses costs bounded memory.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

MAX_SOURCES = 65_536


@dataclass
class _Failures:
    count: int
    next_at: float  # when this address's next login may be checked


class LoginBackoff:
    """Each failed login from an address doubles the wait before that address's next
    login is checked (``base_s``, ``2 * base_s``, ... up to ``cap_s``); a success clears
    it. Attempts in parallel are lined up one ``delay`` apart, so many connections from one
    address guess no faster than one. Other addresses are not affected."""

    def __init__(self, base_s: float, cap_s: float, max_sources: int = MAX_SOURCES) -> None:
        self.base_s = base_s
        self.cap_s = max(cap_s, base_s)
        self.max_sources = max_sources
        self._sources: OrderedDict[str, _Failures] = OrderedDict()
        self.failures_total = 0
        self.delayed_total = 0

    def _delay(self, failures: _Failures) -> float:
        return min(self.cap_s, self.base_s * (2 ** min(failures.count - 1, 62)))

    def wait(self, source: str, now: float) -> float:
        """Seconds to hold this attempt before checking it (0: check at once)."""
        failures = self._sources.get(source)
        if failures is None or self.base_s <= 0:
            return 0.0
        if now - failures.next_at > self.cap_s:  # quiet for longer than the cap: forgiven
            del self._sources[source]
            return 0.0
        at = max(now, failures.next_at)
        failures.next_at = at + self._delay(failures)
        if at > now:
            self.delayed_total += 1
        return at - now

    def failed(self, source: str, now: float) -> None:
        self.failures_total += 1
        failures = self._sources.pop(source, None) or _Failures(0, now)
        failures.count += 1
        failures.next_at = max(failures.next_at, now + self._delay(failures))
        self._sources[source] = failures
        while len(self._sources) > self.max_sources:
            self._sources.popitem(last=False)

    def succeeded(self, source: str) -> None:
        self._sources.pop(source, None)


class ConnectionRate:
    """A token bucket per source address: ``rate`` new connections a second, bursts of
    one second's worth; one address's burst leaves every other address's bucket full."""

    def __init__(self, rate: float, max_sources: int = MAX_SOURCES) -> None:
        self.rate = rate
        self.max_sources = max_sources
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tokens, at

    def take(self, source: str, now: float) -> bool:
        tokens, at = self._buckets.pop(source, (float(self.rate), now))
        tokens = min(float(self.rate), tokens + (now - at) * self.rate)
        allowed = tokens >= 1.0
        if allowed:
            tokens -= 1.0
        self._buckets[source] = (tokens, now)
        while len(self._buckets) > self.max_sources:
            self._buckets.popitem(last=False)
        return allowed
