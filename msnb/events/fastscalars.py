"""Vectorised decoding of scalar events by layout templates.

A training job writes the same event shape thousands of times: the same tags
in the same order, only the wall time, the step and the float values change.
So records of one length are decoded like this: decode the first one fully
(:func:`decode_event`), mark the bytes that hold its wall time, step varint and
values as variable, and compare every other record of that length with it on
all remaining bytes at once (numpy).  A record that matches byte for byte has
exactly the template's structure, so its fields are read straight out of the
byte matrix.  Records that do not match are tried against the next template
or decoded one by one; nothing is guessed.

Reading only some tags (*wanted*) uses the same proof: a tag's bytes are among
the fixed ones, so a record that matches a template of other tags holds those
other tags and nothing else; it is matched but none of its values is read.
"""

from __future__ import annotations

import numpy as np

from .crcs import by_length
from .rowwords import equal_under_mask, gather_rows, placed
from .wire import DecodeError

MIN_GROUP = 8  # fewer records than this of one length: decode them one by one
MAX_TEMPLATES = 16  # templates tried per length before falling back for the rest
ROW_BYTES = 1 << 22  # bytes of the record matrix built at once


class ScalarColumns:
    """Scalar points collected from one buffer, in record order."""

    def __init__(self):
        self.record: list = []
        self.order: list = []
        self.tag_ids: list = []
        self.steps: list = []
        self.walls: list = []
        self.values: list = []
        self.tags: list[str] = []
        self._tag_index: dict = {}
        self._one_by_one: tuple = ([], [], [], [], [], [])  # points of add_event, as plain lists until finish() (an array block each would cost more)

    def tag_id(self, tag: str) -> int:
        i = self._tag_index.get(tag)
        if i is None:
            i = self._tag_index[tag] = len(self.tags)
            self.tags.append(tag)
        return i

    def add_block(self, record, order, tag_id, steps, walls, values):
        """Points of one tag at one position in their records (a template's matches)."""
        n = len(record)
        self.add_points(record, np.full(n, order, dtype=np.int64), np.full(n, tag_id, dtype=np.int64), steps, walls, values)

    def add_points(self, record, order, tag_ids, steps, walls, values):
        """Points of many tags at once (*tag_ids* from :meth:`tag_id`, one per point)."""
        self.record.append(np.asarray(record, dtype=np.int64))
        self.order.append(np.asarray(order, dtype=np.int64))
        self.tag_ids.append(np.asarray(tag_ids, dtype=np.int64))
        self.steps.append(np.asarray(steps, dtype=np.int64))
        self.walls.append(np.asarray(walls, dtype=np.float64))
        with np.errstate(invalid="ignore"):  # a signalling NaN float32 is widened quietly, as struct widens it one by one
            self.values.append(np.asarray(values, dtype=np.float64))

    def add_event(self, record: int, ev, wanted=None) -> None:
        records, orders, tag_ids, steps, walls, values = self._one_by_one
        for j, (tag, value, _off, _fmt) in enumerate(ev.scalars):
            if wanted is not None and tag not in wanted:
                continue
            records.append(record)
            orders.append(j)
            tag_ids.append(self.tag_id(tag))
            steps.append(ev.step)
            walls.append(ev.wall_time)
            values.append(value)

    def finish(self):
        """(tags, tag_ids, steps, walls, values) sorted by record, then position in the record."""
        records, orders, tag_ids, steps, walls, values = self._one_by_one
        if records:
            self.add_points(records, orders, tag_ids, steps, walls, values)
            self._one_by_one = ([], [], [], [], [], [])
        if not self.record:
            empty_i = np.zeros(0, dtype=np.int64)
            return self.tags, empty_i, empty_i, np.zeros(0), np.zeros(0)
        record = np.concatenate(self.record)
        order = np.concatenate(self.order)
        idx = np.lexsort((order, record))
        return (
            self.tags,
            np.concatenate(self.tag_ids)[idx],
            np.concatenate(self.steps)[idx],
            np.concatenate(self.walls)[idx],
            np.concatenate(self.values)[idx],
        )


def _match(raw, starts: np.ndarray, n: int, template_start: int, ev, keep=None):
    """Which rows share *ev*'s layout, and their (steps, walls, [values...]).

    *keep* lists the positions in ``ev.scalars`` whose values are wanted (default all);
    with none wanted only the match is computed (steps, walls and values come back empty).
    """
    keep = range(len(ev.scalars)) if keep is None else keep
    variable = np.zeros(n, dtype=bool)
    w = ev.wall_offset
    variable[w : w + 8] = True
    if ev.step_span is not None:
        s, k = ev.step_span
        variable[s : s + k] = True
    for _tag, _value, off, fmt in ev.scalars:
        variable[off : off + (4 if fmt == "f4" else 8)] = True
    fixed = np.where(variable, 0, 0xFF).astype(np.uint8)
    template = raw[template_start : template_start + n]

    rows = max(1, ROW_BYTES // max(n, 1))
    ok_parts, step_parts, wall_parts = [], [], []
    value_parts = {j: [] for j in keep}
    for lo in range(0, starts.size, rows):
        words, lead = gather_rows(raw, starts[lo : lo + rows], n)  # compared a word at a time, on the fixed bytes only
        ok = equal_under_mask(words, placed(template, n, lead), placed(fixed, n, lead))
        m = words.view(np.uint8)[:, lead : lead + n]
        if ev.step_span is not None:
            s, k = ev.step_span
            sb = m[:, s : s + k]
            ok &= sb[:, k - 1] < 0x80
            if k > 1:
                ok &= (sb[:, : k - 1] >= 0x80).all(axis=1)
        ok_parts.append(ok)
        if not keep:
            continue
        mk = m if ok.all() else m[ok]
        if ev.step_span is not None:
            s, k = ev.step_span
            acc = np.zeros(mk.shape[0], dtype=np.uint64)
            for j in range(k):
                acc |= (mk[:, s + j] & 0x7F).astype(np.uint64) << np.uint64(7 * j)
            step_parts.append(acc.view(np.int64))
        else:
            step_parts.append(np.zeros(mk.shape[0], dtype=np.int64))
        wall_parts.append(np.ascontiguousarray(mk[:, w : w + 8]).view("<f8").ravel())
        for j in keep:
            _tag, _value, off, fmt = ev.scalars[j]
            width = 4 if fmt == "f4" else 8
            value_parts[j].append(np.ascontiguousarray(mk[:, off : off + width]).view("<" + fmt).ravel())
    ok = np.concatenate(ok_parts)
    if not keep:
        return ok, None, None, {}
    return ok, np.concatenate(step_parts), np.concatenate(wall_parts), {j: np.concatenate(v) for j, v in value_parts.items()}


def decode_records(buf, offsets: np.ndarray, lengths: np.ndarray, decode_event, finish=None, *, wanted=None, bulk=None):
    """Decode every payload; returns ``(ScalarColumns, generic, errors, bulk_columns)``.

    *finish*, when given, is called as ``finish(buf, generic)`` once every record
    is decoded and returns ``(generic, errors)``: the step that decodes what
    *decode_event* deferred (histograms, all at once) and drops the records it could not.

    *bulk*, when given, is called as ``bulk(buf, offsets, lengths, wanted)`` on the records no
    template read (too few of one length, or not pure scalars) before any of them is decoded one by
    one, and returns a :class:`msnb.events.fastsummaries.SummaryColumns` whose record indices refer to
    the records given it; what it does not handle is decoded one by one.  *bulk_columns* is that result with its record
    indices made indices into *offsets* (None without *bulk*, or when every record had a template).

    With *wanted* (a set of real tags), only those tags' scalars are collected; records
    matching a template that holds none of them are not read past the match.

    *generic* is a list of ``(record_index, DecodedEvent)`` for records not
    handled by a template or by *bulk* (they may carry histograms, images, versions...;
    their scalars are already in the columns);
    *errors* is a list of ``(record_index, DecodeError)``.
    """
    cols = ScalarColumns()
    generic: list = []
    errors: list = []
    if offsets.size == 0:
        return cols, generic, errors, None
    raw = np.frombuffer(buf, dtype=np.uint8)
    leftover: list = []  # records left for *bulk*, then one by one
    uniq, order, bounds = by_length(lengths)
    for g in range(uniq.size):
        n = int(uniq[g])
        remaining = order[bounds[g] : bounds[g + 1]]
        templates = 0
        while remaining.size:
            if bulk is not None and (remaining.size < MIN_GROUP or templates >= MAX_TEMPLATES):
                leftover.append(remaining)
                break
            i0 = int(remaining[0])
            a = int(offsets[i0])
            try:
                ev = decode_event(buf, a, a + n)
            except (DecodeError, IndexError, ValueError, OverflowError, RecursionError) as exc:
                errors.append((i0, _as_decode_error(exc)))
                remaining = remaining[1:]
                continue
            if remaining.size < MIN_GROUP or templates >= MAX_TEMPLATES or not ev.pure_scalar:
                generic.append((i0, ev))
                remaining = remaining[1:]
                if bulk is not None and remaining.size:  # not a template: the rest of this length goes to bulk with the other leftovers
                    leftover.append(remaining)
                    break
                continue
            starts = offsets[remaining]
            keep = [j for j, s in enumerate(ev.scalars) if wanted is None or s[0] in wanted]
            ok, steps, walls, values = _match(raw, starts, n, a, ev, keep)
            templates += 1
            if not ok[0]:  # cannot happen for a well-formed template; never loop on it
                generic.append((i0, ev))
                remaining = remaining[1:]
                continue
            matched = remaining[ok]
            for j in keep:
                cols.add_block(matched, j, cols.tag_id(ev.scalars[j][0]), steps, walls, values[j])
            if matched.size < 2:
                templates = MAX_TEMPLATES  # layouts vary record to record here: stop trying
            remaining = remaining[~ok]
    columns = None
    if leftover:
        rest = np.sort(np.concatenate(leftover))
        columns = bulk(buf, offsets[rest], lengths[rest], wanted)
        ids = np.asarray([cols.tag_id(t) for t in columns.tags], dtype=np.int64)
        columns.scalar_record = rest[columns.scalar_record]
        cols.add_points(columns.scalar_record, columns.scalar_order, ids[columns.scalar_tag], columns.scalar_step, columns.scalar_wall, columns.scalar_value)
        columns.hist_record = rest[columns.hist_record]
        for i0 in rest[~columns.handled].tolist():
            a = int(offsets[i0])
            try:
                generic.append((i0, decode_event(buf, a, a + int(lengths[i0]))))
            except (DecodeError, IndexError, ValueError, OverflowError, RecursionError) as exc:
                errors.append((i0, _as_decode_error(exc)))
    if finish is not None and generic:
        generic, late = finish(buf, generic)
        errors.extend(late)
    for i, ev in generic:
        cols.add_event(i, ev, wanted)
    errors.sort(key=lambda item: item[0])  # in file order, however the records were grouped to decode
    return cols, generic, errors, columns


def _as_decode_error(exc: Exception) -> DecodeError:
    return exc if isinstance(exc, DecodeError) else DecodeError(str(exc), 0)
