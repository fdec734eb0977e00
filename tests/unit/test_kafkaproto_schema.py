"""Generated classes: names, slots, Kafka defaults, nesting, and the declaration DSL itself."""

from __future__ import annotations

import pytest

from kafkaproto import API_SPECS, ApiKey, ErrorCode, Message
from kafkaproto import messages as m
from kafkaproto.schema import F, VersionRange, snake_case, struct
from kafkaproto.spec import api


def test_all_messages_exported_by_kafka_name() -> None:
    for spec in API_SPECS.values():
        assert getattr(m, f"{spec.name}Request") is spec.request
        assert getattr(m, f"{spec.name}Response") is spec.response
        assert spec.request.API_KEY == spec.api_key == ApiKey[snake_case(spec.name).upper()]
        assert spec.request.IS_REQUEST and not spec.response.IS_REQUEST


def test_nested_structs_flattened_onto_message() -> None:
    assert m.ProduceResponse.TopicProduceResponse.__name__ == "TopicProduceResponse"
    assert m.ProduceResponse.PartitionProduceResponse.__name__ == "PartitionProduceResponse"
    assert m.FetchResponse.PartitionData.__name__ == "PartitionData"
    assert m.FetchResponse.LeaderIdAndEpoch.__name__ == "LeaderIdAndEpoch"
    assert m.MetadataResponse.MetadataResponseTopic.__name__ == "MetadataResponseTopic"
    assert m.MetadataResponse.MetadataResponsePartition.__name__ == "MetadataResponsePartition"
    # same struct name on request and response: distinct classes
    assert m.FetchRequest.FetchTopic is not getattr(m.FetchResponse, "FetchTopic", None)


def test_slots_eq_repr() -> None:
    a = m.ProduceResponse.PartitionProduceResponse(index=1, error_code=3)
    b = m.ProduceResponse.PartitionProduceResponse(index=1, error_code=3)
    assert a == b and a != m.ProduceResponse.PartitionProduceResponse(index=2)
    assert not hasattr(a, "__dict__")
    with pytest.raises(AttributeError):
        a.not_a_field = 1  # type: ignore[attr-defined]
    assert repr(a).startswith("PartitionProduceResponse(index=1, error_code=3, base_offset=0")
    with pytest.raises(TypeError):
        m.ProduceResponse(1)  # type: ignore[misc]  # keyword-only


def test_kafka_defaults() -> None:
    r = m.FetchRequest()
    assert (r.replica_id, r.max_bytes, r.isolation_level, r.session_epoch) == (
        -1,
        0x7FFFFFFF,
        0,
        -1,
    )
    assert r.cluster_id is None and r.rack_id == "" and r.topics == []
    assert m.MetadataRequest().allow_auto_topic_creation is True
    assert m.MetadataRequest().topics == []  # nullable array without "null" default: empty
    md = m.MetadataResponse()
    assert md.cluster_id is None and md.controller_id == -1
    assert m.MetadataResponse.MetadataResponseTopic().topic_id == bytes(16)
    assert m.MetadataResponse.MetadataResponseTopic().topic_authorized_operations == -(2**31)
    p = m.FetchResponse.PartitionData()
    assert p.records is None and p.aborted_transactions == [] and p.preferred_read_replica == -1
    assert p.current_leader == m.FetchResponse.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
    assert m.ProduceRequest().transactional_id is None
    assert m.ListOffsetsRequest.ListOffsetsPartition().max_num_offsets == 1
    assert m.CreateTopicsRequest().timeout_ms == 60000
    assert m.InitProducerIdResponse().producer_id == -1
    # mutable defaults are per instance
    x, y = m.FetchRequest(), m.FetchRequest()
    x.topics.append(1)
    assert y.topics == []
    p2 = m.FetchResponse.PartitionData()
    p2.current_leader.leader_id = 5
    assert m.FetchResponse.PartitionData().current_leader.leader_id == -1


def test_fields_absent_from_version_are_ignored_and_default_on_decode() -> None:
    r = m.ProduceRequest(transactional_id="tx", acks=1)
    back = m.ProduceRequest.decode(r.encode(2), 2)  # v2 has no transactional_id
    assert back.transactional_id is None and back.acks == 1


def test_error_codes_and_api_keys() -> None:
    assert ErrorCode.UNKNOWN_SERVER_ERROR == -1 and ErrorCode.NONE == 0
    assert ErrorCode.CORRUPT_MESSAGE == 2 and ErrorCode.NOT_LEADER_OR_FOLLOWER == 6
    assert ErrorCode.UNSUPPORTED_VERSION == 35 and ErrorCode.FETCH_SESSION_ID_NOT_FOUND == 70
    assert ErrorCode.TRANSACTION_ABORTABLE == 120
    assert {e.value for e in ErrorCode} >= set(range(-1, 121))
    assert ApiKey.PRODUCE == 0 and ApiKey.API_VERSIONS == 18 and ApiKey.CREATE_TOPICS == 19
    assert ApiKey.DESCRIBE_TOPIC_PARTITIONS == 75
    assert {k.value for k in ApiKey} >= set(range(0, 81))


def test_version_range_parsing() -> None:
    assert VersionRange.parse("3+") == VersionRange(3, 0x7FFF)
    assert VersionRange.parse("0-12") == VersionRange(0, 12)
    assert VersionRange.parse("7") == VersionRange(7, 7)
    assert VersionRange.parse("none").empty and VersionRange.parse(None).empty
    assert 5 in VersionRange.parse("3+") and 2 not in VersionRange.parse("3+")
    assert (
        snake_case("ThrottleTimeMs") == "throttle_time_ms"
        and snake_case("timeoutMs") == "timeout_ms"
    )


def test_common_structs_and_nullable_struct() -> None:
    spec = api(
        9000,
        "Synthetic",
        "0-2",
        flexible="2+",
        request=(
            F("Leader", "LeaderInfo", "0+"),
            F("Leaders", "[]LeaderInfo", "1+"),
            F(
                "Maybe",
                "Extra",
                "0+",
                F("X", "int32", "0+", default=7),
                nullable="1+",
                default=None,
            ),
            F("Ids", "[]uuid", "0+"),
            F("Flag", "bool", "2+", default=True, tag=0),
            F("Ratio", "float64", "0+"),
            F("Small", "uint16", "0+"),
        ),
        response=(F("Leader", "LeaderInfo", "2+", tag=0),),
        common=(
            struct("LeaderInfo", F("Id", "int32", "0+", default=-1), F("Name", "string", "0+")),
        ),
    )
    req_cls = spec.request
    info = req_cls.LeaderInfo
    assert info().id == -1
    assert req_cls().maybe is None
    obj = req_cls(
        leader=info(id=3, name="a"),
        leaders=[info(id=4, name="b")],
        maybe=req_cls.Extra(x=9),
        ids=[bytes(range(16)), bytes(16)],
        flag=False,
        ratio=2.5,
        small=65535,
    )
    assert req_cls.decode(obj.encode(2), 2) == obj
    v1 = req_cls.decode(obj.encode(1), 1)
    assert v1.flag is True and v1.leaders == obj.leaders and v1.ids == obj.ids
    v0 = req_cls.decode(obj.encode(0), 0)
    assert v0.leaders == [] and v0.maybe == req_cls.Extra(x=9) and v0.flag is True
    nulled = req_cls(maybe=None)
    assert req_cls.decode(nulled.encode(1), 1).maybe is None
    resp = spec.response(leader=spec.response.LeaderInfo(id=5, name="z"))
    assert spec.response.decode(resp.encode(2), 2) == resp
    assert spec.response().encode(2) == b"\x00"  # default tagged struct omitted
    assert spec.response.LeaderInfo is not info


def test_messages_pickle() -> None:
    import pickle

    obj = m.FetchResponse(responses=[m.FetchResponse.FetchableTopicResponse(topic="t")])
    assert pickle.loads(pickle.dumps(obj)) == obj
    assert m.FetchResponse.PartitionData.__qualname__ == "FetchResponse.PartitionData"


def test_dsl_rejects_bad_declarations() -> None:
    with pytest.raises(ValueError):
        F("X", "int32", "0+", F("Y", "int8", "0+"))  # primitive with children
    with pytest.raises(ValueError):
        F("X", "string", "0+", default=None)  # null default, never nullable
    with pytest.raises(ValueError):
        F("X", "mystery", "0+")
    with pytest.raises(ValueError):
        api(9001, "Bad", "0-1", flexible=None, request=(F("T", "int8", "0+", tag=0),), response=())
    with pytest.raises(ValueError):
        api(9002, "Bad", "0-1", flexible=None, request=(F("S", "Undeclared", "0+"),), response=())


def test_codec_source_is_inspectable() -> None:
    src = m.ProduceRequest.codec_source(9, "decode")
    assert src.startswith("def decode(buf, pos):")
    assert issubclass(m.ProduceRequest, Message)


def test_type_stub_is_current() -> None:
    """kafkaproto/messages/__init__.pyi matches the declarations (regenerate: see kafkaproto.stubs)."""
    from pathlib import Path

    from kafkaproto.stubs import render_stub

    stub = Path(m.__file__).with_suffix(".pyi")
    assert stub.read_text() == render_stub(), "run: python -m kafkaproto.stubs > " + str(stub)
