"""The compiled records encoder (kafkaproto._recordbuild) against the pure-Python one.

build_batch takes the compiled path whenever the types fit it; both must give the
same bytes, and what they give must decode back to the records.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkaproto import _recordbuild, records
from kafkaproto.records import build_batch, decode_batch

header = st.tuples(st.text(max_size=12), st.one_of(st.none(), st.binary(max_size=40)))
record = st.tuples(
    st.one_of(st.none(), st.binary(max_size=300)),
    st.one_of(st.none(), st.binary(max_size=3000)),
    st.lists(header, max_size=4),
    st.integers(min_value=0, max_value=2**42),
)


def test_build_batch_uses_the_compiled_encoder() -> None:
    # The MQTT bridge's producer budget relies on it; built by `pip install -e .` or
    # `python setup.py build_ext --inplace`.
    assert records._compiled_encode is _recordbuild.encode


@settings(max_examples=300, deadline=None)
@given(st.lists(record, min_size=1, max_size=30), st.integers(min_value=0, max_value=2**42))
def test_compiled_and_python_encoders_agree(recs: list, base: int) -> None:
    assert _recordbuild.encode(recs, base) == records._encode_records_py(recs, base)


@settings(max_examples=100, deadline=None)
@given(st.lists(record, min_size=1, max_size=20))
def test_batches_decode_to_their_records(recs: list) -> None:
    batch = build_batch(recs, producer_id=7, producer_epoch=1, base_sequence=3)
    _header, decoded = decode_batch(batch)
    assert [(r.key, r.value, list(r.headers), r.timestamp) for r in decoded] == [
        (k, v, list(h), ts) for k, v, h, ts in recs
    ]


def test_other_bytes_like_take_the_python_path() -> None:
    recs = [(bytearray(b"k"), memoryview(b"value"), [("h", b"1")], 5)]
    try:
        _recordbuild.encode(recs, 5)
    except TypeError:
        pass
    else:
        raise AssertionError("the compiled encoder took a bytearray key")
    plain = [(b"k", b"value", [("h", b"1")], 5)]
    assert build_batch(recs) == build_batch(plain)  # type: ignore[arg-type]


def test_bad_records_raise_in_both() -> None:
    for bad in ([(b"k", b"v", [], "not a timestamp")], [(b"k", b"v")], ["x"]):
        for encode in (_recordbuild.encode, records._encode_records_py):
            try:
                encode(bad, 0)  # type: ignore[arg-type]
            except (TypeError, ValueError):
                continue
            raise AssertionError(f"{encode} accepted {bad!r}")
