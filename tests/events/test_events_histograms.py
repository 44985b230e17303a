"""The vectorised histogram decoder against two independent oracles: MindSpore's own summary_pb2
(on files SummaryRecord wrote) and msnb's field-by-field decoder (on real, damaged and random bytes)."""

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import msnb
from msnb.events import fasthistograms, mindspore_proto
from msnb.events import reader as reader_module
from msnb.events.discovery import MS_SUMMARY
from msnb.events.records import masked_crc
from msnb.events.wire import DecodeError
from tests.conftest import _run_writer

FIELDS = ("min", "max", "sum", "count", "nan_count", "pos_inf_count", "neg_inf_count")


@pytest.fixture(scope="module")
def hist_files(tmp_path_factory):
    root = _run_writer("mindspore_histograms.py", tmp_path_factory.mktemp("ms-histograms"))
    return json.loads((root / "expected.json").read_text())


def _payloads(path):
    data = Path(path).read_bytes()
    pos = 0
    while pos + 12 <= len(data):
        (n,) = struct.unpack_from("<Q", data, pos)
        yield data, pos + 12, pos + 12 + n
        pos += 16 + n


def _histogram_messages(path) -> list[bytes]:
    """The raw Summary.Histogram messages of a file, found with the slow decoder's field walk."""
    found = []
    for data, a, b in _payloads(path):
        ev = mindspore_proto.decode_event_deferred(data, a, b)
        found += [data[r.start : r.end] for _tag, r in ev.others if isinstance(r, mindspore_proto.HistogramSpan)]
    return found


def _same(fast, slow) -> bool:
    if fast is None or slow is None:
        return fast is slow
    for key in FIELDS:
        x, y = getattr(fast, key), getattr(slow, key)
        if not (x == y or (x != x and y != y)) or type(x) is not type(y):
            return False
    return all(np.array_equal(getattr(fast, c), getattr(slow, c), equal_nan=True) for c in ("left", "right", "counts"))


def _slow(buf, a, b):
    try:
        return mindspore_proto.decode_histogram(buf, a, b)
    except (DecodeError, IndexError, OverflowError):
        return "error"


def _agree(messages: list[bytes]) -> None:
    """Decode *messages* together (one buffer, one call) and each alone with the exact decoder."""
    buf = b"".join(messages)
    starts = np.cumsum([0] + [len(m) for m in messages])
    fast = fasthistograms.decode_histograms(buf, starts[:-1], starts[1:])
    for i, got in enumerate(fast):
        want = _slow(buf, int(starts[i]), int(starts[i + 1]))
        if got is None:
            continue  # handed back: the exact decoder decides (and may raise)
        assert want != "error", f"message {i}: fast path decoded what the exact decoder rejects"
        assert _same(got, want), f"message {i} differs"


def test_matches_summary_pb2_bit_for_bit(hist_files):
    got = msnb.read(hist_files["path"])
    assert not got.problems
    want = hist_files["histograms"]
    assert len(got.histograms) == len(want) == 280
    for w, row in zip(want, got.histograms.rows()):
        assert (row["tag"], row["step"]) == (w["tag"], w["step"])
        for key in ("min", "max", "sum"):
            assert row[key].hex() == w[key] or (np.isnan(row[key]) and w[key] == "nan"), key
        for key in ("count", "nan_count", "pos_inf_count", "neg_inf_count"):
            assert row[key] == w[key], key
        left = np.array([float.fromhex(x) for x in w["left"]])
        np.testing.assert_array_equal(row["left"], left)
        np.testing.assert_array_equal(row["right"], left + np.array([float.fromhex(x) for x in w["width"]]))
        np.testing.assert_array_equal(row["counts"], w["counts"])


def test_every_real_histogram_takes_the_fast_path_and_equals_the_slow_one(hist_files):
    messages = _histogram_messages(hist_files["path"])
    buf = b"".join(messages)
    starts = np.cumsum([0] + [len(m) for m in messages])
    fast = fasthistograms.decode_histograms(buf, starts[:-1], starts[1:])
    assert all(h is not None for h in fast)
    assert max(int(h.counts.max()) for h in fast) >= 1 << 14  # three-byte counts were met
    for i, h in enumerate(fast):
        assert _same(h, mindspore_proto.decode_histogram(buf, int(starts[i]), int(starts[i + 1])))


def test_reader_tables_equal_the_slow_reader(hist_files, monkeypatch):
    fast = msnb.read(hist_files["path"])
    monkeypatch.setitem(reader_module._DECODERS, MS_SUMMARY, mindspore_proto.decode_event)
    monkeypatch.delitem(reader_module._FINISHERS, MS_SUMMARY)
    monkeypatch.delitem(reader_module._BULK, MS_SUMMARY)
    slow = msnb.read(hist_files["path"])
    assert len(fast.histograms) == len(slow.histograms) and len(fast.scalars) == len(slow.scalars) == 40
    for a, b in zip(fast.histograms.rows(), slow.histograms.rows()):
        assert a["tag"] == b["tag"] and a["step"] == b["step"]
        assert all(np.array_equal(a[c], b[c], equal_nan=True) for c in ("left", "right", "counts", *FIELDS))


@st.composite
def damaged_messages(draw, pool):
    msg = bytearray(draw(st.sampled_from(pool)))
    for _ in range(draw(st.integers(0, 4))):
        i = draw(st.integers(0, len(msg) - 1))
        msg[i] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        cut = draw(st.integers(0, len(msg)))
        msg = msg[:cut] + draw(st.binary(max_size=12))
    return bytes(msg)


@pytest.fixture(scope="module")
def pool(hist_files):
    messages = _histogram_messages(hist_files["path"])
    return messages[:14]  # two steps: every tag once or twice


def test_buckets_read_in_small_blocks_equal_one_block(pool, monkeypatch):
    """Blocks of buckets may end anywhere, even inside a histogram: a block of 7 buckets gives the same histograms."""
    buf = b"".join(pool)
    starts = np.cumsum([0] + [len(m) for m in pool])
    whole = fasthistograms.decode_histograms(buf, starts[:-1], starts[1:])
    monkeypatch.setattr(fasthistograms, "BLOCK", 7)
    blocks = fasthistograms.decode_histograms(buf, starts[:-1], starts[1:])
    assert all(h is not None for h in whole)
    assert all(_same(x, y) for x, y in zip(blocks, whole))
    assert all(_same(x, mindspore_proto.decode_histogram(buf, int(a), int(b))) for x, a, b in zip(blocks, starts[:-1], starts[1:]))


def test_damaged_histograms_agree_with_the_exact_decoder(pool):
    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(damaged_messages(pool), min_size=1, max_size=6))
    def check(messages):
        _agree(messages)

    check()


@settings(max_examples=400, deadline=None)
@given(st.lists(st.binary(max_size=80), min_size=1, max_size=5))
def test_random_bytes_never_crash_and_agree(messages):
    _agree(messages)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.floats(allow_nan=True), st.floats(allow_nan=True), st.integers(0, (1 << 70) - 1)), max_size=6), st.integers(0, (1 << 70) - 1))
def test_hand_encoded_buckets_agree(buckets, count):
    """Counts of every varint width: past int64 (read as negative), and ten-byte ones past 64 bits."""
    varint = _varint
    body = b""
    for left, width, c in buckets:
        inner = b"\x09" + struct.pack("<d", left) + b"\x11" + struct.pack("<d", width) + b"\x18" + varint(c)
        body += b"\x0a" + varint(len(inner)) + inner
    body += b"\x40" + varint(count) + b"\x31" + struct.pack("<d", -1.5)
    _agree([body])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=3), min_size=1, max_size=8))
def test_any_count_bytes_agree_and_short_varints_take_the_fast_path(count_bytes):
    """Each bucket's count is arbitrary bytes: one- and two-byte varints (non-minimal ones like ``80 00`` too),
    a first byte without its continuation bit followed by a stray byte, a last byte with one."""
    body = b"".join(
        b"\x0a" + bytes([19 + len(c)]) + b"\x09" + struct.pack("<d", 0.25 * i) + b"\x11" + struct.pack("<d", 0.5) + b"\x18" + c
        for i, c in enumerate(count_bytes)
    )
    body += b"\x40\x07"
    _agree([body, body[: len(body) // 2], body])
    plain = all(len(c) <= 2 and c[-1] < 0x80 and all(x >= 0x80 for x in c[:-1]) for c in count_bytes)
    fast = fasthistograms.decode_histograms(body, [0], [len(body)])[0]
    if plain:  # every count a well-formed varint of one or two bytes: the vectorised path must decode it, not hand it back
        assert fast is not None
        want = [(c[0] & 0x7F) | ((c[1] if len(c) > 1 else 0) << 7) for c in count_bytes]
        assert fast.counts.tolist() == want


def _bucket(left: float, width: float, count: int) -> bytes:
    inner = b"\x09" + struct.pack("<d", left) + b"\x11" + struct.pack("<d", width) + b"\x18" + bytes([count])
    return b"\x0a" + bytes([len(inner)]) + inner


def test_a_histogram_of_many_buckets_is_left_to_the_exact_decoder(pool):
    """Lockstep costs a step per bucket: a lone histogram of 20,000 buckets is handed back, its neighbours are not."""
    huge = b"".join(_bucket(i * 0.5, 0.5, i % 100) for i in range(20_000)) + b"\x40\x05"
    messages = [*pool[:7], huge, *pool[7:14]]
    buf = b"".join(messages)
    starts = np.cumsum([0] + [len(m) for m in messages])
    fast = fasthistograms.decode_histograms(buf, starts[:-1], starts[1:])
    assert fast[7] is None and all(h is not None for i, h in enumerate(fast) if i != 7)
    _agree(messages)
    slow = mindspore_proto.decode_histogram(buf, int(starts[7]), int(starts[8]))
    assert slow.left.size == 20_000 and slow.count == 5


def _varint(v: int) -> bytes:
    out = bytearray()
    while True:
        out.append((v & 0x7F) | (0x80 if v > 0x7F else 0))
        v >>= 7
        if not out[-1] & 0x80:
            return bytes(out)


def _either_way(buf: bytes):
    """An event decoded at once and decoded deferred (histograms resolved together): what each gives, or its error."""

    def error(exc):
        return ("error", str(exc if isinstance(exc, DecodeError) else DecodeError(str(exc), 0)))

    try:
        slow = mindspore_proto.decode_event(buf, 0, len(buf))
    except (DecodeError, IndexError, ValueError, OverflowError) as exc:
        slow = error(exc)
    try:
        events, errors = mindspore_proto.resolve_histograms(buf, [(0, mindspore_proto.decode_event_deferred(buf, 0, len(buf)))])
        fast = error(errors[0][1]) if errors else events[0][1]
    except (DecodeError, IndexError, ValueError, OverflowError) as exc:
        fast = error(exc)
    return slow, fast


@st.composite
def histogram_values(draw, pool):
    """A Summary.Value: a tag (any bytes, any length), a histogram of any size, maybe another field, maybe cut short."""
    tag = draw(st.binary(max_size=140))
    hist = draw(
        st.sampled_from(
            [
                b"",
                _bucket(0.0, 1.0, 3),
                b"".join(_bucket(i, 1.0, i) for i in range(6)),  # 132 bytes: a two-byte length
                pool[0],
                b"".join(_bucket(i, 1.0, 1) for i in range(760)),  # past 16,383 bytes: a three-byte length
            ]
        )
    )
    parts = [b"\x0a" + _varint(len(tag)) + tag, b"\x4a" + _varint(len(hist)) + hist]
    extra = draw(st.sampled_from([b"", b"\x1d\x00\x00\x80\x3f", b"\x18\x05", b"\x4a\x00"]))
    if extra:
        parts.insert(draw(st.integers(0, 2)), extra)
    if draw(st.booleans()):
        parts.reverse()
    value = b"".join(parts)
    cut = draw(st.integers(0, 3))
    return value[: len(value) - cut] if draw(st.integers(0, 4)) == 0 else value


def test_histogram_values_decode_the_same_deferred_or_not(pool):
    """SummaryRecord's ``0a tag 4a histogram`` values are read without the field walk when deferred: same events, same errors."""

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(histogram_values(pool), min_size=1, max_size=4))
    def check(values):
        summary = b"".join(b"\x0a" + _varint(len(v)) + v for v in values)
        buf = b"\x09" + struct.pack("<d", 12.5) + b"\x10\x07" + b"\x2a" + _varint(len(summary)) + summary
        slow, fast = _either_way(buf)
        if isinstance(slow, tuple) or isinstance(fast, tuple):
            assert slow == fast
            return
        assert (slow.step, slow.wall_time, slow.extra_fields, slow.scalars) == (fast.step, fast.wall_time, fast.extra_fields, fast.scalars)
        assert [t for t, _r in slow.others] == [t for t, _r in fast.others]
        assert all(_same(x, y) for (_t, x), (_u, y) in zip(fast.others, slow.others))

    check()


def _frame(payload: bytes) -> bytes:
    head = struct.pack("<Q", len(payload))
    return head + struct.pack("<I", masked_crc(head)) + payload + struct.pack("<I", masked_crc(payload))


def test_a_damaged_histogram_drops_its_record_like_the_slow_reader(hist_files, tmp_path, monkeypatch):
    """A record whose CRCs hold but whose histogram is malformed: same rows and same problems either way."""
    records = [payload[a:b] for payload, a, b in _payloads(hist_files["path"])]
    bad = bytearray(records[3])
    at = bad.find(b"\x0a\x14\x09")  # a bucket: its first field gets wire type 7, which protobuf does not have
    bad[at + 2] = 0x0F
    path = tmp_path / "events.out.events.summary.1.0.damaged_MS"
    path.write_bytes(b"".join(_frame(r) for r in (*records[:3], bytes(bad), *records[4:])))
    fast = msnb.read(path)
    monkeypatch.setitem(reader_module._DECODERS, MS_SUMMARY, mindspore_proto.decode_event)
    monkeypatch.delitem(reader_module._FINISHERS, MS_SUMMARY)
    slow = msnb.read(path)
    assert [(p.offset, p.kind) for p in fast.problems] == [(p.offset, p.kind) for p in slow.problems] != []
    assert len(fast.histograms) == len(slow.histograms) == 280 - 7
    assert fast.scalars.step.tolist() == slow.scalars.step.tolist()


def _tables(result):
    h = result.histograms
    rows = [(r["tag"], r["step"], *(r[c] for c in FIELDS), r["left"].tolist(), r["right"].tolist(), r["counts"].tolist()) for r in h.rows()]
    return repr(rows), result.scalars.step.tolist(), result.scalars.value.tolist(), [(p.offset, p.kind, p.message) for p in result.problems]


def test_reader_with_damaged_records_equals_the_slow_reader(hist_files, tmp_path_factory):
    """Records whose CRCs hold but whose bytes were changed: the same rows, the same problems, either decoder."""
    records = [payload[a:b] for payload, a, b in _payloads(hist_files["path"])][:6]
    root = tmp_path_factory.mktemp("damaged-records")

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(st.tuples(st.integers(0, len(records) - 1), st.integers(0, 1 << 20), st.integers(0, 255)), max_size=8), st.integers(0, 10**9))
    def check(edits, name):
        damaged = [bytearray(r) for r in records]
        for which, at, byte in edits:
            damaged[which][at % len(damaged[which])] = byte
        path = root / f"events.out.events.summary.{name}.0.x_MS"
        path.write_bytes(b"".join(_frame(bytes(r)) for r in damaged))
        fast = _tables(msnb.read(path))
        saved = reader_module._DECODERS[MS_SUMMARY], reader_module._FINISHERS.pop(MS_SUMMARY)
        reader_module._DECODERS[MS_SUMMARY] = mindspore_proto.decode_event
        try:
            slow = _tables(msnb.read(path))
        finally:
            reader_module._DECODERS[MS_SUMMARY], reader_module._FINISHERS[MS_SUMMARY] = saved
        assert fast == slow

    check()
