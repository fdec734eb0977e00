"""The targets of issue 7, each judged PASS/FAIL on the medians measured in the same run.

A target whose figures are missing (a peer not installed, a workload that failed) is
reported as not judged, never as a pass. A target set against a peer's figure passes
unless ours is worse by the noise rule of ``stats.compare`` (ranges that do not
overlap); a fixed bar is judged on the median, and the detail says when the range of
the runs straddles it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from .stats import Spread, compare, spread_text
from .summary import Summary, summarize

if TYPE_CHECKING:
    from .runner import RunResult


@dataclass
class Check:
    """One target: the figure, the bar it must clear, and whether it did."""

    name: str
    workload: str
    value: float | None
    threshold: float | None
    unit: str
    passed: bool | None  # None: not judged (a figure was missing)
    detail: str = ""

    @property
    def verdict(self) -> str:
        return "n/a" if self.passed is None else ("PASS" if self.passed else "FAIL")

    def to_json(self) -> dict[str, object]:
        """The JSON form written to the result file."""
        return {**asdict(self), "verdict": self.verdict}


def _find(summaries: list[Summary], workload: str, target: str | None = None) -> Summary | None:
    for s in summaries:
        if s.workload == workload and (s.target == target if target else s.role == "ours"):
            return s
    return None


def _baseline(result: RunResult, name: str) -> float | None:
    for b in result.baselines:
        if b.name == name and b.mb_per_s > 0:
            return b.mb_per_s
    return None


def _range(s: Spread | None, bar: float | None, digits: int = 0) -> str:
    if s is None:
        return ""
    text = f"runs {spread_text(s, digits)}"
    if bar is not None and s.low < bar <= s.high or bar is not None and s.low <= bar < s.high:
        text += " (the range straddles the bar)"
    return text


def _at_least(name: str, workload: str, s: Spread | None, bar: float | None, unit: str,
              detail: str) -> Check:
    value = None if s is None else s.median
    passed = None if value is None or bar is None else value >= bar
    return Check(name, workload, value, None if bar is None else round(bar, 3), unit, passed,
                 "; ".join(x for x in (detail, _range(s, bar)) if x))


def _below(name: str, workload: str, s: Spread | None, bar: float, unit: str,
           detail: str) -> Check:
    value = None if s is None else s.median
    passed = None if value is None else value < bar
    return Check(name, workload, value, bar, unit, passed,
                 "; ".join(x for x in (detail, _range(s, bar, 2)) if x))


def _versus_peer(name: str, workload: str, ours: Summary | None, peer: Summary | None,
                 unit: str, detail: str) -> Check:
    mine = ours.spread() if ours else None
    theirs = peer.spread() if peer else None
    if mine is None or theirs is None or peer is None:
        return Check(name, workload, mine.median if mine else None,
                     theirs.median if theirs else None, unit, None, detail)
    vs = compare(mine, theirs, peer.higher_is_better)
    passed = vs is not None and vs.verdict != "worse"
    said = f"ours {spread_text(mine)} vs {peer.target} {spread_text(theirs)}: "
    said += vs.text() if vs else "no ratio"
    return Check(name, workload, mine.median, theirs.median, unit, passed, f"{detail}; {said}")


def evaluate(result: RunResult) -> list[Check]:
    """Every target of issue 7 against this run's medians."""
    summaries = summarize(result.workloads, result.roles())
    checks: list[Check] = []
    p1k = "produce-1KiB-p1-acks1"
    checks.append(_versus_peer(
        "produce 1 KiB: records/s >= Tansu's", p1k, _find(summaries, p1k),
        _find(summaries, p1k, "tansu"), "records/s",
        "same client, same settings, same run; Tansu keeps records in memory"))
    combined = _baseline(result, "append+loopback")
    raw_produce = _find(summaries, "produce-raw-1KiB")
    checks.append(_at_least(
        "produce 1 KiB: MB/s >= 50% of append+loopback", "produce-raw-1KiB",
        raw_produce.spread("mb_per_s") if raw_produce else None,
        combined * 0.5 if combined else None, "MB/s",
        "append+loopback = 1/(1/loopback + 1/append), medians of this run; judged on "
        "ready-made 1 MB batches (produce-raw-1KiB)"))
    raw = _find(summaries, "catchup-raw")
    loop = _baseline(result, "loopback-tcp")
    sendfile = _baseline(result, "sendfile-loopback")
    raw_mb = raw.spread("mb_per_s") if raw else None
    extra = (f"; {raw_mb.median / sendfile:.0%} of sendfile-loopback ({sendfile:,.0f} MB/s)"
             if raw_mb and sendfile else "")
    checks.append(_at_least(
        "catch-up consume: MB/s >= 70% of loopback", "catchup-raw", raw_mb,
        loop * 0.7 if loop else None, "MB/s",
        "Fetch requests of 64 MiB, records untouched by the client" + extra))
    p100 = _find(summaries, "produce-100B-p1-acks1")
    checks.append(_at_least(
        "100 B through librdkafka: produce >= 300k records/s", "produce-100B-p1-acks1",
        p100.spread() if p100 else None, 300_000, "records/s", "one producer, acks=1"))
    f100 = _find(summaries, "fetch-100B")
    checks.append(_at_least(
        "100 B through librdkafka: consume >= 500k records/s", "fetch-100B",
        f100.spread() if f100 else None, 500_000, "records/s", "one consumer, catch-up"))
    e2e = _find(summaries, "e2e-latency-10k")
    wait = e2e.spread("fetch_wait_max_ms") if e2e else None
    checks.append(_below(
        "end-to-end p99 < 5 ms at 10k records/s", "e2e-latency-10k",
        e2e.spread("p99_ms") if e2e else None, 5.0, "ms",
        f"consumer fetch.wait.max.ms {wait.median:,.0f}" if wait else ""))
    checks.append(_versus_peer(
        "MQTT QoS 1 persisted-and-acked msgs/s >= mosquitto's", "mqtt-publish-qos1",
        _find(summaries, "mqtt-publish-qos1", "bridge"),
        _find(summaries, "mqtt-publish-qos1", "mosquitto"), "msgs/s",
        "bridge PUBACKs after the log's acks=all; mosquitto persists nothing"))
    for workload, qos_text in (("mqtt-publish-qos1", "QoS 1 persisted-and-acked"),
                               ("mqtt-publish-qos0", "QoS 0")):
        for peer, how in (("mosquitto-persist", "mosquitto saves its database every 1 s"),
                          ("mosquitto", "mosquitto persists nothing")):
            if workload == "mqtt-publish-qos1" and peer == "mosquitto":
                continue  # the check above
            ours_s = _find(summaries, workload, "bridge")
            peer_s = _find(summaries, workload, peer)
            if ours_s is None and peer_s is None:
                continue  # not run (e.g. --quick)
            checks.append(_versus_peer(
                f"MQTT {qos_text} msgs/s >= {peer}'s", workload, ours_s, peer_s, "msgs/s",
                "QoS 0 counted at PINGRESP after each burst of 20; " + how
                if workload.endswith("qos0") else "bridge PUBACKs after the log's acks=all; " + how))
    fan = _find(summaries, "mqtt-fanout-10000", "bridge")
    failed = fan.spread("notices_failed") if fan else None
    lost = f"{failed.high:,.0f} notices never reached every device in the worst run" if (
        failed and failed.high > 0) else ""
    check = _below(
        "fan-out to 10,000 devices < 1 s (slowest notice)", "mqtt-fanout-10000",
        fan.spread("all_max_ms") if fan else None, 1000.0, "ms", lost)
    if failed and failed.high > 0:
        check.passed = False
    checks.append(check)
    checks.append(_below(
        "10,000 connected idle devices: bridge RSS < 100 MB", "mqtt-fanout-10000",
        fan.spread("rss_mb") if fan else None, 100.0, "MB",
        "measured with every device connected and subscribed, before the first notice"))
    return checks
