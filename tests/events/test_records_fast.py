"""The fast paths of the framing layer against their plain twins: bulk CRC32C and the walk that guesses ahead.

Oracles: ``crc32c.crc32c`` called on each message, and :func:`records.scan`
with the run-ahead switched off (one record at a time, as before it existed).
"""

import numpy as np
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msnb.bridges.tfevents import scalar_records
from msnb.events import crcs, records


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_bulk_crc_is_crc32c_of_every_message(data):
    n = data.draw(st.integers(0, 80))
    m = data.draw(st.integers(0, 60))
    base = data.draw(st.binary(min_size=n, max_size=n))
    raw = bytearray()
    starts = []
    for _ in range(m):
        msg = bytearray(base)
        for _ in range(data.draw(st.integers(0, 4))):  # records of one writer differ in a few bytes
            if n:
                msg[data.draw(st.integers(0, n - 1))] = data.draw(st.integers(0, 255))
        raw += data.draw(st.binary(max_size=3))
        starts.append(len(raw))
        raw += msg
    arr = np.frombuffer(bytes(raw) or b"\0", dtype=np.uint8)
    got = crcs.crc_equal_length(arr, np.array(starts, dtype=np.int64), n)
    assert got.tolist() == [crc32c(bytes(raw[s : s + n])) for s in starts]


def test_bulk_crc_of_mixed_lengths_keeps_the_order():
    rng = np.random.default_rng(3)
    raw = rng.integers(0, 256, 200_000, dtype=np.uint8)
    starts = np.sort(rng.choice(190_000, 3_000, replace=False)).astype(np.int64)
    lengths = rng.choice([0, 1, 7, 40, 41, 300, 1500, 5000], starts.size).astype(np.int64)
    got = crcs.crc_many(raw, starts, lengths)
    assert got.tolist() == [crc32c(raw[s : s + n].tobytes()) for s, n in zip(starts.tolist(), lengths.tolist())]


def _scan_one_by_one(monkeypatch, buf, **kw):
    with monkeypatch.context() as m:
        m.setattr(records, "_period", lambda lengths: 0)  # never guess ahead
        return records.scan(buf, **kw)


def _same_scan(a, b):
    assert a.offsets.tolist() == b.offsets.tolist()
    assert a.lengths.tolist() == b.lengths.tolist()
    assert (a.end, a.need, a.skipped_bytes) == (b.end, b.need, b.skipped_bytes)
    assert [str(p) for p in a.problems] == [str(p) for p in b.problems]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])  # patched in a context, per example
@given(data=st.data())
def test_guessing_ahead_finds_the_chain_walking_finds(data, monkeypatch):
    """Patterned records (tags repeating every step, a step width changing) with flipped bytes, cuts and inserts."""
    tags = data.draw(st.lists(st.sampled_from(["loss", "lr", "grad-norm", "local_norm/a", "local_norm/b", "x" * 40]), min_size=1, max_size=6))
    steps = data.draw(st.integers(1, 400))
    first = data.draw(st.sampled_from([1, 100, 16_000]))  # step varints growing a byte on the way: lengths change
    rows = [(t, s) for s in range(first, first + steps) for t in tags]
    raw = bytearray(scalar_records([t for t, _ in rows], [s for _, s in rows], [1.0 + s for _, s in rows], [0.5 * s for _, s in rows]))
    for _ in range(data.draw(st.integers(0, 3))):
        at = data.draw(st.integers(0, len(raw) - 1))
        op = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        if op == "flip":
            raw[at] ^= data.draw(st.integers(1, 255))
        elif op == "cut":
            del raw[at : at + data.draw(st.integers(1, 40))]
        else:
            raw[at:at] = data.draw(st.binary(min_size=1, max_size=40))
    buf = bytes(raw)
    final = data.draw(st.booleans())
    verify = data.draw(st.booleans())
    _same_scan(records.scan(buf, final=final, verify=verify), _scan_one_by_one(monkeypatch, buf, final=final, verify=verify))


def test_a_long_regular_file_is_walked_ahead_and_agrees(monkeypatch):
    tags = ["loss", "learning-rate", "grad-norm"] + [f"local_norm/p{i}" for i in range(5)]
    rows = [(t, s) for s in range(1, 20_001) for t in tags]
    buf = scalar_records([t for t, _ in rows], [s for _, s in rows], [float(s) for _, s in rows], [1.0 / s for _, s in rows])
    calls = []
    real = records._run_ahead
    monkeypatch.setattr(records, "_run_ahead", lambda *a: calls.append(1) or real(*a))
    fast = records.scan(buf)
    assert len(calls) < 200  # 160,000 records: the guesses grow, most records are never walked one by one
    monkeypatch.setattr(records, "_run_ahead", real)
    _same_scan(fast, _scan_one_by_one(monkeypatch, buf))
    assert fast.offsets.size == len(rows) and not fast.problems


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_rows_of_words_hold_each_record_at_its_lead(data):
    """Records before, after or at both ends of a short buffer: row bytes [lead, lead + n) are the record, whichever way it was gathered."""
    from msnb.events import rowwords

    raw = np.frombuffer(data.draw(st.binary(min_size=1, max_size=120)), dtype=np.uint8)
    n = data.draw(st.integers(1, raw.size))
    starts = np.array(data.draw(st.lists(st.integers(0, raw.size - n), min_size=1, max_size=12)), dtype=np.int64)
    rows, lead = rowwords.gather_rows(raw, starts, n)
    assert rows.dtype == np.uint64 and rows.shape == (starts.size, rowwords.row_width(n) // 8)
    got = rows.view(np.uint8)[:, lead : lead + n]
    assert [bytes(r) for r in got] == [raw[s : s + n].tobytes() for s in starts.tolist()]
    want = rowwords.placed(raw[starts[0] : starts[0] + n], n, lead).view(np.uint8)
    assert bytes(want[lead : lead + n]) == bytes(got[0]) and not want[:lead].any() and not want[lead + n :].any()
