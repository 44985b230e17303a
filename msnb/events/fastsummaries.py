"""Vectorised decoding of whole MindSpore summary records: envelope, values and histograms, all records at once.

A histogram-heavy summary holds one record per step with a few histograms and scalars in it.  Every such
record has a length of its own (bucket counts are varints), so the layout templates of
:mod:`msnb.events.fastscalars` do not apply, and walking each record's envelope field by field in Python
was most of the time a read took.  Here the three envelope levels (Event, then Summary, then Value) are
walked in lockstep over every record with :mod:`msnb.events.fasthistograms`' field walker, and the
histograms found are decoded together into columns (:func:`histogram_columns`).

Only the plain shape SummaryRecord writes is read this way: an Event of exactly a wall time, an optional
step and one summary; a Summary of values only; a Value of one tag and either one float scalar or one
histogram.  A record of any other shape (the version record, graphs, images, tensors, a field given twice,
a histogram the columnar decoder cannot vouch for) is handed back whole to the exact decoder, which reads it
or reports it as it always did.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .fasthistograms import HistogramColumns, gather_f64, histogram_columns, walk_histograms
from .wire import FIXED32, FIXED64, LENGTH, VARINT


class SummaryColumns:
    """What :func:`decode_summaries` read, as columns.

    ``handled[i]`` says record *i* was read here (the others are the exact decoder's).  Scalars and
    histograms each have ``record`` (index into the records given), ``order`` (the value's position in
    its record: sorting by both gives file order), ``tag`` (index into ``tags``), ``step`` and ``wall``;
    scalars have ``value``, histograms ``histograms`` (:class:`HistogramColumns`, one row each).
    """

    def __init__(self, n: int):
        self.handled = np.zeros(n, dtype=bool)
        self.tags: list[str] = []
        empty_i, empty_f = np.zeros(0, dtype=np.int64), np.zeros(0)
        self.scalar_record = self.scalar_order = self.scalar_tag = self.scalar_step = empty_i
        self.scalar_wall = self.scalar_value = empty_f
        self.hist_record = self.hist_order = self.hist_tag = self.hist_step = empty_i
        self.hist_wall = empty_f
        self.histograms: HistogramColumns | None = None


def _fields_once(raw: np.ndarray, starts: np.ndarray, ends: np.ndarray, known: dict):
    """Walk the messages ``raw[starts[i]:ends[i]]``, which may hold only the fields of *known*, each at most once.

    Args:
        known: ``{(field number, wire type): name}``.

    Returns:
        ``(at, end, value, bad)``: per name, where each message's field starts and ends (-1: absent) and its
        varint value as int64 (0: absent or not a varint); *bad* marks messages with any other field or one
        of these twice (protobuf's last-one-wins is left to the exact decoder) or that do not walk.
    """
    n = starts.size
    steps, bad = walk_histograms(raw, starts, ends)
    at = {name: np.full(n, -1, dtype=np.int64) for name in known.values()}
    end = {name: np.full(n, -1, dtype=np.int64) for name in known.values()}
    value = {name: np.zeros(n, dtype=np.int64) for name in known.values()}
    for msg, num, wire, a, b, v in steps:
        seen = np.zeros(msg.size, dtype=bool)
        for (number, kind), name in known.items():
            pick = (num == number) & (wire == kind)
            seen |= pick
            m = msg[pick]
            bad[m[at[name][m] >= 0]] = True
            at[name][m], end[name][m], value[name][m] = a[pick], b[pick], v[pick].view(np.int64)  # int64 two's complement, as signed64
        bad[msg[~seen]] = True
    return at, end, value, bad


def _envelopes(raw: np.ndarray, starts: np.ndarray, ends: np.ndarray):
    """Each record's wall-time offset, step and summary span; ``bad`` where the Event is not the plain shape.

    A version, a graph, an explain record... are the exact decoder's.
    """
    at, end, value, bad = _fields_once(raw, starts, ends, {(1, FIXED64): "wall", (2, VARINT): "step", (5, LENGTH): "summary"})
    bad |= (at["wall"] < 0) | (at["summary"] < 0)
    return at["wall"], value["step"], at["summary"], end["summary"], bad


def _values(raw: np.ndarray, records: np.ndarray, sum_a: np.ndarray, sum_b: np.ndarray, bad: np.ndarray):
    """Every Summary.Value span of *records*, as ``(record, position, a, b)``; marks records whose Summary holds anything else."""
    steps, walk_bad = walk_histograms(raw, sum_a[records], sum_b[records])
    bad[records[walk_bad]] = True
    parts = []
    for k, (msg, num, wire, a, b, _value) in enumerate(steps):
        value = (num == 1) & (wire == LENGTH)
        bad[records[msg[~value]]] = True
        parts.append((records[msg[value]], np.full(int(value.sum()), k, dtype=np.int64), a[value], b[value]))
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty, empty
    return tuple(np.concatenate([p[j] for p in parts]) for j in range(4))


def _fields_of_values(raw: np.ndarray, a: np.ndarray, b: np.ndarray):
    """Per value: tag span, scalar offset (-1: none), histogram span (-1: none), and ``bad`` where the value is not the plain shape."""
    at, end, _value, bad = _fields_once(raw, a, b, {(1, LENGTH): "tag", (3, FIXED32): "scalar", (9, LENGTH): "hist"})
    bad |= at["tag"] < 0
    bad |= (at["scalar"] >= 0) == (at["hist"] >= 0)  # exactly one of them
    return at["tag"], end["tag"], at["scalar"], at["hist"], end["hist"], bad


SHORT_TAGS = 64  # distinct tag lengths told apart with numpy; more (a damaged or hostile file) are interned one span at a time


def _intern(raw: np.ndarray, tag_a: np.ndarray, tag_b: np.ndarray):
    """Tag spans to ``(tags, index per span)``: each distinct byte string decoded once, as the exact decoder decodes it.

    Spans are grouped by length; the spans of one length become rows of exactly their bytes (one gather per
    byte position, so the scratch is the tags' own bytes), told apart by ``np.unique``.  A buffer with tags of
    more than :data:`SHORT_TAGS` lengths, or longer than that many bytes, is interned one span at a time.
    """
    n = tag_a.size
    index = np.empty(n, dtype=np.int64)
    if not n:
        return [], index
    length = tag_b - tag_a
    widths = np.unique(length)
    if widths.size <= SHORT_TAGS and int(widths[-1]) <= SHORT_TAGS:
        tags: list = []
        for width in widths.tolist():
            at = np.flatnonzero(length == width)
            start = tag_a[at]
            rows = np.empty((at.size, max(width, 1)), dtype=np.uint8)
            rows[:, 0] = 0  # the empty tag: one zero byte, the same in every row
            for j in range(width):
                rows[:, j] = raw[start + j]
            _keys, first, inverse = np.unique(rows.view(f"V{rows.shape[1]}").ravel(), return_index=True, return_inverse=True)
            index[at] = len(tags) + inverse.ravel()
            tags += [_text(raw, int(start[i]), int(start[i]) + width) for i in first.tolist()]
        return tags, index
    ids: dict = {}
    for j, (x, y) in enumerate(zip(tag_a.tolist(), tag_b.tolist())):
        index[j] = ids.setdefault(raw[x:y].tobytes(), len(ids))
    return [key.decode("utf-8", errors="replace") for key in ids], index


def _compact(views: np.ndarray) -> np.ndarray:
    """One view per histogram into a new flat array holding only these buckets (an object array, as given)."""
    if not views.size:
        return views
    sizes = np.fromiter((v.size for v in views), dtype=np.int64, count=views.size)
    flat = np.concatenate(list(views))
    edges = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    return np.fromiter((flat[lo:hi] for lo, hi in zip(edges[:-1], edges[1:])), dtype=object, count=views.size)


def _gather_f32(raw: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Little-endian floats at byte offsets *at* (any alignment), gathered at once: 4 bytes of scratch a value."""
    if not at.size:
        return np.zeros(0, dtype=np.float32)
    return sliding_window_view(raw, 4)[at].view("<f4").ravel()


def _text(raw: np.ndarray, a: int, b: int) -> str:
    return raw[a:b].tobytes().decode("utf-8", errors="replace")  # as wire.text


def decode_summaries(buf, offsets: np.ndarray, lengths: np.ndarray, wanted=None) -> SummaryColumns:
    """Read the records ``buf[offsets[i]:offsets[i] + lengths[i]]`` that have the plain summary shape (see the module).

    Args:
        buf: the buffer.
        offsets, lengths: the records' payloads.
        wanted: real tags to keep, or None for all.  Every histogram of a record is decoded whatever its
            tag, so a record with a damaged histogram goes to the exact decoder (and is reported) as in a read of every tag.

    Returns:
        :class:`SummaryColumns`; records not ``handled`` are left to the exact decoder.
    """
    n = offsets.size
    out = SummaryColumns(n)
    if not n:
        return out
    raw = np.frombuffer(buf, dtype=np.uint8)
    if raw.size < 64:  # as histogram_columns: room for its fixed-offset reads
        raw = np.concatenate([raw, np.zeros(64, dtype=np.uint8)])
    starts = np.asarray(offsets, dtype=np.int64)
    ends = starts + np.asarray(lengths, dtype=np.int64)
    wall_at, step, sum_a, sum_b, bad = _envelopes(raw, starts, ends)
    v_rec, v_pos, v_a, v_b = _values(raw, np.flatnonzero(~bad), sum_a, sum_b, bad)
    tag_a, tag_b, scalar_at, hist_a, hist_b, v_bad = _fields_of_values(raw, v_a, v_b)
    bad[v_rec[v_bad]] = True

    is_hist = hist_a >= 0
    h = np.flatnonzero(is_hist & ~bad[v_rec])
    hists = histogram_columns(buf, hist_a[h], hist_b[h])
    bad[v_rec[h[hists.bad]]] = True  # one histogram it cannot vouch for: the whole record to the exact decoder

    keep = ~bad[v_rec]
    tags, tag_of = _intern(raw, tag_a[keep], tag_b[keep])
    tag_ids = np.full(v_rec.size, -1, dtype=np.int64)
    tag_ids[keep] = tag_of
    if wanted is not None:
        keep &= np.isin(tag_ids, [i for i, t in enumerate(tags) if t in wanted])
    out.handled = ~bad
    out.tags = tags

    s = np.flatnonzero(keep & ~is_hist)
    rec = v_rec[s]
    out.scalar_record, out.scalar_order, out.scalar_tag, out.scalar_step = rec, v_pos[s], tag_ids[s], step[rec]
    out.scalar_wall = gather_f64(raw, wall_at[rec])
    with np.errstate(invalid="ignore"):  # a signalling NaN is widened quietly, as struct widens it on the exact path
        out.scalar_value = _gather_f32(raw, scalar_at[s]).astype(np.float64)

    row = np.full(v_rec.size, -1, dtype=np.int64)
    row[h] = np.arange(h.size)
    k = np.flatnonzero(keep & is_hist)
    rec = v_rec[k]
    out.hist_record, out.hist_order, out.hist_tag, out.hist_step = rec, v_pos[k], tag_ids[k], step[rec]
    out.hist_wall = gather_f64(raw, wall_at[rec])
    picked = HistogramColumns()
    for name in (*HistogramColumns.STATS, "left", "right", "counts", "bad"):
        setattr(picked, name, getattr(hists, name)[row[k]])
    if 2 * k.size < h.size:  # most histograms were of unwanted tags: keep only the wanted buckets, not views into all of them
        for name in ("left", "right", "counts"):
            setattr(picked, name, _compact(getattr(picked, name)))
    out.histograms = picked
    return out
