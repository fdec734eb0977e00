"""Kafka's consumer protocol bytes and range assignor (logserver/admin_cli), checked
against an independent implementation: kafka-python's. Sans-I/O, no sockets."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logserver.admin_cli.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    range_assign,
)

metadata = pytest.importorskip("kafka.protocol.consumer.metadata")
Subscription = metadata.ConsumerProtocolSubscription
KpAssignment = metadata.ConsumerProtocolAssignment
from kafka.coordinator.assignors.range import RangePartitionAssignor  # noqa: E402

topics = st.lists(st.text("abcxyz._-", min_size=1, max_size=8), unique=True, max_size=5)


@given(topics)
def test_subscription_both_ways(names: list[str]) -> None:
    assert Subscription.decode(encode_subscription(names)).topics == names
    for version in (0, 1, 2, 3):  # later versions append fields a v0 reader skips
        theirs = Subscription(version=version, topics=names, user_data=b"u",
                              owned_partitions=[], generation_id=4, rack_id=None)
        assert decode_subscription(theirs.encode(version=version)) == names


@given(st.dictionaries(st.text("abc", min_size=1, max_size=5),
                       st.lists(st.integers(0, 1000), unique=True, max_size=6), max_size=4))
def test_assignment_both_ways(assignment: dict[str, list[int]]) -> None:
    theirs = KpAssignment.decode(encode_assignment(assignment))
    assert {t.topic: t.partitions for t in theirs.assigned_partitions} == assignment
    for version in (0, 1, 2, 3):
        encoded = KpAssignment(version=version, assigned_partitions=sorted(assignment.items()),
                               user_data=b"").encode(version=version)
        assert decode_assignment(encoded) == assignment


@given(st.dictionaries(st.text("mn0123", min_size=1, max_size=6),
                       st.lists(st.sampled_from(["t0", "t1", "t2"]), unique=True, min_size=1),
                       min_size=1, max_size=6),
       st.fixed_dictionaries({"t0": st.integers(1, 9), "t1": st.integers(1, 9),
                              "t2": st.integers(1, 9)}))
def test_range_assignor_matches_kafkas(members: dict[str, list[str]], counts: dict[str, int]) -> None:
    cluster = SimpleNamespace(partitions_for_topic=lambda t: set(range(counts[t])))
    kp_members = [SimpleNamespace(member_id=m, group_instance_id=None,
                                  metadata=Subscription(version=0, topics=ts, user_data=b""))
                  for m, ts in members.items()]
    theirs = RangePartitionAssignor.assign(cluster, kp_members)
    # Kafka lists a topic with no partition for a member; ours leaves it out.
    expected = {m: {topic: list(ps) for topic, ps in a.assigned_partitions if ps}
                for m, a in theirs.items()}
    assert range_assign(members, counts) == expected
