"""Whole-buffer parsing of the logs written one line per step (MFLossMonitor, Megatron-LM): patterns over the buffer, numbers by numpy.

A chunk is parsed here only when every line that any log reader would look at is of one layout this
module knows exactly; otherwise :meth:`msnb.events.logs.LogParser.feed` reads it line by line.  Both
give the same rows (a property test checks it on generated logs), so this is a speed path, never a
second meaning.  Patterns are linear: literals first, bounded counters, one way to match each number.
"""

from __future__ import annotations

import re

import numpy as np

from . import logs

_NUM = logs._NUM.encode()
_MF = re.compile(
    rb"\{ ?Epoch:\[ *(\d{1,9})/ *(\d{1,9})\], step:\[ *(\d{1,9})/ *(\d{1,9})\], loss:(?:\[(" + _NUM + rb")/(" + _NUM + rb")\]| (" + _NUM + rb")), "
    rb"(?:lm_loss: (" + _NUM + rb"), )?(?:load_balancing_loss: (" + _NUM + rb"), )?(?:mtp_loss: (" + _NUM + rb"), )?(?:indexer_loss: (" + _NUM + rb"), )?"
    rb"per_step_time: (" + _NUM + rb")ms, (?:lr: (" + _NUM + rb"), )?overflow cond: (?:True|False), loss_scale: (" + _NUM + rb"), "
    rb"global_norm: \[(" + _NUM + rb")\](?:, train_throughput_per_npu: (" + _NUM + rb")T)?$",
    re.M,
)
# the MF groups after the loss, in the order the line parser adds them, and their tags
_MF_TAGS = ("lm_loss", "load_balancing_loss", "mtp_loss", "indexer_loss", "step_time_ms", "lr", "loss_scale", "global_norm", "model-flops-throughput-per-npu")
_MARKERS = (b"{ step:[", b"epoch:", b"epoch time", b"samples/s/p", b"iteration", b"Epoch:[")
_DIGIT_AT = (0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18)


def parse(parser, body: bytes):
    """``(points, lines)`` of *body* (complete lines), or None when it holds a line this module does not know."""
    if not body.isascii() or b"\r" in body:
        return None
    if not body.endswith(b"\n"):
        body += b"\n"
    arr = np.frombuffer(body, dtype=np.uint8)
    nl = np.flatnonzero(arr == 10)
    if nl.size and int(np.diff(nl, prepend=-1).max()) > parser.max_line:
        return None
    counts = {m: body.count(m) for m in _MARKERS}
    if counts[b"{ step:["] or counts[b"epoch:"] or counts[b"epoch time"] or counts[b"samples/s/p"]:
        return None
    if counts[b"Epoch:["] and not counts[b"iteration"]:
        return _mf(parser, body, arr, nl, counts[b"Epoch:["])
    if counts[b"iteration"] and not counts[b"Epoch:["]:
        return _megatron(parser, body, arr, nl, counts[b"iteration"])
    if not any(counts.values()):
        return [], nl.size
    return None


def _floats(values: list) -> np.ndarray:
    return np.array(values, dtype=np.bytes_).astype(np.float64)


def _line_starts(nl: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(line index, line start) of byte positions."""
    idx = np.searchsorted(nl, positions)
    starts = np.where(idx > 0, nl[np.maximum(idx - 1, 0)] + 1, 0)
    return idx, starts


def wall_times(body: bytes, arr: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """:func:`msnb.events.logs._wall_time` of each line (its first 64 characters), the common layouts at numpy speed."""
    n = starts.size
    out = np.full(n, np.nan)
    if not n:
        return out
    limit = np.minimum(ends - starts, 64)
    cols = np.arange(64)
    window = arr[np.minimum(starts[:, None] + cols, arr.size - 1)]
    inside = cols[None, :] < limit[:, None]
    digit = (window >= 48) & (window <= 57) & inside
    first = np.where(digit.any(axis=1), digit.argmax(axis=1), 64)
    ok = first + 19 <= limit
    k = np.minimum(first, 44)
    rows = np.arange(n)

    def at(j):
        return window[rows, k + j]

    for j in _DIGIT_AT:
        ok &= (at(j) >= 48) & (at(j) <= 57)
    ok &= (at(4) == 45) & (at(7) == 45) & ((at(10) == 32) | (at(10) == 84)) & (at(13) == 58) & (at(16) == 58)
    slow = np.flatnonzero(~ok)
    for i in slow.tolist():  # not the common layout: the line parser's own function
        out[i] = logs._wall_time(body[starts[i] : ends[i]].decode())
    good = np.flatnonzero(ok)
    if not good.size:
        return out

    def number(js):
        v = np.zeros(good.size, dtype=np.int64)
        for j in js:
            v = v * 10 + (window[good, k[good] + j].astype(np.int64) - 48)
        return v

    year, month, day, hour, minute, second = number((0, 1, 2, 3)), number((5, 6)), number((8, 9)), number((11, 12)), number((14, 15)), number((17, 18))
    key = (((year * 100 + month) * 100 + day) * 100 + hour) * 100 + minute
    uniq, inverse = np.unique(key, return_inverse=True)
    minutes = np.array(
        [logs._minute(f"{u // 10**8:04d}-{u // 10**6 % 100:02d}-{u // 10**4 % 100:02d} {u // 100 % 100:02d}:{u % 100:02d}") for u in uniq.tolist()]
    )
    t = minutes[inverse] + second
    t[second > 61] = np.nan
    # the fraction: [,.] then 1-6 digits, inside the first 64 characters
    sep_at = k[good] + 19
    within = sep_at < limit[good]
    sep = window[good, np.minimum(sep_at, 63)]
    has_sep = within & ((sep == 44) | (sep == 46))
    frac = np.zeros(good.size)
    digits = np.zeros(good.size, dtype=np.int64)
    value = np.zeros(good.size, dtype=np.int64)
    going = has_sep.copy()
    for j in range(1, 7):
        pos = sep_at + j
        c = window[good, np.minimum(pos, 63)]
        d = going & (pos < limit[good]) & (c >= 48) & (c <= 57)
        value = np.where(d, value * 10 + (c.astype(np.int64) - 48), value)
        digits += d
        going = d
    has = digits > 0
    frac[has] = value[has] / 10.0 ** digits[has]
    t = np.where(has, t + frac, t)
    out[good] = t
    return out


def _mf(parser, body: bytes, arr, nl, expected: int):
    matches = list(_MF.finditer(body))
    if len(matches) != expected:
        return None
    n = len(matches)
    groups = list(zip(*(m.groups() for m in matches)))
    positions = np.fromiter((m.start() for m in matches), dtype=np.int64, count=n)
    idx, starts = _line_starts(nl, positions)
    if np.unique(idx).size != n:
        return None
    epoch, step, per_epoch = (np.array(groups[i], dtype=np.bytes_).astype(np.int64) for i in (0, 2, 3))
    gstep = (epoch - 1) * per_epoch + step
    if (gstep < 0).any():
        return None
    wall = wall_times(body, arr, starts, nl[idx])
    loss = _floats([a if a is not None else b for a, b in zip(groups[4], groups[6])])
    cols = [("loss", np.ones(n, dtype=bool), loss)]
    for tag, values in zip(_MF_TAGS, groups[7:]):
        present = np.fromiter((v is not None for v in values), dtype=bool, count=n)
        if present.any():
            cols.append((tag, present, _floats([v for v in values if v is not None])))
    parser.matched += n
    parser.last_global = (int(gstep[-1]), float(wall[-1]))
    return _points(cols, idx, gstep, wall), nl.size


def _points(cols, idx, gstep, wall):
    """Rows in the line parser's order: by line, then by field."""
    tags, lines, order, steps, walls, values = [], [], [], [], [], []
    for k, (_tag, present, vals) in enumerate(cols):
        where = np.flatnonzero(present)
        tags.append(np.full(where.size, k, dtype=np.int32))
        lines.append(idx[where])
        order.append(np.full(where.size, k, dtype=np.int32))
        steps.append(gstep[where])
        walls.append(wall[where])
        values.append(vals)
    line = np.concatenate(lines)
    sort = np.lexsort((np.concatenate(order), line))
    names = [c[0] for c in cols]
    return names, np.concatenate(tags)[sort], np.concatenate(steps)[sort], np.concatenate(walls)[sort], np.concatenate(values)[sort]


_MEGATRON_HEAD = rb"iteration\s{0,64}(\d{1,18})\s{0,64}/\s{0,64}\d{1,19}\s{0,64}\|"


def _megatron(parser, body: bytes, arr, nl, expected: int):
    first = re.search(_MEGATRON_HEAD, body)
    if first is None:
        return None
    line_end = body.find(b"\n", first.end())
    rest = body[first.end() : line_end].decode()
    line_start = body.rfind(b"\n", 0, first.start()) + 1
    if body[line_start : first.start()].count(b"iteration"):
        return None
    parts = rest.split("|")
    pattern, names = [], []
    for part in parts:
        name, colon, _ = part.partition(":")
        if colon:
            pattern.append(re.escape(name.encode()) + rb":([^|\n]*)")
            names.append(name)
        else:
            pattern.append(rb"[^|:\n]*")
    layout = re.compile(_MEGATRON_HEAD + rb"\|".join(pattern) + rb"$", re.M)
    per_line = body[line_start:line_end].count(b"iteration")
    matches = list(layout.finditer(body))
    n = len(matches)
    if not n or n * per_line != expected:
        return None
    positions = np.fromiter((m.start() for m in matches), dtype=np.int64, count=n)
    idx, starts = _line_starts(nl, positions)
    if np.unique(idx).size != n:
        return None
    # the match must start at the line's first "iteration", as the line parser takes it
    heads = np.fromiter((body.find(b"iteration", s) for s in starts.tolist()), dtype=np.int64, count=n)
    if (heads != positions).any():
        return None
    groups = list(zip(*(m.groups() for m in matches)))
    gstep = np.array(groups[0], dtype=np.bytes_).astype(np.int64)
    wall = wall_times(body, arr, starts, nl[idx])
    cols = []
    for name, values in zip(names, groups[1:]):
        tag = parser.megatron[""].tag(name)
        if tag is None:
            continue
        try:
            numbers = np.array(values, dtype=np.bytes_)
            numbers = numbers.astype(np.float64) if max(map(len, values)) <= 96 else None
        except ValueError:
            numbers = None
        if numbers is None:
            got = [logs.megatron_number(v.decode()) for v in values]
            present = np.fromiter((g is not None for g in got), dtype=bool, count=n)
            numbers = np.array([g for g in got if g is not None], dtype=np.float64)
        else:
            present = np.ones(n, dtype=bool)
        cols.append((tag, present, numbers))
    if not cols:
        return None
    parser.matched += n
    return _points(cols, idx, gstep, wall), nl.size
