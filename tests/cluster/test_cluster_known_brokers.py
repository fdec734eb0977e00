"""Which brokers a Metadata answer names (logserver/cluster/known_brokers.py), sans I/O:
a model fed as the etcd watch feeds it, and a clock the test moves."""

from __future__ import annotations

from logserver.cluster.known_brokers import KnownBrokers
from logserver.cluster.model import BrokerInfo, ClusterModel, Keys, PartitionState

GRACE_S = 3.0


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _cluster(*states: PartitionState) -> tuple[Keys, ClusterModel, KnownBrokers, Clock]:
    keys = Keys("/c")
    model = ClusterModel(keys)
    for node in (1, 2, 3):
        model.apply(keys.broker(node), _info(node).encode(), node)
    for index, state in enumerate(states):
        model.apply(keys.partition("t", index), state.encode(), 10 + index)
    clock = Clock()
    known = KnownBrokers(GRACE_S, clock)
    known.observe(model)
    return keys, model, known, clock


def _info(node: int) -> BrokerInfo:
    return BrokerInfo(node, "127.0.0.1", 9000 + node)


def _leave(keys: Keys, model: ClusterModel, known: KnownBrokers, *nodes: int) -> None:
    for node in nodes:
        model.apply(keys.broker(node), None, model.revision + 1)
        known.observe(model)


def test_every_session_lost_at_once_keeps_every_broker_named_for_a_session():
    keys, model, known, clock = _cluster(PartitionState((1, 2, 3), 1, 0, (1, 2, 3)))
    _leave(keys, model, known, 1, 2, 3)
    assert model.brokers == {}
    # No controller has moved anything yet: all three named, 1 also as the leader.
    assert sorted(known.listed(model, _info(2))) == [1, 2, 3]
    clock.now += GRACE_S - 0.1
    model.apply(keys.broker(2), _info(2).encode(), model.revision + 1)  # registers again
    known.observe(model)
    assert sorted(known.listed(model, _info(2))) == [1, 2, 3]
    # A session later, 3 (in sync, leading nothing) is dropped; 1 still leads.
    clock.now += 0.2
    assert sorted(known.listed(model, _info(2))) == [1, 2]
    # The controller moved the leadership: 1 goes too.
    model.apply(keys.partition("t", 0), PartitionState((1, 2, 3), 2, 1, (2,), 1).encode(),
                model.revision + 1)
    assert sorted(known.listed(model, _info(2))) == [2]


def test_the_answering_broker_always_names_itself():
    keys, model, known, _ = _cluster()
    _leave(keys, model, known, 1, 2, 3)  # held nothing: dropped at once, but not oneself
    assert sorted(known.listed(model, _info(3))) == [3]


def test_a_broker_that_left_cleanly_is_dropped_at_once():
    # Controlled shutdown: 3 moved its leadership and left every ISR before its
    # registration went.
    keys, model, known, _ = _cluster(PartitionState((3, 1, 2), 1, 1, (1, 2), 1))
    _leave(keys, model, known, 3)
    assert sorted(known.listed(model, _info(1))) == [1, 2]


def test_a_broker_registering_again_is_named_with_its_new_address():
    keys, model, known, _ = _cluster(PartitionState((1, 2, 3), 1, 0, (1, 2, 3)))
    _leave(keys, model, known, 1)
    moved = BrokerInfo(1, "127.0.0.1", 9999)
    model.apply(keys.broker(1), moved.encode(), model.revision + 1)
    known.observe(model)
    assert known.listed(model, _info(2))[1] == moved


def test_one_broker_dying_is_no_hiccup():
    """kill -9 of one of three: named while the controller has not moved its leadership,
    then dropped at once (clients must not keep dialling a dead address for a session)."""
    keys, model, known, _ = _cluster(PartitionState((3, 1, 2), 3, 0, (1, 2, 3)),
                                     PartitionState((1, 2, 3), 1, 0, (1, 2, 3)))
    _leave(keys, model, known, 3)
    assert sorted(known.listed(model, _info(1))) == [1, 2, 3]  # still the leader of t-0
    model.apply(keys.partition("t", 0), PartitionState((3, 1, 2), 1, 1, (1, 2), 1).encode(),
                model.revision + 1)
    assert sorted(known.listed(model, _info(1))) == [1, 2]
