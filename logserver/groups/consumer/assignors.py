"""Server-side assignors of the consumer group protocol (KIP-848): ``uniform`` and ``range``.

Pure functions from (members' subscriptions, partitions per topic, the previous target
assignment) to a new target assignment, so the coordinator is the only place that
decides who reads what. Both are deterministic (members and topics are visited in sorted
order), which makes a target assignment reproducible from the same inputs.

- ``uniform`` (Kafka's UniformAssignor): balanced and sticky. Every partition a member
  had in the previous target stays with it while the member still subscribes to the
  topic and keeps no more than its share; the rest go to the eligible member with the
  fewest partitions; then partitions move from the most to the least loaded eligible
  member until no move makes the spread smaller.
- ``range`` (Kafka's server-side RangeAssignor): per topic, the members subscribed to it
  in member id order each get a contiguous range; the first ``partitions % members``
  get one more.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping

TopicPartitions = dict[str, set[int]]
Assignment = dict[str, TopicPartitions]  # member id -> topic -> partitions
AssignorFn = Callable[[Mapping[str, frozenset[str]], Mapping[str, int], Mapping[str, TopicPartitions]],
                      Assignment]


def uniform(subscriptions: Mapping[str, frozenset[str]], partitions: Mapping[str, int],
            previous: Mapping[str, TopicPartitions]) -> Assignment:
    """``subscriptions``: member -> topics; ``partitions``: topic -> count (existing
    topics only); ``previous``: the last target assignment."""
    members = sorted(subscriptions)
    result: Assignment = {m: {} for m in members}
    load = dict.fromkeys(members, 0)
    eligible: dict[str, list[str]] = {}
    for topic in sorted(partitions):
        subscribers = [m for m in members if topic in subscriptions[m]]
        if subscribers:
            eligible[topic] = subscribers
    total = sum(partitions[t] for t in eligible)
    quota = -(-total // len(members)) if members else 0  # no member keeps more than this
    taken: set[tuple[str, int]] = set()
    # 1. stickiness: keep what the previous target gave, up to the quota
    for member in members:
        for topic in sorted(previous.get(member, {})):
            if topic not in eligible or member not in eligible[topic]:
                continue
            for partition in sorted(previous[member][topic]):
                tp = (topic, partition)
                if partition >= partitions[topic] or tp in taken or load[member] >= quota:
                    continue
                result[member].setdefault(topic, set()).add(partition)
                taken.add(tp)
                load[member] += 1
    # 2. the rest to the least loaded eligible member (a heap per topic; an entry whose
    #    load changed meanwhile, through another topic, is refreshed when it surfaces)
    for topic, subscribers in eligible.items():
        heap = [(load[m], m) for m in subscribers]
        heapq.heapify(heap)
        for partition in range(partitions[topic]):
            if (topic, partition) in taken:
                continue
            while True:
                seen, member = heapq.heappop(heap)
                if seen == load[member]:
                    break
                heapq.heappush(heap, (load[member], member))
            result[member].setdefault(topic, set()).add(partition)
            load[member] += 1
            heapq.heappush(heap, (load[member], member))
    # 3. balance: move one partition at a time from a member to an eligible one with at
    #    least two fewer, until none can move (subscriptions may differ per member)
    moved = True
    while moved and members:
        moved = False
        lowest = min(load.values())
        for giver in sorted(members, key=lambda m: (-load[m], m)):
            if load[giver] < lowest + 2:
                break  # the rest have even less: nobody can take from them
            for topic in sorted(result[giver]):
                receivers = [m for m in eligible[topic] if load[m] <= load[giver] - 2]
                if not receivers or not result[giver][topic]:
                    continue
                receiver = min(receivers, key=lambda m: (load[m], m))
                partition = max(result[giver][topic])
                result[giver][topic].discard(partition)
                result[receiver].setdefault(topic, set()).add(partition)
                load[giver] -= 1
                load[receiver] += 1
                moved = True
                break
            if moved:
                break
    return {m: {t: ps for t, ps in tps.items() if ps} for m, tps in result.items()}


def range_(subscriptions: Mapping[str, frozenset[str]], partitions: Mapping[str, int],
           previous: Mapping[str, TopicPartitions]) -> Assignment:
    """Contiguous ranges per topic (``previous`` is not needed: ranges are stable while
    the members and partition counts are)."""
    members = sorted(subscriptions)
    result: Assignment = {m: {} for m in members}
    for topic in sorted(partitions):
        subscribers = [m for m in members if topic in subscriptions[m]]
        if not subscribers:
            continue
        share, extra = divmod(partitions[topic], len(subscribers))
        start = 0
        for index, member in enumerate(subscribers):
            count = share + (1 if index < extra else 0)
            if count:
                result[member][topic] = set(range(start, start + count))
            start += count
    return result


ASSIGNORS: dict[str, AssignorFn] = {"uniform": uniform, "range": range_}
