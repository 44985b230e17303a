"""msnb's tfevents encoder against TensorBoard's own protobuf classes, on inputs an attacker would pick."""

import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from msnb.bridges.tfevents import event, frame, scalar_records, scalar_value
from msnb.events.records import scan

event_pb2 = pytest.importorskip("tensorboard.compat.proto.event_pb2")

rows = st.lists(
    st.tuples(
        st.sampled_from(["loss", "lr", "", "a/b", "損失", "x" * 200]),
        st.integers(min_value=-(2**63), max_value=2**63 - 1),
        st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.just(1.7e9)),
        st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.just(1e300), st.just(-1e-320)),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(rows)
def test_scalar_records_are_the_events_tensorboard_parses(data):
    tags = [r[0] for r in data]
    steps = np.array([r[1] for r in data], dtype=np.int64)
    walls = np.array([r[2] for r in data], dtype=np.float64)
    values = np.array([r[3] for r in data], dtype=np.float64)
    raw = scalar_records(tags, steps, walls, values)
    # the vectorised framing equals the one-record-at-a-time encoder
    assert raw == b"".join(frame(event(int(s), w, [scalar_value(t, v)])) for t, s, w, v in zip(tags, steps, walls, values))
    sc = scan(raw)
    assert sc.problems == [] and len(sc.offsets) == len(data) and sc.end == len(raw)
    for (tag, step, wall, value), o, n in zip(data, sc.offsets, sc.lengths):
        ev = event_pb2.Event.FromString(raw[o : o + n])
        assert ev.step == step
        assert ev.wall_time == (wall if math.isfinite(wall) else 0.0)
        (v,) = ev.summary.value
        assert v.tag == tag and v.WhichOneof("value") == "simple_value"
        with np.errstate(over="ignore"):
            want = np.float32(value)  # simple_value is a float: rounded, too large ones become inf
        assert struct.pack("<f", v.simple_value) == struct.pack("<f", want) or (math.isnan(v.simple_value) and math.isnan(want))
