"""Vectorised decoding of MindSpore histograms, many at once.

A histogram-heavy summary holds thousands of ``Summary.Histogram`` messages of
about a hundred buckets each; walking them bucket by bucket in Python costs a
microsecond a field.  Here every histogram of a buffer is walked in lockstep:
each numpy step reads the next field of *all* of them (one-byte keys, varint
lengths and values, fixed-width numbers), so the Python loop runs once per
field position, not once per field.  The bucket submessages found that way are
then checked and read together: the layout every writer uses (``09 left 11
width 18 count``) is confirmed byte for byte and read with gathers.

Nothing is guessed: a histogram this path cannot vouch for (a multi-byte key,
a bucket of another layout, a varint past 64 bits, anything out of bounds, a
count out of range) is handed back to the exact field-by-field decoder, which
decodes it or raises the same :class:`DecodeError` it always did.

These are MindSpore's proto2 histograms: a statistic left out is unknown (NaN), as in
:func:`msnb.events.mindspore_proto.decode_histogram`.  TensorBoard's proto3 HistogramProto,
where a left-out statistic is 0, never comes here (:mod:`msnb.events.tensorboard_proto`).
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .decoded import Histogram
from .wire import FIXED32, FIXED64, LENGTH, VARINT

_INTS = {2: "nan_count", 3: "pos_inf_count", 4: "neg_inf_count", 8: "count"}
_DOUBLES = {5: "max", 6: "min", 7: "sum"}
_MAX_VARINT = 10
BLOCK = 1 << 15  # buckets read at once: their scratch arrays stay in the CPU cache (measured faster than 1 << 18)
# Lockstep pays per step, whatever the number of messages in it: once this many steps have run, messages
# still walking fewer than MIN_LIVE at a time (one histogram of a million buckets) go to the exact decoder.
ALONE_STEPS = 256
MIN_LIVE = 16


def read_varints(raw: np.ndarray, pos: np.ndarray, end: np.ndarray):
    """Decode one base-128 varint at each of *pos* (each bounded by *end*).

    Returns:
        ``(value uint64, next position, ok)``; *ok* is False where the varint runs
        past its end, is longer than 10 bytes, or does not fit 64 bits.
    """
    n = pos.size
    value = np.zeros(n, dtype=np.uint64)
    nxt = pos.copy()
    ok = np.zeros(n, dtype=bool)
    live = np.arange(n)
    last = raw.size - 1
    for j in range(_MAX_VARINT):
        at = pos[live] + j
        inside = at < end[live]
        live = live[inside]
        at = at[inside]
        byte = raw[np.minimum(at, last)]
        part = (byte & 0x7F).astype(np.uint64)
        if j == _MAX_VARINT - 1:
            fits = byte <= 1  # the tenth byte may only carry bit 63
            live, at, byte, part = live[fits], at[fits], byte[fits], part[fits]
        value[live] |= part << np.uint64(7 * j)
        done = byte < 0x80
        ok[live[done]] = True
        nxt[live[done]] = at[done] + 1
        live = live[~done]
        if not live.size:
            break
    return value, nxt, ok


def gather_f64(raw: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Little-endian doubles at byte offsets *at* (any alignment): rows of an 8-byte sliding window, gathered at once."""
    if not at.size:
        return np.zeros(0, dtype=np.float64)
    return sliding_window_view(raw, 8)[at].view("<f8").ravel()


def _bucket_runs(raw: np.ndarray, starts: np.ndarray, ends: np.ndarray):
    """Follow the leading run of bucket fields (``0a LEN ...``, LEN < 128) of every message, in lockstep.

    Serializers write field 1 first, so this covers nearly every byte of a histogram with a
    handful of numpy steps per bucket; the rest of each message is left to :func:`walk_histograms`.

    Returns:
        ``(buckets, pos, handed_back)``: per step ``(message, a)``, where bucket submessages start;
        where each message's remaining fields start; messages left to the exact decoder (see :data:`ALONE_STEPS`).
    """
    pos = starts.copy()
    handed_back = np.zeros(starts.size, dtype=bool)
    live = np.nonzero(starts < ends)[0]
    at, end = pos[live], ends[live]
    # the key byte and the length byte of a field at every offset, as one little-endian uint16: one gather a step
    pairs = np.ndarray(shape=(raw.size - 1,), dtype="<u2", buffer=raw, strides=(1,))
    clamp = bool(end.size) and int(end.max()) >= raw.size  # a message ending the buffer: its last byte has no pair
    out = []
    while live.size:
        if len(out) >= ALONE_STEPS and live.size < MIN_LIVE:
            handed_back[live] = True
            pos[live] = ends[live]
            break
        pair = pairs[np.minimum(at, pairs.size - 1)] if clamp else pairs[at]
        body = at + 2  # where the bucket's bytes start; its one-byte length sits just before
        nxt = body + (pair >> 8)
        ok = (pair & 0x80FF) == 0x000A  # key 0a, length < 128
        ok &= nxt <= end
        if not ok.all():
            pos[live[~ok]] = at[~ok]
            live, body, end, nxt = live[ok], body[ok], end[ok], nxt[ok]
            if not live.size:  # every message's run ended on this step: no empty step (it would hide the equal-runs case below)
                break
        out.append((live, body))
        at = nxt
        more = at < end
        if not more.all():
            pos[live[~more]] = at[~more]
            live, at, end = live[more], at[more], end[more]
    return out, pos, handed_back


def _message_major(raw: np.ndarray, runs: list, late: list, h: int):
    """Every bucket span, grouped by message and in field order within one: ``(buckets per message, a, b)``.

    *b* is None where every bucket came from the leading runs: each one's length is the byte before *a*.

    The lockstep steps hold the k-th bucket of every message; the usual case (buckets only in the
    leading run, similar counts per message) is regrouped by writing step k into row k of a grid and
    reading it column by column, which needs no sort.  Otherwise a stable sort by message does it.
    """
    depth = len(runs)
    total = sum(m.size for m, _a in runs)
    if not late and depth and total == depth * h:  # as many buckets in every message: step k is column k, written in place
        a = np.stack([a for _m, a in runs], axis=1).ravel()
        runs.clear()
        return np.full(h, depth, dtype=np.int64), a, None
    if not late and depth and depth * h <= 4 * total + 4096:
        grid = np.full((depth, h), -1, dtype=runs[0][1].dtype)
        for k, (m, a) in enumerate(runs):
            if m.size == h:  # every message still in its bucket run: a plain row copy, no scatter
                grid[k] = a
            else:
                grid[k, m] = a
        runs.clear()  # the grid holds them now: free them before the next copies
        flat = grid.T.ravel()
        per = (grid >= 0).sum(axis=0)
        del grid
        a = flat[flat >= 0]
        return per, a, a + raw[a - 1]
    parts = [(m, a, a + raw[a - 1]) for m, a in runs] + late
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return np.zeros(h, dtype=np.int64), empty, empty
    msg = np.concatenate([m for m, _a, _b in parts])
    order = np.argsort(msg.astype(np.int32), kind="stable")
    return np.bincount(msg, minlength=h), np.concatenate([a for _m, a, _b in parts])[order], np.concatenate([b for _m, _a, b in parts])[order]


# A bucket in the usual layout, as it lies in the buffer: 09 <left> 11 <width> 18 <count: one or two bytes>,
# read 22 bytes at a time: ``tail`` holds the count's key, its first two bytes and one byte past (ignored).
_BUCKET = np.dtype(
    {
        "names": ["key_left", "left", "key_width", "width", "tail"],
        "formats": ["u1", "<f8", "u1", "<f8", "<u4"],
        "offsets": [0, 1, 9, 10, 18],
        "itemsize": 22,
    }
)


def _read_buckets(raw: np.ndarray, a: np.ndarray, b: np.ndarray):
    """Left edges, right edges and counts of the buckets ``raw[a[i]:b[i]]``, and which have the usual layout.

    *b* None means ``a[i] + raw[a[i] - 1]`` (a bucket of a leading run, its one-byte length just before it).

    The layout is ``09 <left f64> 11 <width f64> 18 <count varint>`` and nothing else, checked byte
    for byte.  The first 22 bytes of every bucket are copied out with one gather (a view of the buffer
    with a 22-byte item at every byte offset) and read as :data:`_BUCKET` records; blocks of
    :data:`BLOCK` buckets at a time keep the scratch memory small.
    """
    n = a.size
    lefts, rights, counts, ok = np.empty(n), np.empty(n), np.empty(n), np.empty(n, dtype=bool)
    items = np.ndarray(shape=(raw.size - 21,), dtype="V22", buffer=raw, strides=(1,))
    for lo in range(0, n, BLOCK):
        hi = min(n, lo + BLOCK)
        start = a[lo:hi]
        stop = start + raw[start - 1] if b is None else b[lo:hi]  # b None: buckets of the leading run, one-byte length just before
        size = stop - start
        layout = (size >= 20) & (size <= 29) & (start < items.size)
        at = start if layout.all() else np.where(layout, start, 0)  # row 0 (any bytes) where the bucket cannot be read this way
        bucket = items[at].view(_BUCKET)
        tail = bucket["tail"]
        layout &= (bucket["key_left"] == 0x09) & (bucket["key_width"] == 0x11) & ((tail & 0xFF) == 0x18)
        # one byte (size 20): no continuation bit; two bytes (size 21): a continuation bit on the first only
        cont = tail & 0x808000
        two = size == 21
        layout &= np.where(two, cont == 0x8000, (cont & 0x8000) == 0) | (size > 21)
        count = ((tail >> 8) & 0x7F).astype(np.int64)
        count |= ((tail >> 9) & 0x3F80).astype(np.int64) * two  # the second byte's seven bits, where there is one
        wide = np.flatnonzero(layout & (size > 21))
        if wide.size:
            value, end, vok = read_varints(raw, start[wide] + 19, stop[wide])
            count[wide] = value.view(np.int64)
            layout[wide] = vok & (end == stop[wide])
        left = bucket["left"]
        lefts[lo:hi] = left
        with np.errstate(over="ignore", invalid="ignore"):  # huge edges overflow to inf, as in the exact decoder
            rights[lo:hi] = left + bucket["width"]
        counts[lo:hi] = count
        ok[lo:hi] = layout
    return lefts, rights, counts, ok


def walk_histograms(raw: np.ndarray, starts: np.ndarray, ends: np.ndarray):
    """Every field of every message ``raw[starts[i]:ends[i]]``, in lockstep.

    Returns:
        ``(fields, bad)``: *fields* lists, per field position, arrays
        ``(message, number, wire, a, b, value)``; *bad* marks messages to hand to the exact decoder.
    """
    bad = np.zeros(starts.size, dtype=bool)
    live = np.nonzero(starts < ends)[0]
    pos = starts[live].copy()
    end = ends[live]
    out = []
    last = raw.size - 1
    while live.size:
        if len(out) >= ALONE_STEPS and live.size < MIN_LIVE:
            bad[live] = True
            break
        key = raw[np.minimum(pos, last)].astype(np.int64)
        num, wire = key >> 3, key & 7
        a = pos + 1
        b = a.copy()
        value = np.zeros(live.size, dtype=np.uint64)
        good = (key < 0x80) & (num > 0) & (a <= end)
        is_var = good & (wire == VARINT)
        is_len = good & (wire == LENGTH)
        need_varint = is_var | is_len
        if need_varint.any():
            idx = np.nonzero(need_varint)[0]
            v, nxt, vok = read_varints(raw, a[idx], end[idx])
            value[idx] = v
            b[idx] = nxt
            good[idx[~vok]] = False
        length = np.where(is_len, value, 0).astype(np.int64)
        if is_len.any():
            too_long = is_len & (value > np.uint64(1 << 40))
            good &= ~too_long
            a = np.where(is_len, b, a)
            b = np.where(is_len, b + length, b)
        b = np.where(good & (wire == FIXED64), a + 8, b)
        b = np.where(good & (wire == FIXED32), a + 4, b)
        good &= (wire == VARINT) | (wire == LENGTH) | (wire == FIXED64) | (wire == FIXED32)
        good &= b <= end
        bad[live[~good]] = True
        keep = good
        out.append((live[keep], num[keep], wire[keep], a[keep], b[keep], value[keep]))
        pos = b[keep]
        end = end[keep]
        live = live[keep]
        more = pos < end
        live, pos, end = live[more], pos[more], end[more]
    return out, bad


class HistogramColumns:
    """Every histogram of a buffer as columns: statistics as arrays, buckets as views of three flat arrays.

    ``left``, ``right`` and ``counts`` are object arrays holding one view per histogram (no copies), as the
    ``HistogramTable`` columns of the same names; ``bad[i]`` marks histograms the exact decoder must decide
    (their other columns hold nothing to trust).
    """

    __slots__ = ("min", "max", "sum", "count", "nan_count", "pos_inf_count", "neg_inf_count", "left", "right", "counts", "bad")
    STATS = ("min", "max", "sum", "count", "nan_count", "pos_inf_count", "neg_inf_count")

    def __len__(self) -> int:
        return self.bad.size


def histogram_columns(buf, starts, ends) -> HistogramColumns:
    """Decode the ``Summary.Histogram`` messages at ``buf[starts[i]:ends[i]]`` into :class:`HistogramColumns`."""
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    h = starts.size
    out = HistogramColumns()
    if not h:
        for name in _DOUBLES.values():
            setattr(out, name, np.zeros(0))
        for name in _INTS.values():
            setattr(out, name, np.zeros(0, dtype=np.int64))
        out.left, out.right, out.counts = (np.zeros(0, dtype=object) for _ in range(3))
        out.bad = np.zeros(0, dtype=bool)
        return out
    raw = np.frombuffer(buf, dtype=np.uint8)
    if raw.size < 64:  # room for the fixed-offset reads below, whatever a tiny buffer holds
        raw = np.concatenate([raw, np.zeros(64, dtype=np.uint8)])
    if raw.size < 1 << 30:  # offsets as int32: half the memory traffic in every step below (sums stay far below 2**31)
        starts, ends = starts.astype(np.int32), ends.astype(np.int32)
    runs, rest, handed_back = _bucket_runs(raw, starts, ends)
    steps, bad = walk_histograms(raw, rest, ends)
    bad |= handed_back

    stats = {name: np.full(h, np.nan) for name in _DOUBLES.values()}
    stats.update({name: np.zeros(h, dtype=np.int64) for name in _INTS.values()})
    late = []
    for msg, num, wire, a, b, value in steps:
        # each message appears at most once per step, and steps run in field order: the last value wins, as in protobuf
        for n, name in _INTS.items():
            pick = (num == n) & (wire == VARINT)
            stats[name][msg[pick]] = value[pick].view(np.int64)
        for n, name in _DOUBLES.items():
            pick = (num == n) & (wire == FIXED64)
            if pick.any():
                stats[name][msg[pick]] = gather_f64(raw, a[pick])
        pick = (num == 1) & (wire == LENGTH)
        if pick.any():
            late.append((msg[pick], a[pick], b[pick]))
    bad |= stats["count"] < 0  # count_of raises for these: the exact decoder says so

    per, a, b = _message_major(raw, runs, late, h)
    bounds = np.concatenate([[0], np.cumsum(per)])
    lefts, rights, counts, ok = _read_buckets(raw, a, b)
    del a, b
    failed = np.flatnonzero(~ok)
    if failed.size:
        bad[np.searchsorted(bounds, failed, side="right") - 1] = True
    for name, column in stats.items():
        setattr(out, name, column)
    out.left, out.right, out.counts = (_per_message(x, per, bounds) for x in (lefts, rights, counts))
    out.bad = bad
    return out


def decode_histograms(buf, starts, ends):
    """Decode the ``Summary.Histogram`` messages at ``buf[starts[i]:ends[i]]``.

    Args:
        buf: the buffer (bytes, bytearray or memoryview).
        starts, ends: the messages' spans, as sequences of ints.

    Returns:
        A list with one :class:`Histogram` per message, or None where the exact
        decoder (:func:`msnb.events.mindspore_proto.decode_histogram`) must decide.
    """
    cols = histogram_columns(buf, starts, ends)
    if not len(cols):
        return []
    columns = [getattr(cols, name).tolist() for name in ("min", "max", "sum", "count", "nan_count", "pos_inf_count", "neg_inf_count")]
    out = list(map(Histogram, *columns, cols.left, cols.right, cols.counts))
    for i in np.flatnonzero(cols.bad).tolist():
        out[i] = None
    return out


def _per_message(values: np.ndarray, per: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """*values* cut into one view per message (``per[i]`` values each, starting at ``bounds[i]``), as an object array; no copies.

    With as many buckets in every message (the usual case) this is the rows of a 2-D view, made in C.
    """
    if per.size and (per == per[0]).all():
        views = values.reshape(per.size, int(per[0]))
    else:
        edges = bounds.tolist()
        views = [values[lo:hi] for lo, hi in zip(edges[:-1], edges[1:])]
    return np.fromiter(views, dtype=object, count=per.size)
