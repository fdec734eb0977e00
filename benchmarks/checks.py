"""The targets of issue 7, each judged PASS/FAIL from figures measured in the same run.

A target whose figures are missing (a peer not installed, a workload that failed) is
reported as not judged, never as a pass.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .runner import RunResult
    from .workloads import WorkloadResult


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


def _find(result: RunResult, workload: str, role: str = "ours",
          target: str | None = None) -> WorkloadResult | None:
    roles = result.roles()
    for w in result.workloads:
        if w.workload != workload:
            continue
        if target is not None and w.target == target:
            return w
        if target is None and roles.get(w.target) == role:
            return w
    return None


def _baseline(result: RunResult, name: str) -> float | None:
    for b in result.baselines:
        if b.name == name and b.mb_per_s > 0:
            return b.mb_per_s
    return None


def _at_least(name: str, workload: str, value: float | None, bar: float | None, unit: str,
              detail: str) -> Check:
    passed = None if value is None or bar is None else value >= bar
    return Check(name, workload, value, None if bar is None else round(bar, 3), unit, passed,
                 detail)


def _below(name: str, workload: str, value: float | None, bar: float, unit: str,
           detail: str) -> Check:
    passed = None if value is None else value < bar
    return Check(name, workload, value, bar, unit, passed, detail)


def evaluate(result: RunResult) -> list[Check]:
    """Every target of issue 7 against this run's figures."""
    checks: list[Check] = []
    p1k = "produce-1KiB-p1-acks1"
    ours = _find(result, p1k)
    tansu = _find(result, p1k, target="tansu")
    checks.append(_at_least(
        "produce 1 KiB: records/s >= Tansu's", p1k,
        ours.records_per_s if ours else None, tansu.records_per_s if tansu else None,
        "records/s", "same client, same settings, same run; Tansu keeps records in memory"))
    combined = _baseline(result, "append+loopback")
    raw_produce = _find(result, "produce-raw-1KiB")
    server_path = raw_produce or ours
    checks.append(_at_least(
        "produce 1 KiB: MB/s >= 50% of append+loopback", server_path.workload
        if server_path else p1k, server_path.mb_per_s if server_path else None,
        combined * 0.5 if combined else None, "MB/s",
        "append+loopback = 1/(1/loopback + 1/append), this run; judged on ready-made 1 MB "
        "batches (produce-raw-1KiB)" + (f"; through librdkafka {ours.mb_per_s:,.0f} MB/s, "
        "client-bound" if ours and raw_produce else "")))
    raw = _find(result, "catchup-raw")
    loop = _baseline(result, "loopback-tcp")
    sendfile = _baseline(result, "sendfile-loopback")
    extra = (f"; {raw.mb_per_s / sendfile:.0%} of sendfile-loopback ({sendfile:,.0f} MB/s)"
             if raw and sendfile else "")
    checks.append(_at_least(
        "catch-up consume: MB/s >= 70% of loopback", "catchup-raw",
        raw.mb_per_s if raw else None, loop * 0.7 if loop else None, "MB/s",
        "Fetch requests of 64 MiB, records untouched by the client" + extra))
    p100 = _find(result, "produce-100B-p1-acks1")
    checks.append(_at_least(
        "100 B through librdkafka: produce >= 300k records/s", "produce-100B-p1-acks1",
        p100.records_per_s if p100 else None, 300_000, "records/s", "one producer, acks=1"))
    f100 = _find(result, "fetch-100B")
    checks.append(_at_least(
        "100 B through librdkafka: consume >= 500k records/s", "fetch-100B",
        f100.records_per_s if f100 else None, 500_000, "records/s", "one consumer, catch-up"))
    e2e = _find(result, "e2e-latency-10k")
    checks.append(_below(
        "end-to-end p99 < 5 ms at 10k records/s", "e2e-latency-10k",
        e2e.metrics.get("p99_ms") if e2e else None, 5.0, "ms",
        f"p50 {e2e.metrics.get('p50_ms')} ms, p999 {e2e.metrics.get('p999_ms')} ms" if e2e else ""))
    pub = _find(result, "mqtt-publish-qos1", target="bridge")
    mosq = _find(result, "mqtt-publish-qos1", target="mosquitto")
    checks.append(_at_least(
        "MQTT QoS 1 persisted-and-acked msgs/s >= mosquitto's", "mqtt-publish-qos1",
        pub.records_per_s if pub else None, mosq.records_per_s if mosq else None, "msgs/s",
        "bridge PUBACKs after the log's acks=all; mosquitto persists nothing"))
    fan = _find(result, "mqtt-fanout-10000", target="bridge")
    checks.append(_below(
        "fan-out to 10,000 devices < 1 s (slowest notice)", "mqtt-fanout-10000",
        fan.metrics.get("all_max_ms") if fan else None, 1000.0, "ms",
        f"median {fan.metrics.get('all_p50_ms')} ms; bridge RSS {fan.metrics.get('rss_mb')} MB"
        if fan else ""))
    return checks
