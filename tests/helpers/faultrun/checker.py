"""The checker: five properties over a fault run's history (``history.History``).

1. ``lost`` / ``duplicate``: every acknowledged record is in the final log at the offset
   it was acknowledged with (one acknowledged without an offset, in its partition); no
   value is stored twice (acknowledged or not).
2. ``order``: per partition, each producer's records are in the order it sent them.
3. ``aborted-visible`` / ``partial-transaction``: read_committed shows no record of an
   aborted transaction, and every transaction all or nothing (a committed one all);
   the transactional group never shows an offset only an aborted transaction sent.
4. ``offset-backwards``: a group's committed offset, read again and again, never goes
   down, and never reads below a commit acknowledged before the read was asked.
5. ``stale-read``: a partition's end offset, asked of its leader, never lies at or below
   a record acknowledged before the question was asked.

Pure: no clients, no clock; tests/unit/test_faultrun_checker.py feeds it bad histories.
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from dataclasses import dataclass

from .history import ABORTED, COMMITTED, UNKNOWN, History, parse_plain, parse_txn

PROPERTIES = ("lost", "duplicate", "order", "aborted-visible", "partial-transaction",
              "offset-backwards", "stale-read")


@dataclass(frozen=True)
class Violation:
    prop: str
    detail: str

    def __str__(self) -> str:
        return f"{self.prop}: {self.detail}"


def check(history: History) -> list[Violation]:
    """Every violation found (empty: the run kept all five properties)."""
    return [*_lost_and_duplicates(history), *_order(history), *_transactions(history),
            *_offsets(history), *_stale_reads(history)]


def _lost_and_duplicates(h: History) -> list[Violation]:
    out = []
    at = {(p, o): v for p, records in h.log.items() for o, v in records}
    values = {(p, v) for p, records in h.log.items() for _, v in records}
    for ack in h.acks:
        if ack.offset is None:  # acknowledged without one (history.Ack)
            if (ack.partition, ack.value) not in values:
                out.append(Violation("lost", f"{ack.value!r} acknowledged in partition "
                                     f"{ack.partition} (offset unknown), not in its log"))
            continue
        found = at.get((ack.partition, ack.offset))
        if found != ack.value:
            out.append(Violation("lost", f"{ack.value!r} acknowledged at {ack.partition}@"
                                 f"{ack.offset}, the log has {found!r} there"))
    for log in (h.log, h.committed_log):
        counts = Counter(v for records in log.values() for _, v in records)
        out += [Violation("duplicate", f"{v!r} stored {n} times") for v, n in counts.items() if n > 1]
    return out


def _order(h: History) -> list[Violation]:
    out = []
    for partition, records in sorted(h.log.items()):
        last: dict[str, tuple[int, int]] = {}  # producer -> (seq, offset)
        previous_offset = -1
        for offset, value in records:
            if offset <= previous_offset:
                out.append(Violation("order", f"partition {partition}: offset {offset} read "
                                     f"after {previous_offset}"))
            previous_offset = offset
            producer, seq = parse_plain(value)
            if producer in last and seq <= last[producer][0]:
                out.append(Violation("order", f"partition {partition}: {value!r} at {offset} "
                                     f"after seq {last[producer][0]} at {last[producer][1]}"))
            last[producer] = (seq, offset)
    return out


def _transactions(h: History) -> list[Violation]:
    out = []
    outcome = {t.number: t for t in h.txns}
    seen: dict[int, set[int]] = defaultdict(set)
    for partition, records in h.committed_log.items():
        for _, value in records:
            number, part = parse_txn(value)
            if part != partition:
                out.append(Violation("partial-transaction", f"{value!r} read in partition {partition}"))
            seen[number].add(part)
    for number, parts in sorted(seen.items()):
        txn = outcome.get(number)
        if txn is not None and txn.outcome == ABORTED:
            out.append(Violation("aborted-visible", f"transaction {number} aborted, "
                                 f"read_committed shows its records in {sorted(parts)}"))
        elif txn is not None and parts != set(txn.partitions):
            out.append(Violation("partial-transaction", f"transaction {number} ({txn.outcome}): "
                                 f"read_committed shows {sorted(parts)} of {list(txn.partitions)}"))
    for txn in h.txns:
        if txn.outcome == COMMITTED and txn.number not in seen:
            out.append(Violation("partial-transaction", f"transaction {txn.number} committed, "
                                 "read_committed shows none of its records"))
    # The transactional group's offsets come only from transactions: one that only an
    # aborted transaction sent was made visible by an abort.
    allowed = {t.sent_offset for t in h.txns if t.outcome in (COMMITTED, UNKNOWN)}
    aborted = {t.sent_offset for t in h.txns if t.outcome == ABORTED}
    for read in h.offset_reads:
        if read.group == h.txn_group and read.offset in aborted - allowed:
            out.append(Violation("aborted-visible", f"group {read.group} partition "
                                 f"{read.partition} committed offset {read.offset}, sent only "
                                 f"by an aborted transaction (read at {read.start:.3f})"))
    return out


def _offsets(h: History) -> list[Violation]:
    out = []
    commits: dict[tuple[str, int], list[tuple[float, int]]] = defaultdict(list)
    for c in h.commits:
        commits[(c.group, c.partition)].append((c.at, c.offset))
    highest: dict[tuple[str, int], tuple[list[float], list[int]]] = {}
    for key, acked in commits.items():
        acked.sort()
        times, running, best = [], [], -1
        for at, offset in acked:
            best = max(best, offset)
            times.append(at)
            running.append(best)
        highest[key] = (times, running)
    reads: dict[tuple[str, int], list] = defaultdict(list)
    for r in h.offset_reads:
        reads[(r.group, r.partition)].append(r)
    for key, rs in sorted(reads.items()):
        rs.sort(key=lambda r: r.start)
        for before, after in zip(rs, rs[1:], strict=False):
            if after.offset < before.offset:
                out.append(Violation("offset-backwards", f"group {key[0]} partition {key[1]}: "
                                     f"committed offset read {before.offset} at "
                                     f"{before.start:.3f}, then {after.offset} at {after.start:.3f}"))
        times, running = highest.get(key, ([], []))
        for r in rs:
            i = bisect.bisect_left(times, r.start)  # commits acknowledged before the read
            if i and r.offset < running[i - 1]:
                out.append(Violation("offset-backwards", f"group {key[0]} partition {key[1]}: "
                                     f"read {r.offset} at {r.start:.3f} after a commit of "
                                     f"{running[i - 1]} was acknowledged"))
    return out


def _stale_reads(h: History) -> list[Violation]:
    out = []
    acked: dict[int, tuple[list[float], list[int]]] = {}
    by_partition: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for a in h.acks:
        if a.offset is not None:
            by_partition[a.partition].append((a.at, a.offset))
    for partition, pairs in by_partition.items():
        pairs.sort()
        times, running, best = [], [], -1
        for at, offset in pairs:
            best = max(best, offset)
            times.append(at)
            running.append(best)
        acked[partition] = (times, running)
    for r in h.end_reads:
        times, running = acked.get(r.partition, ([], []))
        i = bisect.bisect_left(times, r.start)
        if i and r.end_offset <= running[i - 1]:
            out.append(Violation("stale-read", f"partition {r.partition}: end offset "
                                 f"{r.end_offset} read at {r.start:.3f}, offset "
                                 f"{running[i - 1]} was acknowledged before"))
    return out


def summary(violations: list[Violation]) -> dict[str, int]:
    """Violations per property, every property named (0 where none)."""
    counts = Counter(v.prop for v in violations)
    return {prop: counts.get(prop, 0) for prop in PROPERTIES}
