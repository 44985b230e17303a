"""Whole summary records decoded together (msnb.events.fastsummaries) against the record-by-record path.

The oracle is msnb's exact path with the bulk decoder switched off: both must give the same tables, bit for
bit and type for type, and the same problems, on files MindSpore's SummaryRecord and SummaryCollector wrote,
on hand-built records of every shape the bulk path must hand back, and on damaged records re-framed with
valid checksums (so the damage reaches the decoders instead of the checksum test).
"""

import contextlib
import mmap
import struct
from pathlib import Path

import numpy as np
import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import msnb
from msnb.events import fastsummaries, records
from msnb.events import reader as reader_module
from msnb.events.discovery import MS_SUMMARY
from tests.events.test_events_histograms import _varint, hist_files  # noqa: F401  (hist_files: a fixture, used by name)

KINDS = ("scalars", "histograms", "tensors", "images", "texts", "markers")


def _mask(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _frame(payload: bytes) -> bytes:
    head = struct.pack("<Q", len(payload))
    return head + struct.pack("<I", _mask(crc32c(head))) + payload + struct.pack("<I", _mask(crc32c(payload)))


def _payloads(path) -> list[bytes]:
    data = Path(path).read_bytes()
    out, pos = [], 0
    while pos + 16 <= len(data):
        (n,) = struct.unpack_from("<Q", data, pos)
        out.append(data[pos + 12 : pos + 12 + n])
        pos += 16 + n
    return out


@contextlib.contextmanager
def _without_bulk():
    saved = reader_module._BULK.pop(MS_SUMMARY)
    try:
        yield
    finally:
        reader_module._BULK[MS_SUMMARY] = saved


def _same_value(x, y) -> bool:
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        return type(x) is type(y) and x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y, equal_nan=x.dtype.kind == "f")
    if isinstance(x, float) and x != x:
        return isinstance(y, float) and y != y
    return type(x) is type(y) and x == y


def _assert_same(fast, slow) -> None:
    assert [str(p) for p in fast.problems] == [str(p) for p in slow.problems]
    for kind in KINDS:
        a, b = getattr(fast, kind), getattr(slow, kind)
        assert len(a) == len(b), kind
        for c in a.COLUMNS:
            x, y = getattr(a, c), getattr(b, c)
            assert x.dtype == y.dtype, (kind, c)
            if x.dtype.kind == "f":
                assert np.array_equal(x.view(np.int64), y.view(np.int64)), (kind, c)  # every bit, NaN payloads included
                continue
            bad = [i for i, (u, v) in enumerate(zip(x.tolist() if x.dtype != object else x, y.tolist() if y.dtype != object else y)) if not _same_value(u, v)]
            assert not bad, (kind, c, bad[:5])


def _both_ways(path, **options):
    fast = msnb.read(path, **options)
    with _without_bulk():
        slow = msnb.read(path, **options)
    _assert_same(fast, slow)
    return fast


@pytest.fixture()
def bulk_calls(monkeypatch):
    """What the bulk decoder was given and took, so a test can tell it really ran."""
    seen = {"records": 0, "handled": 0}
    real = fastsummaries.decode_summaries

    def spy(buf, offsets, lengths, wanted=None):
        out = real(buf, offsets, lengths, wanted)
        seen["records"] += int(offsets.size)
        seen["handled"] += int(out.handled.sum())
        return out

    monkeypatch.setitem(reader_module._BULK, MS_SUMMARY, spy)
    return seen


def test_summary_record_histograms_take_the_bulk_path_and_equal_the_exact_one(hist_files, bulk_calls):  # noqa: F811
    got = _both_ways(hist_files["path"])
    assert len(got.histograms) == 280 and len(got.scalars) == 40
    assert bulk_calls["handled"] == 40  # every step's record; the version record is the exact decoder's
    for tags in (["normal", "loss"], ["constant"], ["no such tag"]):
        picked = _both_ways(hist_files["path"], tags=tags)
        assert set(picked.histograms.tag.tolist()) | set(picked.scalars.tag.tolist()) <= set(tags)


def test_summary_collector_files_equal_the_exact_path(ms_files):
    got = _both_ways(ms_files)
    assert len(got.scalars) and (len(got.histograms) or len(got.images) or len(got.tensors))


def _event(*fields: bytes) -> bytes:
    return b"".join(fields)


def _wall(t: float) -> bytes:
    return b"\x09" + struct.pack("<d", t)


def _step(s: int) -> bytes:
    return b"\x10" + _varint(s & ((1 << 64) - 1))


def _summary(*values: bytes) -> bytes:
    body = b"".join(b"\x0a" + _varint(len(v)) + v for v in values)
    return b"\x2a" + _varint(len(body)) + body


def _tag(t: bytes) -> bytes:
    return b"\x0a" + _varint(len(t)) + t


def _scalar(x: float) -> bytes:
    return b"\x1d" + struct.pack("<f", x)


def _bucket(left: float, width: float, count: int) -> bytes:
    inner = b"\x09" + struct.pack("<d", left) + b"\x11" + struct.pack("<d", width) + b"\x18" + _varint(count)
    return b"\x0a" + _varint(len(inner)) + inner


def _hist(buckets=((0.0, 1.0, 3), (1.0, 1.0, 200)), count=203, extra=b"") -> bytes:
    body = b"".join(_bucket(*b) for b in buckets) + b"\x40" + _varint(count & ((1 << 64) - 1)) + b"\x31" + struct.pack("<d", 2.0) + extra
    return b"\x4a" + _varint(len(body)) + body


VERSION = _event(_wall(1.0), b"\x1a\x11" + b"MindSpore.Event:1")
PLAIN = _event(_wall(2.0), _step(1), _summary(_tag(b"w") + _hist(), _tag(b"loss") + _scalar(0.5), _tag(b"b") + _hist(((0.5, 0.25, 7),), 7)))
ODD_SHAPES = {
    "wall twice": _event(_wall(3.0), _step(2), _wall(4.0), _summary(_tag(b"loss") + _scalar(0.25))),
    "step twice": _event(_wall(3.0), _step(2), _step(3), _summary(_tag(b"loss") + _scalar(0.25))),
    "no wall": _event(_step(2), _summary(_tag(b"loss") + _scalar(0.25))),
    "negative step": _event(_wall(3.0), _step(-5), _summary(_tag(b"w") + _hist(), _tag(b"loss") + _scalar(1.5))),
    "step past int64": _event(_wall(3.0), b"\x10" + b"\xff" * 9 + b"\x01", _summary(_tag(b"loss") + _scalar(1.5))),
    "scalar and histogram in one value": _event(_wall(3.0), _step(4), _summary(_tag(b"w") + _scalar(1.0) + _hist())),
    "a value with only a tag": _event(_wall(3.0), _step(4), _summary(_tag(b"w"), _tag(b"loss") + _scalar(2.0))),
    "a value with no tag": _event(_wall(3.0), _step(4), _summary(_scalar(2.0))),
    "tag twice": _event(_wall(3.0), _step(4), _summary(_tag(b"a") + _tag(b"loss") + _scalar(2.0))),
    "an image": _event(_wall(3.0), _step(5), _summary(_tag(b"img") + b"\x22\x06\x08\x01\x10\x01\x18\x03", _tag(b"loss") + _scalar(2.0))),
    "an unknown value field": _event(_wall(3.0), _step(5), _summary(_tag(b"loss") + _scalar(2.0) + b"\x58\x01")),
    "an unknown summary field": _event(_wall(3.0), _step(5), b"\x2a\x0f\x0a\x0b" + _tag(b"loss") + _scalar(2.0) + b"\x10\x01"),
    "empty summary": _event(_wall(3.0), _step(6), b"\x2a\x00"),
    "two summaries": _event(_wall(3.0), _step(6), _summary(_tag(b"loss") + _scalar(2.0)), _summary(_tag(b"loss") + _scalar(3.0))),
    "a graph": _event(_wall(3.0), _step(6), b"\x22\x02\x08\x01"),
    "non-UTF-8 tag": _event(_wall(3.0), _step(7), _summary(_tag(b"\xff\xfe w") + _hist(), _tag(b"loss") + _scalar(2.0))),
    "tags told apart by a trailing NUL": _event(_wall(3.0), _step(7), _summary(_tag(b"w\x00") + _hist(), _tag(b"w") + _hist(), _tag(b"") + _scalar(1.0))),
    "a long tag beside short ones": _event(_wall(3.0), _step(8), _summary(_tag(b"x" * 200) + _hist(), _tag(b"loss") + _scalar(2.0))),
    "a bucket of another layout": _event(_wall(3.0), _step(9), _summary(_tag(b"w") + b"\x4a\x0d\x0a\x0b\x11" + struct.pack("<d", 1.0) + b"\x18\x01")),
    "a negative histogram count": _event(_wall(3.0), _step(9), _summary(_tag(b"w") + _hist(count=-1), _tag(b"loss") + _scalar(2.0))),
    "a NaN scalar with a payload": _event(_wall(3.0), _step(10), _summary(_tag(b"loss") + b"\x1d" + struct.pack("<I", 0x7FC12345))),
    "a signalling NaN scalar": _event(_wall(3.0), _step(10), _summary(_tag(b"loss") + b"\x1d" + struct.pack("<I", 0x7F812345))),
    "a ten-byte step past 64 bits": _event(_wall(3.0), b"\x10" + b"\xff" * 9 + b"\x7f", _summary(_tag(b"w") + _hist(), _tag(b"loss") + _scalar(1.5))),
    "a histogram count past 64 bits": _event(_wall(3.0), _step(10), _summary(_tag(b"w") + _hist(extra=b"\x10" + b"\xff" * 9 + b"\x7f"))),
    "300 values in one record": _event(_wall(3.0), _step(12), _summary(*[_tag(b"v%d" % j) + _scalar(j) for j in range(300)], _tag(b"w") + _hist())),
    "a signalling NaN wall time": _event(b"\x09" + struct.pack("<Q", 0x7FF0000000000001), _step(10), _summary(_tag(b"loss") + _scalar(2.0))),
    "a summary cut short": _event(_wall(3.0), _step(11), b"\x2a\x10" + _tag(b"loss")),
}


def _write(path: Path, payloads) -> Path:
    path.write_bytes(b"".join(_frame(p) for p in payloads))
    return path


@pytest.mark.filterwarnings("error")  # no warning on either path: numpy's cast of a signalling NaN included
@pytest.mark.parametrize("shape", sorted(ODD_SHAPES))
def test_each_odd_shape_reads_as_the_exact_path_reads_it(shape, tmp_path, bulk_calls):
    path = _write(tmp_path / "events.out.events.summary.1.host_MS", [VERSION, PLAIN, ODD_SHAPES[shape], PLAIN])
    got = _both_ways(path)
    assert bulk_calls["handled"] >= 2  # the plain records around it were read in bulk whatever the odd one did
    _both_ways(path, tags=["loss"])
    assert len(got.histograms) >= 4


def test_every_odd_shape_in_one_buffer(tmp_path, bulk_calls):
    path = _write(tmp_path / "events.out.events.summary.1.host_MS", [VERSION, *[p for odd in ODD_SHAPES.values() for p in (PLAIN, odd)]])
    got = _both_ways(path)
    assert len(got.problems) == 2 and {p.kind for p in got.problems} == {"decode"}  # the negative count and the cut summary
    assert bulk_calls["handled"] >= len(ODD_SHAPES)
    assert "x" * 200 in set(got.histograms.tag.tolist()) and "\ufffd\ufffd w" in set(got.histograms.tag.tolist())


def test_a_damaged_histogram_of_an_unwanted_tag_drops_its_record_as_a_full_read_does(tmp_path):
    bad = _event(_wall(3.0), _step(9), _summary(_tag(b"w") + _hist(count=-1), _tag(b"loss") + _scalar(2.0)))
    path = _write(tmp_path / "events.out.events.summary.1.host_MS", [VERSION, PLAIN, bad, PLAIN])
    picked = _both_ways(path, tags=["loss"])
    full = msnb.read(path)
    assert picked.scalars.step.tolist() == full.scalars.step.tolist() == [1, 1]
    assert [str(p) for p in picked.problems] == [str(p) for p in full.problems] and len(full.problems) == 1


def test_ten_byte_varints_past_64_bits_lose_their_high_bits_as_protobuf_does(tmp_path):
    """A step or a count whose tenth byte carries bits past 63: read modulo 2**64 (protobuf's rule), never an OverflowError."""
    path = _write(
        tmp_path / "events.out.events.summary.1.host_MS", [VERSION, ODD_SHAPES["a ten-byte step past 64 bits"], ODD_SHAPES["a histogram count past 64 bits"]]
    )
    got = _both_ways(path)
    assert not got.problems
    assert got.scalars.step.tolist() == [-1] and got.histograms.nan_count.tolist() == [0, -1]


def test_small_chunks_and_the_huge_page_map_read_the_same(hist_files, monkeypatch):  # noqa: F811
    """Chunks of 4 KB (records carried across them, records longer than one) and every chunk read into the map."""
    whole = msnb.read(hist_files["path"])
    monkeypatch.setattr(records, "CHUNK", 4096)
    monkeypatch.setattr(records, "HUGE_READ", 0)
    _assert_same(_both_ways(hist_files["path"]), whole)


def test_big_chunks_are_read_into_the_map(tmp_path, monkeypatch):
    """The map is what the scanner gets for a big chunk (bytes otherwise), and tables hold no view of it once read."""
    seen = []
    real = records.read_chunk

    def spy(f, n):
        buf = real(f, n)
        seen.append(type(buf).__name__)
        return buf

    monkeypatch.setattr(records, "read_chunk", spy)
    monkeypatch.setattr(records, "HUGE_READ", 1 << 10)
    path = _write(tmp_path / "events.out.events.summary.1.host_MS", [VERSION] + [PLAIN] * 200)
    got = msnb.read(path)
    assert seen == ["mmap"] and len(got.histograms) == 400
    for c in ("left", "right", "counts"):
        assert all(not isinstance(np.asarray(x).base, mmap.mmap) for x in getattr(got.histograms, c))


def test_a_read_of_some_tags_keeps_only_their_buckets(hist_files):  # noqa: F811
    """Histograms of other tags are decoded (a damaged one must drop its record) but their buckets are not kept alive."""
    got = _both_ways(hist_files["path"], tags=["normal"])
    kept = sum(x.size for x in got.histograms.left)
    bases = {id(x.base) for x in got.histograms.left}
    assert len(got.histograms) == 40 and len(bases) == 1
    assert got.histograms.left[0].base.size == kept  # the base holds these buckets only, not every tag's


@st.composite
def damaged(draw, pool):
    msg = bytearray(draw(st.sampled_from(pool)))
    for _ in range(draw(st.integers(0, 4))):
        msg[draw(st.integers(0, len(msg) - 1))] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        msg = msg[: draw(st.integers(0, len(msg)))] + draw(st.binary(max_size=12))
    return bytes(msg)


def test_damaged_records_with_valid_checksums_read_as_the_exact_path_reads_them(hist_files, tmp_path):  # noqa: F811
    pool = [p for p in _payloads(hist_files["path"])[1:4]] + [PLAIN, *ODD_SHAPES.values()]
    target = tmp_path / "events.out.events.summary.1.host_MS"

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(st.tuples(damaged(pool), st.integers(1, 10)), min_size=1, max_size=5), st.sampled_from([None, ["loss"], ["normal", "w"]]))
    def check(picked, tags):  # repeated records make groups of one length: templates tried, given up, the rest to bulk
        _write(target, [VERSION, *[p for p, times in picked for _ in range(times)]])
        _both_ways(target, tags=tags)

    check()


def test_zero_statistics_are_zero_and_absent_ones_unknown_on_every_path(tmp_path, bulk_calls):
    """MindSpore's Histogram is proto2: a min, max or sum of 0 is written and reads 0 on the bulk and the exact path alike;
    one left out (MindSpore writes none when nothing is finite) stays unknown, NaN.  (TensorBoard's proto3 HistogramProto
    differs: there an absent field is 0; see test_events_tensorboard.)"""
    zeros = b"".join(tag + struct.pack("<d", 0.0) for tag in (b"\x29", b"\x31", b"\x39"))  # max 5, min 6, sum 7
    dead = b"\x4a" + _varint(len(_bucket(0.0, 0.0, 64)) + 2 + len(zeros)) + _bucket(0.0, 0.0, 64) + b"\x40\x40" + zeros
    unknown = b"\x4a" + _varint(2 + 2) + b"\x10\x03" + b"\x40\x03"  # three NaNs: no bucket, no min/max/sum
    records = [_event(_wall(2.0 + i), _step(i), _summary(_tag(b"dead") + dead, _tag(b"nan") + unknown, _tag(b"loss") + _scalar(0.5))) for i in range(40)]
    path = _write(tmp_path / "events.out.events.summary.1.host_MS", [VERSION, *records])
    got = _both_ways(path)
    assert bulk_calls["handled"] >= 39  # all but the one record tried as a template went the bulk way
    dead_rows = got.histograms.where(tag="dead")
    assert len(dead_rows) == 40 and (dead_rows.min == 0.0).all() and (dead_rows.max == 0.0).all() and (dead_rows.sum == 0.0).all()
    nan_rows = got.histograms.where(tag="nan")
    assert np.isnan(nan_rows.min).all() and np.isnan(nan_rows.max).all() and np.isnan(nan_rows.sum).all() and (nan_rows.nan_count == 3).all()
    sums, estimated = got.histograms.estimated_sum()
    assert not estimated.any() and (sums[got.histograms.tag == "dead"] == 0.0).all() and np.isnan(sums[got.histograms.tag == "nan"]).all()
