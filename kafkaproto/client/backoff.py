"""The one backoff policy of every retry loop in the project, sans-I/O.

Kafka's clients wait ``retry.backoff.ms`` after a first failure, twice that after a
second, and so on up to ``retry.backoff.max.ms`` (KIP-580), each wait spread by a
random factor in [1 - jitter, 1 + jitter] (jitter 0.2) so that many clients failing
together do not all come back in the same instant. As in Kafka's ExponentialBackoff the
doubling stops at the cap and the cap also holds after the jitter.
The same shape serves ``reconnect.backoff.ms`` / ``reconnect.backoff.max.ms``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Backoff", "Failures"]

#: Kafka's CommonClientConfigs.RETRY_BACKOFF_JITTER.
JITTER = 0.2


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff with jitter and a cap, in Kafka's terms (milliseconds)."""

    retry_backoff_ms: float = 100.0  # retry.backoff.ms
    retry_backoff_max_ms: float = 1000.0  # retry.backoff.max.ms
    jitter: float = JITTER  # 0: exactly retry.backoff.ms * 2 ** (failures - 1), capped

    def __post_init__(self) -> None:
        if self.retry_backoff_ms < 0 or self.retry_backoff_max_ms < 0:
            raise ValueError("backoffs must not be negative")
        if not 0.0 <= self.jitter < 1.0:
            raise ValueError(f"jitter {self.jitter} outside [0, 1)")

    def delay_ms(self, failures: int, uniform: Callable[[float, float], float] = random.uniform
                 ) -> float:
        """The wait after the ``failures``-th failure in a row (1, 2, ...); 0 before any.

        A max below the base is treated as the base, as Kafka does (no growth at all).
        """
        if failures <= 0:
            return 0.0
        base = self.retry_backoff_ms
        cap = max(self.retry_backoff_max_ms, base)
        # As Kafka, the exponent stops growing at the cap (and 2.0 ** 64 cannot overflow).
        term = min(base * 2.0 ** min(failures - 1, 64), cap)
        if self.jitter:
            term *= uniform(1.0 - self.jitter, 1.0 + self.jitter)
        return min(term, cap)

    def delay_s(self, failures: int, uniform: Callable[[float, float], float] = random.uniform
                ) -> float:
        """:meth:`delay_ms` in seconds, for ``asyncio.sleep`` and ``time.sleep``."""
        return self.delay_ms(failures, uniform) / 1000.0

    @classmethod
    def seconds(cls, first_s: float, max_s: float, jitter: float = JITTER) -> Backoff:
        """The policy from seconds (the unit the project's loops sleep in)."""
        return cls(first_s * 1000.0, max_s * 1000.0, jitter)


class Failures:
    """Failures in a row under one :class:`Backoff`: the state of one retry loop.

    ``failed()`` counts a failure and returns the seconds to wait before the next try;
    ``succeeded()`` starts over at the first backoff.
    """

    __slots__ = ("policy", "count")

    def __init__(self, policy: Backoff) -> None:
        self.policy = policy
        self.count = 0

    def failed(self) -> float:
        self.count += 1
        return self.policy.delay_s(self.count)

    def succeeded(self) -> None:
        self.count = 0
