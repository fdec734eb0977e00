"""The one backoff policy of every retry loop (kafkaproto.client.Backoff), without sockets:
Kafka's retry.backoff.ms doubling up to retry.backoff.max.ms, jitter inside the cap."""

from __future__ import annotations

import random

import pytest

from kafkaproto.client import Backoff, Failures, KafkaConnectionError, RetryPolicy
from kafkaproto.errors import ErrorCode


def _lowest(lo: float, hi: float) -> float:
    return lo


def _highest(lo: float, hi: float) -> float:
    return hi


def test_doubles_from_retry_backoff_ms_up_to_the_max() -> None:
    policy = Backoff(100, 1000, jitter=0.0)
    assert [policy.delay_ms(n) for n in range(1, 7)] == [100, 200, 400, 800, 1000, 1000]
    assert policy.delay_s(2) == 0.2


def test_no_wait_before_the_first_failure() -> None:
    assert Backoff(100, 1000).delay_ms(0) == 0.0
    assert Backoff(100, 1000).delay_ms(-3) == 0.0


def test_jitter_spreads_each_wait_by_a_fifth_and_the_cap_still_holds() -> None:
    policy = Backoff(100, 1000)  # Kafka's default jitter: 0.2
    assert [policy.delay_ms(n, _lowest) for n in (1, 2, 3)] == pytest.approx([80, 160, 320])
    assert [policy.delay_ms(n, _highest) for n in (1, 2, 3)] == pytest.approx([120, 240, 480])
    # At the cap the term is the cap itself (as Kafka's ExponentialBackoff): jitter can
    # lower it, never raise it above retry.backoff.max.ms.
    assert policy.delay_ms(10, _lowest) == pytest.approx(800)
    assert policy.delay_ms(10, _highest) == 1000


def test_real_jitter_varies_within_its_bounds() -> None:
    policy = Backoff(100, 1000)
    draws = [policy.delay_ms(2, random.Random(seed).uniform) for seed in range(200)]
    assert all(160 <= d <= 240 for d in draws)
    assert len(set(draws)) > 150  # clients failing together do not come back together


def test_a_max_below_the_base_means_no_growth() -> None:
    policy = Backoff(500, 100, jitter=0.0)
    assert [policy.delay_ms(n) for n in (1, 2, 5)] == [500, 500, 500]


def test_many_failures_in_a_row_do_not_overflow() -> None:
    assert Backoff(100, 1000, jitter=0.0).delay_ms(100_000) == 1000


def test_seconds_constructor_and_bad_settings() -> None:
    assert Backoff.seconds(0.05, 1.0) == Backoff(50, 1000)
    with pytest.raises(ValueError):
        Backoff(-1, 1000)
    with pytest.raises(ValueError):
        Backoff(100, 1000, jitter=1.0)


def test_failures_count_in_a_row_and_start_over_on_success() -> None:
    failures = Failures(Backoff(100, 1000, jitter=0.0))
    assert [failures.failed() for _ in range(5)] == [0.1, 0.2, 0.4, 0.8, 1.0]
    assert failures.count == 5
    failures.succeeded()
    assert failures.count == 0
    assert failures.failed() == 0.1


def test_retry_policy_backs_off_with_it() -> None:
    policy = RetryPolicy(Backoff(100, 1000, jitter=0.0), timeout_s=5.0)
    decision = policy.decide(ErrorCode.NOT_LEADER_OR_FOLLOWER, 3, 1.0)
    assert decision.retry and decision.delay_s == 0.4 and decision.refresh_metadata
    assert policy.decide(KafkaConnectionError("gone"), 9).delay_s == 1.0
    assert RetryPolicy().backoff == Backoff(100, 1000)  # Kafka's defaults


def test_a_connection_error_is_retriable_and_an_oserror() -> None:
    exc = KafkaConnectionError("broker gone")
    assert isinstance(exc, ConnectionError) and exc.retriable
    assert exc.code == ErrorCode.NETWORK_EXCEPTION
