"""The checker: five properties over a fault run's history (``history.History``).

1. ``lost`` / ``duplicate``: every acknowledged record is in the final log at the offset
   it was acknowledged with (one acknowledged without an offset, in its partition); no
   value is stored twice (acknowledged or not), except a client's re-send under a new
   producer epoch (below).
2. ``order``: per partition, each producer's records are in the order it sent them (a
   client's re-send under a new epoch aside).
3. ``aborted-visible`` / ``partial-transaction``: read_committed shows no record of an
   aborted transaction, and every transaction all or nothing (a committed one all);
   the transactional group never shows an offset only an aborted transaction sent.
4. ``offset-backwards``: a group's committed offset, read again and again, never goes
   down, and never reads below a commit acknowledged before the read was asked.
5. ``stale-read``: a partition's end offset, asked of its leader, never lies at or below
   a record acknowledged before the question was asked.

A value stored twice by one producer under two producer epochs, the earlier copy never
acknowledged and the later one the only one acknowledged, is the client's re-send, not a
broker fault (``client_resends``; counted and shown, not a violation): librdkafka bumps an
idempotent producer's epoch when a batch after its first unacknowledged one is answered
OUT_OF_ORDER_SEQUENCE_NUMBER (a retry burst split by a leader change: the batches before
it refused, NOT_LEADER_OR_FOLLOWER or NOT_ENOUGH_REPLICAS, before any append) and re-sends
that first batch under the new epoch from sequence 0 although it had been answered
"possibly persisted" and was stored; Kafka deduplicates within one epoch only (KIP-360),
so no broker can recognise it (librdkafka issue #4953; the Java client retries there
without a bump). The same value twice under one epoch and sequence, or a copy
acknowledged before being stored again, stays a ``duplicate``: that is the broker's.

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
    resent = client_resends(h)
    for log in (h.log, h.committed_log):
        counts = Counter(v for records in log.values() for _, v in records)
        out += [Violation("duplicate", f"{v!r} stored {n} times") for v, n in counts.items()
                if n > 1 and not (log is h.log and v in resent)]
    return out


def client_resends(h: History) -> dict[bytes, list[tuple[int, int, tuple[int, int, int]]]]:
    """Values of ``h.log`` stored more than once that are a client's re-send under a new
    producer epoch (module docstring): value -> its copies as (partition, offset, (producer
    id, epoch, sequence)), in log order."""
    copies: dict[bytes, list[tuple[int, int]]] = defaultdict(list)
    for partition, records in h.log.items():
        for offset, value in records:
            copies[value].append((partition, offset))
    acked: dict[bytes, set[tuple[int, int | None]]] = defaultdict(set)
    for ack in h.acks:
        acked[ack.value].add((ack.partition, ack.offset))
    out = {}
    for value, where in copies.items():
        if len(where) < 2:
            continue
        where.sort()
        writers = [h.writers.get(p, {}).get(o) for p, o in where]
        if any(w is None for w in writers) or len({p for p, _ in where}) != 1:
            continue
        known = [w for w in writers if w is not None]
        ids = {w[0] for w in known}
        epochs = [w[1] for w in known]
        last = where[-1]
        if len(ids) != 1 or min(ids) < 0 or any(a >= b for a, b in zip(epochs, epochs[1:], strict=False)):
            continue
        if not acked[value] <= {last}:  # an earlier copy, or one without offset, acknowledged
            continue
        out[value] = [(p, o, w) for (p, o), w in zip(where, known, strict=True)]
    return out


def _order(h: History) -> list[Violation]:
    out = []
    resent = {(p, o) for copies in client_resends(h).values() for p, o, _ in copies[1:]}
    for partition, records in sorted(h.log.items()):
        last: dict[str, tuple[int, int]] = {}  # producer -> (seq, offset)
        previous_offset = -1
        for offset, value in records:
            if offset <= previous_offset:
                out.append(Violation("order", f"partition {partition}: offset {offset} read "
                                     f"after {previous_offset}"))
            previous_offset = offset
            if (partition, offset) in resent:  # the client's re-send: out of order by design
                continue
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
