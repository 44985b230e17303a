"""Records of one length as rows of 64-bit words, one copy per record.

The vectorised checksum and the template match both compare many records of
one length with a reference record.  Gathered as a byte matrix, numpy copies
and compares them a byte at a time; gathered as items of ``ceil(n / 8) * 8``
bytes and viewed as 64-bit words, a record is one copy and its comparison
an eighth of the steps.  A row may begin a few bytes before its record (in
the record's header) or end after it: *lead* says where the record starts in
its row, and callers mask the bytes outside it.
"""

from __future__ import annotations

import numpy as np

WORD = 8


def row_width(n: int) -> int:
    """Bytes in the row of an *n*-byte record (a whole number of words, at least one)."""
    return max(WORD, -(-n // WORD) * WORD)


def gather_rows(raw: np.ndarray, starts: np.ndarray, n: int) -> tuple[np.ndarray, int]:
    """The records ``raw[s : s + n]`` for s in *starts* as rows of uint64 words, and the record's offset in a row.

    Rows end where their record ends when every record has enough bytes before it (a framed
    payload has its 12-byte header), else begin where it begins when every record has enough bytes
    after it; a buffer too short for either is padded in a copy.

    Args:
        raw: the buffer as a uint8 array.
        starts: int64 offsets of the records.
        n: their common length.

    Returns:
        ``(rows, lead)``: a ``(len(starts), row_width(n) // 8)`` uint64 array, and the column (in bytes)
        where each record begins.
    """
    width = row_width(n)
    if starts.size == 0:
        return np.zeros((0, width // WORD), dtype=np.uint64), 0
    lo, hi = int(starts.min()), int(starts.max())
    lead = width - n
    if lo >= lead and hi + n <= raw.size:
        base, first = raw, starts - lead
    elif lo >= 0 and hi + width <= raw.size:
        base, first, lead = raw, starts, 0
    else:  # a tiny buffer: records at both of its ends
        base = np.zeros(raw.size + 2 * width, dtype=np.uint8)
        base[width : width + raw.size] = raw
        first = starts + (width - lead)
    items = np.ndarray((base.size - width + 1,), dtype=f"V{width}", buffer=base, strides=(1,))
    return items[first].view(np.uint64).reshape(starts.size, width // WORD), lead


def placed(values: np.ndarray, n: int, lead: int) -> np.ndarray:
    """A row of *n* bytes of *values* (uint8) at column *lead*, zeros around it, as uint64 words."""
    row = np.zeros(row_width(n), dtype=np.uint8)
    row[lead : lead + n] = values
    return row.view(np.uint64)


def equal_under_mask(rows: np.ndarray, want: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Which rows equal *want* on the bytes *mask* keeps (all words rows of :func:`gather_rows`, :func:`placed`).

    *want* broadcasts against *rows* (one row for all, or one per position of a pattern); words the mask
    leaves out entirely are never read.
    """
    differ = np.zeros(rows.shape[:-1], dtype=np.uint64)
    for j in np.flatnonzero(mask).tolist():
        differ |= (rows[..., j] ^ want[..., j]) & mask[j]
    return differ == 0
