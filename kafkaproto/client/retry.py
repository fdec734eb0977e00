"""Retry decisions, sans-I/O: whether to try again, after how long, with fresh metadata.

Kafka's clients retry an error when its exception is a RetriableException (our
``kafkaproto.errors.RETRY`` table), back off exponentially from ``retry.backoff.ms`` up to
``retry.backoff.max.ms`` with jitter (the project's one :class:`Backoff`), and give up
``delivery.timeout.ms`` after the first attempt.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from ..errors import is_retriable, needs_metadata_refresh
from .backoff import Backoff
from .errors import KafkaError

__all__ = ["RetryDecision", "RetryPolicy"]


class RetryDecision(NamedTuple):
    retry: bool
    delay_s: float = 0.0
    refresh_metadata: bool = False


GIVE_UP = RetryDecision(False)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    backoff: Backoff = field(default_factory=Backoff)  # retry.backoff.ms, retry.backoff.max.ms
    timeout_s: float | None = None  # delivery.timeout.ms; None: retry for ever

    def delay_s(self, failures: int) -> float:
        """The wait after the ``failures``-th failure in a row (1, 2, ...)."""
        return self.backoff.delay_s(failures)

    def decide(self, error: BaseException | int, failures: int,
               elapsed_s: float = 0.0) -> RetryDecision:
        """What to do after ``failures`` failures in a row, ``elapsed_s`` after the first try.

        ``error`` is a Kafka error code or an exception (a :class:`KafkaError` carries a
        code; a broken connection is retriable; anything else is not).
        """
        if isinstance(error, int):
            code = error
        elif isinstance(error, KafkaError):
            code = error.code
        else:
            return GIVE_UP
        if not is_retriable(code):
            return GIVE_UP
        if self.timeout_s is not None and elapsed_s >= self.timeout_s:
            return GIVE_UP
        return RetryDecision(True, self.delay_s(failures), needs_metadata_refresh(code))
