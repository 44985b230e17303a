"""CRC32C of many records of one length at once, exactly, with numpy.

Checking every payload with one ``crc32c`` call each costs a Python call per
record, which dominates reading a file of millions of small scalar events.
But CRC32C is affine over GF(2): for two messages of the same length,
``crc(a) ^ crc(b)`` is the zero-initialised, un-inverted CRC of ``a ^ b``, and
that is the XOR, over the byte positions where they differ, of a table entry
that depends only on the byte and its distance from the end.  Records of one
length written by one writer differ in a few bytes (the time, the step, the
value), so each record's CRC is the first record's CRC XOR a handful of table
look-ups, done for all records at once.  Nothing is approximated: the result is
the CRC of every byte.
"""

from __future__ import annotations

import numpy as np
from crc32c import crc32c

from .rowwords import gather_rows, placed

_POLY = np.uint32(0x82F63B78)  # CRC-32C (Castagnoli), reflected
MAX_LENGTH = 1024  # longer records: one crc32c call each (they are few, and their tables would be many)
MIN_GROUP = 16  # fewer records of a length than this: one call each
ROW_BYTES = 1 << 22  # bytes of the record matrix built at once


def _byte_table() -> np.ndarray:
    t = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        t = np.where(t & np.uint32(1), (t >> np.uint32(1)) ^ _POLY, t >> np.uint32(1))
    return t.astype(np.uint32)


_TABLE = _byte_table()
_BY_DISTANCE: list[np.ndarray] = [_TABLE]  # [d][b]: the zero-init CRC of byte b followed by d zero bytes


def _distance_table(d: int) -> np.ndarray:
    while len(_BY_DISTANCE) <= d:
        x = _BY_DISTANCE[-1]
        _BY_DISTANCE.append(_TABLE[x & np.uint32(0xFF)] ^ (x >> np.uint32(8)))
    return _BY_DISTANCE[d]


def crc_equal_length(raw: np.ndarray, starts: np.ndarray, n: int) -> np.ndarray:
    """CRC32C (as ``crc32c.crc32c`` gives it) of ``raw[s : s + n]`` for every s in *starts*.

    Args:
        raw: the buffer as a uint8 array.
        starts: int64 offsets of the messages in *raw*.
        n: their common length.

    Returns:
        uint32 CRCs, one per start.
    """
    m = starts.size
    out = np.empty(m, dtype=np.uint32)
    if m == 0:
        return out
    if n == 0 or n > MAX_LENGTH or m < MIN_GROUP:
        mv = memoryview(raw)
        out[:] = np.fromiter((crc32c(mv[s : s + n]) for s in starts.tolist()), dtype=np.uint32, count=m)
        return out
    s0 = int(starts[0])
    ref = raw[s0 : s0 + n]
    ref_crc = np.uint32(crc32c(ref.tobytes()))
    tables = _tables(n)  # (n, 256): row c is the table of the byte at column c
    rows = max(1, ROW_BYTES // n)
    for lo in range(0, m, rows):
        words, lead = gather_rows(raw, starts[lo : lo + rows], n)  # each record as 64-bit words: a copy and an XOR a word
        diff = words ^ placed(ref, n, lead)
        varying = np.flatnonzero(np.bitwise_or.reduce(diff, axis=0).view(np.uint8)[lead : lead + n])
        if varying.size == 0:
            out[lo : lo + rows] = ref_crc
            continue
        columns = np.ascontiguousarray(diff.view(np.uint8)[:, varying + lead].T)  # one row per varying byte position: look-ups read it in order
        acc = np.full(diff.shape[0], ref_crc, dtype=np.uint32)
        for row, c in zip(columns, varying.tolist()):
            acc ^= tables[c].take(row)
        out[lo : lo + rows] = acc
    return out


_BY_LENGTH: dict[int, np.ndarray] = {}


def _tables(n: int) -> np.ndarray:
    t = _BY_LENGTH.get(n)
    if t is None:
        _distance_table(n - 1)
        t = _BY_LENGTH[n] = np.stack(_BY_DISTANCE[n - 1 :: -1] if n > 1 else _BY_DISTANCE[:1])
        if len(_BY_LENGTH) > 32:  # bounded (at most 32 x 1 MB for 1 KB records): a file of many lengths keeps the most recent
            _BY_LENGTH.pop(next(iter(_BY_LENGTH)))
    return t


def by_length(lengths: np.ndarray):
    """Group record indices by length: ``(lengths, order, bounds)``; group g is ``order[bounds[g]:bounds[g + 1]]``, in record order.

    Lengths below 65,536 are sorted as 16-bit keys, which numpy sorts by radix (linear time).
    """
    key = lengths.astype(np.uint16) if lengths.size and int(lengths.max()) < 65536 else lengths
    order = np.argsort(key, kind="stable")
    sorted_ = lengths[order]
    cuts = np.flatnonzero(sorted_[1:] != sorted_[:-1]) + 1
    bounds = np.concatenate(([0], cuts, [lengths.size]))
    return sorted_[bounds[:-1]], order, bounds


def crc_many(raw: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """CRC32C of ``raw[s : s + n]`` for each pair of *starts* and *lengths*, grouped by length.

    Args:
        raw: the buffer as a uint8 array.
        starts: int64 offsets.
        lengths: int64 lengths, one per start.

    Returns:
        uint32 CRCs in the order of *starts*.
    """
    out = np.empty(starts.size, dtype=np.uint32)
    if starts.size == 0:
        return out
    uniq, order, bounds = by_length(lengths)
    for g in range(uniq.size):
        idx = order[bounds[g] : bounds[g + 1]]
        out[idx] = crc_equal_length(raw, starts[idx], int(uniq[g]))
    return out
