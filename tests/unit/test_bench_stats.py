"""The benchmark suite's statistics: medians with ranges, and when a ratio is only 'even'."""

from __future__ import annotations

import pytest

from benchmarks.baselines import BaselineResult
from benchmarks.runner import with_combined_baseline
from benchmarks.stats import Spread, compare, spread_text
from benchmarks.summary import summarize, versus
from benchmarks.window import Window
from benchmarks.workloads import WorkloadResult


def test_spread_is_median_min_max() -> None:
    s = Spread.of([5.0, 1.0, 3.0])
    assert (s.median, s.low, s.high, s.runs) == (3.0, 1.0, 5.0, 3)
    assert Spread.of([1.0, 2.0, 3.0, 10.0]).median == 2.5
    with pytest.raises(ValueError):
        Spread.of([])


def test_separated_ranges_give_a_verdict_in_the_right_direction() -> None:
    ours, theirs = Spread.of([10.0, 11.0, 12.0]), Spread.of([4.0, 5.0, 6.0])
    higher = compare(ours, theirs, higher_is_better=True)
    assert higher is not None and higher.verdict == "better" and higher.ratio == pytest.approx(2.2)
    # For a latency the same numbers mean ours is worse.
    lower = compare(ours, theirs, higher_is_better=False)
    assert lower is not None and lower.verdict == "worse"
    assert lower.ratio == pytest.approx(5 / 11, abs=1e-3)
    assert lower.text().endswith("worse")


def test_overlapping_ranges_are_even_however_large_the_ratio_of_medians() -> None:
    # Medians 3x apart, but one run of the peer reaches into ours: not a win.
    ours, theirs = Spread.of([9.0, 30.0, 31.0]), Spread.of([8.0, 10.0, 12.0])
    c = compare(ours, theirs, higher_is_better=True)
    assert c is not None and c.verdict == "even" and c.ratio == pytest.approx(3.0)
    assert c.text() == "even (3.00x)"
    # Touching ranges overlap too.
    touching = compare(Spread.of([5.0, 6.0, 7.0]), Spread.of([3.0, 4.0, 5.0]), True)
    assert touching is not None and touching.verdict == "even"


def test_fewer_than_three_runs_are_always_even() -> None:
    c = compare(Spread.of([100.0, 101.0]), Spread.of([1.0, 2.0]), higher_is_better=True)
    assert c is not None and c.verdict == "even"


def test_no_ratio_against_a_zero_median() -> None:
    assert compare(Spread.of([0.0, 0.0, 0.0]), Spread.of([1.0, 2.0, 3.0]), True) is None


def test_spread_text_shows_median_then_range() -> None:
    assert spread_text(Spread.of([1000.0, 2500.0, 1500.0]), unit="rec/s") == \
        "1,500 [1,000-2,500] rec/s"


def _run(target: str, rate: float, cpu: float) -> WorkloadResult:
    return WorkloadResult(
        workload="w", kind="produce", target=target, record_size=100, partitions=1,
        records_requested=1, records=1, bytes=100, seconds=5.0, records_per_s=rate,
        mb_per_s=rate / 1e4, capped=False, metrics={"server_cpu_share": cpu})


def test_summaries_group_runs_and_compare_through_the_noise_rule() -> None:
    runs = [_run("ours", r, 0.5) for r in (100.0, 110.0, 120.0)]
    runs += [_run("peer", r, 0.9) for r in (50.0, 60.0, 70.0)]
    runs += [_run("close", r, 0.9) for r in (90.0, 105.0, 130.0)]
    summaries = summarize(runs, {"ours": "ours", "peer": "peer", "close": "peer"})
    ours, peer, close = summaries
    assert ours.spread() == Spread(110.0, 100.0, 120.0, 3)
    assert ours.figures()["server_cpu_share"] == Spread(0.5, 0.5, 0.5, 3)
    assert versus(ours, ours) is None
    vs_peer = versus(peer, ours)
    assert vs_peer is not None and vs_peer.verdict == "better"
    vs_close = versus(close, ours)
    assert vs_close is not None and vs_close.verdict == "even"
    entry = peer.to_json(ours)
    assert entry["vs_ours"] == {"ratio": vs_peer.ratio, "verdict": "better"}


def test_combined_baseline_uses_medians_and_range_ends() -> None:
    loop = BaselineResult("loopback-tcp", 0, 0.0, 1000.0, "", [900.0, 1000.0, 1100.0],
                          900.0, 1100.0)
    append = BaselineResult("file-append", 0, 0.0, 1000.0, "", [500.0, 1000.0, 2000.0],
                            500.0, 2000.0)
    combined = with_combined_baseline([loop, append])[-1]
    assert combined.name == "append+loopback"
    assert combined.mb_per_s == 500.0
    assert combined.low == pytest.approx(1 / (1 / 900 + 1 / 500), abs=0.1)
    assert combined.high == pytest.approx(1 / (1 / 1100 + 1 / 2000), abs=0.1)


def test_window_measures_cpu_over_the_window_only() -> None:
    clock = iter([10.0, 12.5])  # server CPU seconds at begin() and at end()
    window = Window(lambda: next(clock))
    assert not window.closed and window.metrics() == {}
    with pytest.raises(RuntimeError):
        Window().end()
    window.begin()
    window.end()
    m = window.metrics()
    assert window.closed and m["server_cpu_s"] == 2.5
    assert window.seconds is not None and window.seconds > 0
    assert m["server_cpu_share"] == round(2.5 / window.seconds, 3)
