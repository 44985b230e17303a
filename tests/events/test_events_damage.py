"""Damaged files: every intact record comes back, the damage is reported with its offset, nothing raises."""

import os
import shutil
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import msnb
from tests.writers.framing import payloads


def spans(path: Path):
    """(record start, record end) for each record, by plain framing."""
    return [(pos, pos + 16 + len(p)) for pos, p in payloads(path)]


@pytest.fixture
def run_copy(ms_files, tmp_path):
    """A private copy of the SummaryRecord run (record k carries step k; record 0 is the version)."""
    dst = tmp_path / "run"
    shutil.copytree(ms_files / "record", dst)
    for f in dst.iterdir():
        os.chmod(f, 0o600)  # MindSpore leaves closed summaries read-only
    (path,) = dst.glob("*_MS")
    return path


def loss_steps(result):
    return result.scalars.series("loss")[0].tolist()


def test_cut_in_the_middle_of_a_record(run_copy):
    records = spans(run_copy)
    start, end = records[60]
    data = run_copy.read_bytes()
    run_copy.write_bytes(data[: start + (end - start) // 2])
    result = msnb.read(run_copy.parent)
    assert loss_steps(result) == list(range(1, 60))  # every record before the cut
    (problem,) = result.problems
    assert problem.kind == "truncated" and problem.offset == start
    assert str(run_copy) in str(problem) and f"byte {start}" in str(problem)


def test_flipped_byte_in_a_payload_skips_that_record_only(run_copy):
    records = spans(run_copy)
    start, end = records[30]
    data = bytearray(run_copy.read_bytes())
    data[start + 20] ^= 0x40
    run_copy.write_bytes(bytes(data))
    result = msnb.read(run_copy.parent)
    assert loss_steps(result) == [s for s in range(1, 121) if s != 30]
    (problem,) = result.problems
    assert problem.kind == "crc" and problem.offset == start


def test_flipped_byte_in_a_length_resyncs_on_the_next_record(run_copy):
    records = spans(run_copy)
    start, _ = records[45]
    data = bytearray(run_copy.read_bytes())
    data[start + 1] ^= 0x7F  # the record's length is now wrong, and its header CRC fails
    run_copy.write_bytes(bytes(data))
    result = msnb.read(run_copy.parent)
    assert loss_steps(result) == [s for s in range(1, 121) if s != 45]
    (problem,) = result.problems
    assert problem.kind == "header" and problem.offset == start and f"byte {records[46][0]}" in problem.message


def test_without_verify_damage_is_not_detected_but_nothing_raises(run_copy):
    data = bytearray(run_copy.read_bytes())
    start, _ = spans(run_copy)[10]
    data[start + 14] ^= 0x01
    run_copy.write_bytes(bytes(data))
    assert len(msnb.read(run_copy.parent, verify=False).scalars) >= 238


def test_empty_garbage_and_foreign_files_do_not_stop_the_others(run_copy):
    run = run_copy.parent
    (run / "events.out.events.summary.1.0.host_MS").write_bytes(b"")
    (run / "events.out.events.summary.2.0.host_MS").write_bytes(os.urandom(5000))
    (run / "events.out.tfevents.3.host").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    result = msnb.read(run)
    assert loss_steps(result) == list(range(1, 121))
    kinds = {Path(p.path).name: p.kind for p in result.problems}
    assert kinds["events.out.events.summary.1.0.host_MS"] == "empty"
    assert kinds["events.out.events.summary.2.0.host_MS"] in ("foreign", "header")
    assert kinds["events.out.tfevents.3.host"] in ("foreign", "header")
    assert all(p.path != str(run_copy) for p in result.problems)


def test_zero_filled_tail_is_reported_quickly(run_copy):
    """Preallocated space after the last record (a crashed writer) is one problem, not a scan per byte."""
    with open(run_copy, "ab") as f:
        f.write(b"\x00" * (8 << 20))
    result = msnb.read(run_copy.parent)
    assert loss_steps(result) == list(range(1, 121))
    assert [p.kind for p in result.problems] == ["header"]


# ------------------------------------------------------------------ properties


@pytest.fixture(scope="module")
def original(ms_files):
    (path,) = (ms_files / "record").glob("*_MS")
    data = path.read_bytes()
    return data, spans(path)


mutations = st.tuples(
    st.integers(min_value=0, max_value=10**9),  # where to truncate (mod length + 1)
    st.lists(st.tuples(st.integers(min_value=0, max_value=10**9), st.integers(min_value=1, max_value=255)), max_size=6),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutations)
def test_any_truncation_and_flips_keep_every_untouched_record(original, tmp_path_factory, mutation):
    data, records = original
    cut, flips = mutation
    length = cut % (len(data) + 1)
    damaged = bytearray(data[:length])
    for where, xor in flips:
        if length:
            damaged[where % length] ^= xor
    touched = {i for i in range(length) if damaged[i] != data[i]}  # two flips of one byte may cancel
    path = tmp_path_factory.mktemp("prop") / "events.out.events.summary.1.0.h_MS"
    path.write_bytes(bytes(damaged))

    result = msnb.read(path)  # must not raise, whatever the bytes

    got = set(zip(result.scalars.tag.tolist(), result.scalars.step.tolist()))
    for k, (start, end) in enumerate(records):
        intact = end <= length and not any(start <= i < end for i in touched)
        if intact and k > 0:
            assert ("loss", k) in got and ("lr", k) in got, f"record {k} [{start}, {end}) was intact but lost"
    if touched:
        assert result.problems, "damage must be reported"
    if length < len(data) and any(start < length < end for start, end in records):
        assert any(p.kind in ("truncated", "torn", "header", "crc") for p in result.problems)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.binary(max_size=2048),
    st.sampled_from(["events.out.events.summary.1.0.h_MS", "events.out.tfevents.1.h", "x.out.events.summary.1.h_lineage", "train.log"]),
)
def test_arbitrary_bytes_never_raise(tmp_path_factory, blob, name):
    path = tmp_path_factory.mktemp("fuzz") / name
    path.write_bytes(blob)
    result = msnb.read(path)
    assert isinstance(result.problems, list)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.binary(min_size=0, max_size=64), max_size=8))
def test_well_framed_garbage_payloads_are_reported_not_raised(tmp_path_factory, blobs):
    """Records with valid checksums but nonsense inside: decode errors are problems, not exceptions."""
    from msnb.events.records import masked_crc

    out = bytearray()
    for blob in blobs:
        header = struct.pack("<Q", len(blob))
        out += header + struct.pack("<I", masked_crc(header)) + blob + struct.pack("<I", masked_crc(blob))
    for name in ("events.out.events.summary.1.0.h_MS", "events.out.tfevents.1.h", "x.out.events.summary.1.h_lineage"):
        path = tmp_path_factory.mktemp("framed") / name
        path.write_bytes(bytes(out))
        result = msnb.read(path)
        assert all(p.kind in ("decode", "foreign", "empty", "info") or p.severity == "info" for p in result.problems)
