"""Known answers for the lowest layer: CRC masking, varints, framing, resynchronisation.

Hand-built bytes and exact expectations, no MindSpore and no writer: if one of
these fails, the bug is in ``msnb/events/records.py`` or ``wire.py``.
"""

import io
import struct

import pytest
from crc32c import crc32c

from msnb.events.problems import ProblemKind
from msnb.events.records import HEADER, Damage, FrameReader, masked_crc, read_record, scan
from msnb.events.wire import DecodeError, fields, signed64, varint


def mask(crc: int) -> int:
    """TensorFlow's mask, written out again here so the test does not trust the code under test."""
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame(payload: bytes) -> bytes:
    head = struct.pack("<Q", len(payload))
    return head + struct.pack("<I", mask(crc32c(head))) + payload + struct.pack("<I", mask(crc32c(payload)))


def starts(sc) -> list:
    return [int(o) - HEADER for o in sc.offsets]


# ------------------------------------------------------------------ checksums


def test_crc32c_known_answer_and_mask():
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    assert masked_crc(b"123456789") == mask(0xE3069283)
    assert masked_crc(b"") == 0xA282EAD8  # crc of nothing is 0: the mask adds only its delta
    assert masked_crc(b"\x00" * 8) != 0  # so an all-zero header never checks (zero runs are skipped whole)


def test_masked_crc_with_a_running_value_continues_the_checksum():
    assert masked_crc(b"456789", crc32c(b"123")) == masked_crc(b"123456789")


# ------------------------------------------------------------------ varints


@pytest.mark.parametrize(
    ("data", "value", "stop"),
    [(b"\x00", 0, 1), (b"\x01", 1, 1), (b"\x7f", 127, 1), (b"\x80\x01", 128, 2), (b"\x96\x01", 150, 2), (b"\xff\xff\xff\xff\x0f", 0xFFFFFFFF, 5)],
)
def test_varint_known_answers(data, value, stop):
    assert varint(data, 0, len(data)) == (value, stop)


def test_varint_ten_bytes_is_the_most():
    minus_one = b"\xff" * 9 + b"\x01"
    value, stop = varint(minus_one, 0, 10)
    assert stop == 10 and signed64(value) == -1
    with pytest.raises(DecodeError):
        varint(b"\xff" * 11, 0, 11)


def test_varint_running_off_the_end_names_its_offset():
    with pytest.raises(DecodeError) as info:
        varint(b"\x01\x80", 1, 2)
    assert info.value.offset == 1


def test_fields_walk_and_reject_a_length_past_the_end():
    msg = b"\x08\x96\x01" + b"\x12\x03abc"  # field 1 varint 150, field 2 "abc"
    assert list(fields(msg, 0, len(msg))) == [(1, 0, 150, 1), (2, 2, 5, 8)]
    with pytest.raises(DecodeError):
        list(fields(b"\x12\x09abc", 0, 5))


# ------------------------------------------------------------------ framing


A, B, C = frame(b"alpha"), frame(b"bravo!"), frame(b"")


def test_clean_frames_exact_offsets():
    buf = A + B + C
    sc = scan(buf)
    assert starts(sc) == [0, len(A), len(A) + len(B)]
    assert sc.lengths.tolist() == [5, 6, 0]
    assert sc.problems == [] and sc.end == len(buf) and sc.skipped_bytes == 0


def test_payload_flip_skips_that_record_only():
    bad = bytearray(A)
    bad[HEADER + 2] ^= 0x20
    sc = scan(bytes(bad) + B)
    assert starts(sc) == [len(A)]
    (p,) = sc.problems
    assert (p.kind, p.offset) == (ProblemKind.CRC, 0) and sc.skipped_bytes == len(A)


def test_torn_record_resynchronises_on_the_next_header_inside_its_claimed_span():
    """A header that claims 40 bytes, but the writer died after 7 and the next records follow."""
    torn = frame(b"x" * 40)[: HEADER + 7]
    buf = torn + A + B
    sc = scan(buf)
    assert starts(sc) == [len(torn), len(torn) + len(A)]
    (p,) = sc.problems
    assert (p.kind, p.offset) == (ProblemKind.TORN, 0)
    assert f"byte {len(torn)}" in p.message and sc.skipped_bytes == len(torn)


def test_torn_record_whose_claim_runs_past_the_end_of_the_data():
    torn = frame(b"y" * 500)[: HEADER + 3]
    sc = scan(torn + A)
    assert starts(sc) == [len(torn)]
    assert [(p.kind, p.offset) for p in sc.problems] == [(ProblemKind.TORN, 0)]


def test_zeros_between_records_are_one_header_problem_with_the_exact_span():
    buf = A + b"\x00" * 1000 + B
    sc = scan(buf)
    assert starts(sc) == [0, len(A) + 1000]
    (p,) = sc.problems
    assert (p.kind, p.offset, sc.skipped_bytes) == (ProblemKind.HEADER, len(A), 1000)


def test_garbage_to_the_end_is_reported_once():
    sc = scan(A + b"\x01\x02\x03" * 50)
    assert starts(sc) == [0]
    assert [(p.kind, p.offset) for p in sc.problems] == [(ProblemKind.HEADER, len(A))]
    assert sc.end == len(A) + 150


def test_truncated_last_record_final_and_held_back():
    buf = A + B[:9]
    final = scan(buf)
    assert starts(final) == [0]
    assert [(p.kind, p.offset) for p in final.problems] == [(ProblemKind.TRUNCATED, len(A))]
    following = scan(buf, final=False)
    assert starts(following) == [0] and following.problems == [] and following.end == len(A)


def test_a_valid_header_longer_than_the_buffer_asks_for_its_size():
    big = frame(b"z" * 300)
    sc = scan(A + big[:100], final=False)
    assert starts(sc) == [0] and sc.end == len(A) and sc.need == len(big)


def test_damage_is_carried_from_one_buffer_to_the_next_as_one_problem():
    data = A + b"\xee" * 200 + B
    first = scan(data[:100], final=False)
    assert starts(first) == [0] and first.problems == [] and isinstance(first.damage, Damage)
    assert first.damage.origin == len(A)
    second = scan(data[first.end :], base_offset=first.end, damage=first.damage)
    assert starts(second) == [len(A) + 200 - first.end]
    (p,) = second.problems
    assert (p.kind, p.offset) == (ProblemKind.HEADER, len(A)) and "skipped 200 bytes" in p.message


def test_unverified_scan_trusts_lengths():
    bad = bytearray(A)
    bad[HEADER] ^= 1
    assert starts(scan(bytes(bad) + B, verify=False)) == [0, len(A)]


# ------------------------------------------------------------------ whole files in small chunks


@pytest.mark.parametrize("chunk", [32, 33, 64, 100, 1 << 20])
def test_frame_reader_gives_the_same_records_whatever_the_chunk(chunk):
    big = frame(bytes(range(256)) * 3)
    data = A + big + b"\x00" * 77 + frame(b"q" * 30)[:20] + B + C + big + A[:5]
    reader = FrameReader("f", chunk=chunk)
    got = [base + int(o) - HEADER for _buf, base, offs, _lens in reader.read(io.BytesIO(data), 0, len(data), final=True) for o in offs]
    b_at = len(A) + len(big) + 77 + 20  # the zeros and the torn record are one damaged span
    assert got == [0, len(A), b_at, b_at + len(B), b_at + len(B) + len(C)]
    kinds = [(p.kind, p.offset) for p in reader.problems]
    assert kinds == [(ProblemKind.HEADER, len(A) + len(big)), (ProblemKind.TRUNCATED, len(data) - 5)]
    assert reader.pos == len(data)


def test_read_record_checks_before_it_allocates():
    big = frame(b"w" * 1000)
    f = io.BytesIO(b"\x00" * 10 + big)
    assert read_record(f, 10, len(big), chunk=64) == big
    broken = bytearray(big)
    broken[500] ^= 1
    assert read_record(io.BytesIO(bytes(broken)), 0, len(big), chunk=64) is None


def test_a_follower_read_holds_back_at_damage_that_may_still_be_written():
    data = A + b"\x00" * 500
    reader = FrameReader("f", chunk=64)
    list(reader.read(io.BytesIO(data), 0, len(data), final=False))
    assert reader.pos == len(A) and reader.problems == []
