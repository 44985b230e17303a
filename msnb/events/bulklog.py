"""Whole-buffer parsing of the logs written one line per step (MFLossMonitor, dynamic-graph trainer, Megatron-LM).

A chunk is read by one layout's pattern over the buffer, in one of two ways that give the line reader's rows
(:meth:`msnb.events.logs.LogParser.feed`) exactly; property tests check both on generated and hostile logs, so this
is a speed path, never a second meaning:

- split whole (:class:`_Split`): ``re.split`` gives the captured fields as columns and the text between the matches;
  when that text holds none of the reader's markers, no other line is one a reader looks at, and the matches' lines
  and line starts come from its line ends;
- careful (:class:`_Marked`): every marker is placed; a marker line outside the layout, read alone by the line
  reader, must give nothing (mindformers' other INFO lines, a Megatron memory report), else the chunk goes to the
  line reader.

Patterns are linear: literals first, bounded counters, one way to match each number; numbers become floats in C
(``map(float, ...)``), and a capture ``float`` refuses sends the chunk to the line reader.
"""

from __future__ import annotations

import math
import re

import numpy as np

from . import log_layouts, logs

# a number as the layouts print it: digits/point/exponent (float() judges it exactly) or NaN/Inf (as logs._NUM takes them);
# possessive, as the character after a number is never one of its own
_NUM = rb"[-+]?+(?:[0-9.][0-9.eE+-]{0,62}+|(?i:nan|inf(?:inity)?)(?![A-Za-z]))"
# a number matched but not captured (so float() never judges it): logs._NUM's syntax itself, bounded and possessive,
# so a field the line reader would decline ("1.2.3", "2.0.0" in a bracket) is no match and the line its business
_EXACT = (
    rb"[-+]?+(?:[0-9]{1,64}+(?:\.[0-9]{0,64}+)?+(?:[eE][-+]?+[0-9]{1,64}+)?+|\.[0-9]{1,64}+(?:[eE][-+]?+[0-9]{1,64}+)?+"
    rb"|(?i:nan|inf(?:inity)?)(?![A-Za-z]))"
)


def _mf_pattern(keep: tuple) -> re.Pattern:
    """The MFLossMonitor line, capturing epoch, step, steps per epoch, the loss (bracketed, sink) and the fields kept.

    The global norm is printed as numpy prints it: ``[1.23]`` for a one-element tensor, ``1.23`` for a scalar (two captures).
    """
    c = [(rb"(" + _NUM + rb")") if k else _EXACT for k in keep]
    return re.compile(
        rb"\{ ?Epoch:\[ {0,64}+(\d{1,9})/ {0,64}+\d{1,9}\], step:\[ {0,64}+(\d{1,9})/ {0,64}+(\d{1,9})\], "
        rb"loss:(?:\[(" + _NUM + rb")/" + _EXACT + rb"\]| (" + _NUM + rb")), "
        rb"(?:lm_loss: " + c[0] + rb", )?(?:load_balancing_loss: " + c[1] + rb", )?(?:mtp_loss: " + c[2] + rb", )?(?:indexer_loss: " + c[3] + rb", )?"
        rb"per_step_time: " + c[4] + rb"ms, (?:lr: " + c[5] + rb", )?overflow cond: (?:True|False), loss_scale: " + c[6] + rb", "
        rb"global_norm: (?:\[" + c[7] + rb"\]|" + c[7] + rb")(?:, train_throughput_per_npu: " + c[8] + rb"T)?$",
        re.M,
    )


# the MF groups after the loss, in the order the line parser adds them, and their tags (the layout table's)
_MF_TAGS = tuple(log_layouts.MF_FIELDS.values())
_MF_PATTERNS: dict = {}  # which fields are captured -> the pattern
_MF_LONGEST = 4096  # characters an MFLossMonitor match can have: 4 counters and 14 numbers, each bounded, and the names
# what makes the line reader look at a line (logs.LogParser.feed)
# ("epoch" stands for "epoch:" and "epoch time", looked for when it is there)
# characters str.splitlines() breaks at besides \n, as bytes of a UTF-8 file: a chunk holding one is read line by line
# (the line reader breaks only at \n, \r\n and \r, as the line iterator does; the bulk patterns stay out of the rest)
_ASCII_BREAKS = np.array([11, 12, 13, 28, 29, 30], dtype=np.uint8)
_UNICODE_BREAKS = (b"\xc2\x85", b"\xe2\x80\xa8", b"\xe2\x80\xa9")
_DIGIT_AT = (0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18)
_MAX_ODD_LINES = 4096  # marker lines outside the layout tried one by one before the chunk goes to the line reader


def _positions(arr: np.ndarray, literal: bytes) -> np.ndarray:
    """Byte offsets of every occurrence of *literal* in *arr* (no overlap possible for the markers)."""
    n = arr.size - len(literal) + 1
    if n <= 0:
        return np.zeros(0, dtype=np.int64)
    at = np.flatnonzero(arr[:n] == literal[0])
    for j in range(1, len(literal)):
        at = at[arr[at + j] == literal[j]]
    return at


class _Chunk:
    """One chunk's bytes, its line ends and where each marker stands."""

    def __init__(self, body: bytes):
        self.body = body
        self.arr = np.frombuffer(body, dtype=np.uint8)
        self._high = None
        low = np.flatnonzero(self.arr < 32)  # the line ends and any other control byte, in one pass
        kinds = self.arr[low]
        other = low[kinds != 10]
        if (other.size and np.isin(self.arr[other], _ASCII_BREAKS).any()) or (not body.isascii() and any(b in body for b in _UNICODE_BREAKS)):
            self.nl = None  # a \r, or a character str.splitlines() breaks at: such lines are the line reader's business
        else:
            self.nl = low[kinds == 10] if other.size else low

    def positions(self, literal: bytes) -> np.ndarray:
        return _positions(self.arr, literal)

    def line_of(self, positions: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.nl, positions)

    def starts(self, lines: np.ndarray) -> np.ndarray:
        return np.where(lines > 0, self.nl[np.maximum(lines - 1, 0)] + 1, 0)

    def ascii_lines(self, lines: np.ndarray) -> bool:
        """Whether the given lines hold only ASCII (their characters are their bytes)."""
        if self.body.isascii():
            return True
        if self._high is None:
            self._high = np.flatnonzero(self.arr >= 128)
        starts, ends = self.starts(lines), self.nl[lines]
        return bool((np.searchsorted(self._high, ends) == np.searchsorted(self._high, starts)).all())

    def text(self, line: int) -> str:
        start = int(self.starts(np.array([line]))[0])
        return self.body[start : int(self.nl[line])].decode("utf-8", errors="replace")


def parse(parser, body: bytes, wanted=None):
    """``(points, lines)`` of *body* (complete lines), or None when it holds a line this module cannot read as the line reader would.

    *wanted* (tags, or None for all): columns of other tags are not converted.
    """
    if not body:
        return [], 0  # (no line: the rest of a line longer than a chunk, cut)
    if not body.endswith(b"\n"):
        body += b"\n"
    if any(layout.marker in body for layout in log_layouts.table_layouts()):
        return None  # a layout with no whole-chunk reader: its lines are the line reader's
    state = parser.bulk_state()
    quick = _quick(parser, body, wanted)
    if quick is not None:
        return quick
    parser.restore_bulk_state(state)  # a layout may have counted lines before the quick way gave the chunk up
    chunk = _Chunk(body)
    if chunk.nl is None:
        return None
    nl = chunk.nl
    if nl.size and int(np.diff(nl, prepend=-1).max()) > parser.max_line:
        return None
    present = [m for m in log_layouts.markers() if m in body]
    if not present:
        return [], nl.size
    marked = {m: chunk.positions(m) for m in present}
    got, own = ([], np.zeros(0, dtype=np.int64)), None
    for marker, layout in log_layouts.readers_in_order(CHUNK_READERS):
        if marker in marked:
            got = layout(parser, _Marked(chunk, marked[marker], marked.get(log_layouts.PROGRESS_MARKER)), wanted)
            if got is None or got[1].size:
                own = marker
                break
            got = ([], np.zeros(0, dtype=np.int64))
    points = _careful(parser, chunk, marked, own, got, wanted)
    if points is None:
        parser.restore_bulk_state(state)  # the line reader reads the chunk from the state it was given
        return None
    return points[:5] if points else [], nl.size


def _careful(parser, chunk: _Chunk, marked: dict, own, got, wanted):
    """The layout's points with those of the chunk's other marker lines, or None where the line reader must read the chunk.

    Other marker lines must give nothing read alone, except beside Megatron's iteration lines: those set nothing
    another line's reading depends on, so the other lines (validation lines, above all) are read by the line reader
    itself, in order, and their rows merged by line.
    """
    if got is None:
        return None
    points, done = got
    foreign = [chunk.line_of(p) for m, p in marked.items() if m not in (own, log_layouts.PROGRESS_MARKER)]
    if foreign and np.isin(done, np.concatenate(foreign)).any():
        return None  # a line of the layout that also holds another marker: which reading wins is the line reader's call
    odd = np.setdiff1d(np.unique(np.concatenate([chunk.line_of(p) for p in marked.values()])), done, assume_unique=True)
    if odd.size > _MAX_ODD_LINES:
        return None
    busy = [i for i in odd.tolist() if not _inert(chunk.text(i), parser.max_line)]
    if not busy:
        return points
    if own != log_layouts.MEGATRON.marker:
        return None
    return _merge(points, _read_alone(parser, chunk, busy), wanted)


def _read_alone(parser, chunk: _Chunk, lines: list) -> list:
    """``(line, points)`` of the given lines read by the line reader in order, each with its own line number for messages."""
    base = parser.lines
    out = []
    for i in lines:
        parser.lines = base + i  # feed() counts the line first: messages name it base + i + 1, as reading the whole chunk would
        out.append((i, parser.feed([chunk.text(i)])))
    parser.lines = base  # the reader adds the chunk's lines once
    return out


def _merge(points, alone: list, wanted):
    """Bulk rows (with their lines) and rows read alone (of the *wanted* tags), in line order (each line's rows in their own order)."""
    names = list(points[0]) if points else []
    rows = [(i, p) for i, got in alone for p in got if wanted is None or p[0] in wanted]
    if not rows:
        return points
    index: dict = {}
    for k, name in enumerate(names):  # a layout may name a field twice (a damaged line): its first column stands for it
        index.setdefault(name, k)
    for _, p in rows:
        if p[0] not in index:
            index[p[0]] = len(names)
            names.append(p[0])
    extra_tag = np.array([index[p[0]] for _, p in rows], dtype=np.int32)
    extra = [extra_tag, np.array([p[1] for _, p in rows], dtype=np.int64), np.array([p[2] for _, p in rows], dtype=np.float64)]
    extra += [np.array([p[3] for _, p in rows], dtype=np.float64), np.array([i for i, _ in rows], dtype=np.int64)]
    if not points:
        return names, *extra
    cols = [np.concatenate([a, b]) for a, b in zip(points[1:], extra)]
    order = np.argsort(cols[4], kind="stable")  # the bulk rows come first: within a line, their field order stays
    return names, *(c[order] for c in cols)


def _inert(line: str, max_line: int) -> bool:
    """Whether the line reader takes nothing from *line* and keeps nothing of it, whatever it read before (a loss line seen just before included).

    A LossMonitor line whose step overflows gives no row but sets the epoch it counts from: that is no inert line.
    """
    probe = logs.LogParser(max_line)
    probe.last_global = seen = (0, 0.0)
    if probe.feed([line]) or probe.matched or probe.declined or probe.not_last_stage or probe.fieldless[0]:
        return False
    if probe.memory.jobs or probe.memory.refused:  # a memory report's line: no point, but the file's memory rows
        return False
    return probe.epoch is None and not probe.epoch_steps and probe.last_global is seen and probe.generation is None


class _Marked:
    """The careful way to a layout's lines: every marker placed in the chunk, each marker line matched or judged apart (:func:`parse`)."""

    def __init__(self, chunk: _Chunk, marks: np.ndarray, progress: np.ndarray | None):
        self.chunk, self.marks, self.body = chunk, marks, chunk.body
        self.progress = progress  # where mindformers 1.x's "samples/s/p" stands (None: nowhere)

    def lines_of(self, pattern: re.Pattern, marker: bytes, per_line: int, longest: int, free: bool = False, progress: bool = False):
        """``(capture columns, line of each match)``, or None; the arguments after *per_line* are :class:`_Split`'s."""
        cols, lines = _layout(pattern, self.chunk, self.marks, per_line)
        return None if cols is None else (cols, lines)

    def wall(self, lines: np.ndarray) -> np.ndarray:
        chunk = self.chunk
        return wall_times(chunk.body, chunk.arr, chunk.starts(lines), chunk.nl[lines])

    def progress_lines(self):
        """``(text, line_of, positions of "samples/s/p", lines holding "Epoch:[")`` for :func:`_progress_points`, or None when there is none."""
        if self.progress is None or not self.progress.size:
            return None
        return self.body, self.chunk.line_of, self.progress, self.chunk.line_of(self.marks)


# where a chunk is split whole: its head shows first whether lines outside the layout hold a marker
_HEAD = 1 << 16
_MAX_WAIT = 1 << 10  # chunks read the careful way at most, after chunks split whole in vain, before the next try


class _Split:
    """The quick way: the layout's pattern splits the chunk, and the text between its matches holds no marker.

    Then no line outside the layout is one a log reader looks at (mindformers 1.x's progress lines, read with
    the loss line before them, excepted), so no marker needs placing: a match's line is the number of line
    ends before it in that text, and its line's start (for the time) is there too.  The pattern itself must leave
    no room inside a match for a marker the line reader looks for first (Megatron's values may hold "iteration": the
    line reader reads from the first one, the match's own, as the text before a match holds none).
    """

    def __init__(self, parser, body: bytes):
        self.parser, self.body = parser, body
        self.free = False
        self.progress = None

    def lines_of(self, pattern: re.Pattern, marker: bytes, per_line: int, longest: int, free: bool = False, progress: bool = False):
        """``(capture columns, line of each match)``, or None where the chunk is not one layout's lines and inert text.

        Args:
            pattern: the layout's whole-line pattern (``re.M``, no line end inside a match, ASCII unless *free*).
            marker: the layout's own marker, held *per_line* times by each of its lines (the careful way's check).
            longest: the most bytes a match can have (lines must stay within the line reader's ``max_line``).
            free: a match's values are free text (Megatron's, though never holding "Epoch:["): a time could sit in one.
            progress: progress lines may stand between the matches (MFLossMonitor's).
        """
        if free and not self.body.isascii():
            return None  # a value's characters are not its bytes: the careful way looks at each such line
        if free:  # a line with no time before its values is the careful way's (see wall): the first shows what the log prints
            first = pattern.search(self.body)
            if first is not None and math.isnan(logs.wall_time(self.body[self.body.rfind(b"\n", 0, first.start()) + 1 : first.start()].decode())):
                return None
        k = pattern.groups
        head = self.body[: self.body.rfind(b"\n", 0, _HEAD) + 1]
        if len(head) < len(self.body) and not self._inert_between(pattern.split(head)[:: k + 1], progress):
            return None
        parts = pattern.split(self.body)
        between = parts[:: k + 1]
        n = len(between) - 1
        if not self._inert_between(between, progress):
            self._missed()
            return None
        nl = self.nl
        if int(np.diff(nl, prepend=-1).max()) - 1 + longest > self.parser.max_line:
            return None  # a line the line reader would cut: it counts and says them
        self.ends = np.cumsum(np.fromiter(map(len, between[:-1]), dtype=np.int64, count=n))  # where each match stood in the text
        lines = np.searchsorted(nl, self.ends)
        self.starts = np.where(lines > 0, nl[np.maximum(lines - 1, 0)] + 1, 0)
        if not self.text.isascii():  # the text before a match is read for its time by characters: it must be its bytes
            high = np.flatnonzero(self.arr >= 128)
            if (np.searchsorted(high, self.ends) != np.searchsorted(high, self.starts)).any():
                self._missed()
                return None
        self.free = free
        return [parts[1 + j :: k + 1] for j in range(k)], lines

    def _missed(self) -> None:
        """A chunk split whole in vain (the head looked inert): the next 1, then 3, 7... chunks go the careful way.

        A log whose chunks all hold a line outside the layout past their head is split in vain a few times
        only; one odd stretch (a config dump) costs one chunk, not the rest of the file.
        """
        self.parser.bulk_misses += 1
        self.parser.bulk_wait = min(2**self.parser.bulk_misses - 1, _MAX_WAIT)

    def _inert_between(self, between: list, progress: bool) -> bool:
        """Whether the text between the matches holds no marker and no line break but \\n (then kept for :meth:`wall`)."""
        text = b"".join(between)
        markers = log_layouts.markers()
        if any(m in text for m in (markers[:-1] if progress else markers)):
            return False
        if not text.isascii() and any(b in text for b in _UNICODE_BREAKS):
            return False
        arr = np.frombuffer(text, dtype=np.uint8)
        low = np.flatnonzero(arr < 32)
        kinds = arr[low]
        if np.isin(kinds, _ASCII_BREAKS).any():
            return False
        self.text, self.arr, self.nl = text, arr, low[kinds == 10]
        self.progress = progress and log_layouts.PROGRESS_MARKER in text
        return True

    def wall(self, lines: np.ndarray) -> np.ndarray | None:
        """Each match's line time, read from the text before the match (no stamp can begin or end inside one).

        Where values are free text a line with no stamp before its values is left to the careful way (None):
        the line reader would look for one in the values too.
        """
        out = wall_times(self.text, self.arr, self.starts, self.ends)
        return None if self.free and np.isnan(out).any() else out

    def progress_lines(self):
        """``(text, line_of, positions of "samples/s/p", lines holding "Epoch:[")`` in the text between the matches (none of the last there), or None."""
        if not self.progress:
            return None
        at = _positions(self.arr, log_layouts.PROGRESS_MARKER)
        return self.text, lambda positions: np.searchsorted(self.nl, positions), at, np.zeros(0, dtype=np.int64)  # (no "Epoch:[" there)


def _quick(parser, body: bytes, wanted):
    """``(points, lines)`` of a chunk that is one layout's lines and inert text, read by :class:`_Split`; else None."""
    if parser.bulk_wait:
        parser.bulk_wait -= 1
        return None
    head = body[:_HEAD]
    first = [(at, layout) for marker, layout in log_layouts.readers_in_order(CHUNK_READERS) if (at := head.find(marker)) >= 0]
    if not first:
        return None
    where = _Split(parser, body)
    got = min(first, key=lambda f: f[0])[1](parser, where, wanted)
    if got is None or not got[1].size:
        return None
    return got[0][:5], where.nl.size


def _constant(values) -> bool:
    """Whether every capture is the first (three probes first: a column that changes seldom passes them)."""
    return bool(values) and values[-1] == values[0] == values[len(values) // 2] and values.count(values[0]) == len(values)


def _floats(values) -> np.ndarray | None:
    """The captures as float64 (float() judges each, in C), or None when one is no number.

    (Digit columns by numpy, as :func:`_ints` reads counters, measured 4x slower than this for 6-digit floats.)
    """
    try:
        if _constant(values):  # a column that never changes (a counter of skipped steps, a loss scale)
            return np.full(len(values), float(values[0]))
        return np.fromiter(map(float, values), dtype=np.float64, count=len(values))
    except ValueError:
        return None


def _ints(values, width: int) -> np.ndarray:
    """Captures of 1 to *width* ASCII digits as int64, digit columns at numpy speed (no int object a value)."""
    if _constant(values):  # an epoch, a count of steps per epoch
        return np.full(len(values), int(values[0]), dtype=np.int64)
    digits = np.array(values, dtype=f"S{width}").view(np.uint8).reshape(len(values), width)
    out = np.zeros(len(values), dtype=np.int64)
    for j in range(width):
        c = digits[:, j]
        if not c.any():
            break
        out = np.where(c > 0, out * 10 + (c.astype(np.int64) - 48), out)
    return out


def _column(values, n: int):
    """(present mask, numbers) of one optional capture column (b"" where absent); None when a capture is no number."""
    if all(values):
        numbers = _floats(values)
        return None if numbers is None else (np.ones(n, dtype=bool), numbers)
    present = np.fromiter(map(bool, values), dtype=bool, count=n)
    numbers = _floats([v for v in values if v])
    return None if numbers is None else (present, numbers)


def _line_starts(nl: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(line index, line start) of byte positions."""
    idx = np.searchsorted(nl, positions)
    starts = np.where(idx > 0, nl[np.maximum(idx - 1, 0)] + 1, 0)
    return idx, starts


def wall_times(body: bytes, arr: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """:func:`msnb.events.logs.wall_time` of each line (its first 64 characters), the common layouts at numpy speed.

    Most logs print the time at one column: lines whose first digit is at or before the first line's are read
    from a window just wide enough (the stamp and a fraction), the others from the whole 64 characters.
    """
    if not starts.size:
        return np.full(0, np.nan)
    if starts.size > _TIME_BLOCK:  # a block at a time: a line's window is 64 bytes of index and value
        return np.concatenate([wall_times(body, arr, starts[i : i + _TIME_BLOCK], ends[i : i + _TIME_BLOCK]) for i in range(0, starts.size, _TIME_BLOCK)])
    head = arr[starts[0] : min(ends[0], starts[0] + 64)]
    digits = np.flatnonzero((head >= 48) & (head <= 57))
    lead = int(digits[0]) if digits.size else 64
    if lead + 26 >= 64:
        return _stamps(body, arr, starts, ends, 64, None)[0]
    out, done = _stamps_at(arr, starts, ends, lead)
    rest = np.flatnonzero(~done)
    if rest.size:
        out[rest] = _stamps(body, arr, starts[rest], ends[rest], 64, None)[0]
    return out


_TIME_BLOCK = 1 << 15  # lines whose times are read at once
_MINUTE_DIGITS = np.array([0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15])  # YYYY MM DD HH MM: a minute's key, digit by digit
_MINUTE_WEIGHTS = 10 ** np.arange(11, -1, -1, dtype=np.int64)
_FRACTION_WEIGHTS = 10 ** np.arange(5, -1, -1, dtype=np.int64)


def _stamps_at(arr: np.ndarray, starts: np.ndarray, ends: np.ndarray, lead: int):
    """(times, done) of the lines with no digit before column *lead* and a ``YYYY-MM-DD HH:MM:SS[,ffffff]`` stamp at it: fixed columns, no search."""
    limit = np.minimum(ends - starts, 64)
    window = arr[np.minimum(starts[:, None] + np.arange(lead + 26), arr.size - 1)]
    ok = limit >= lead + 19
    if lead:
        ok &= ((window[:, :lead] - 48) > 9).all(axis=1)  # (uint8: a byte below "0" wraps above 9)
    stamp = window[:, lead : lead + 26]
    v = stamp - np.uint8(48)  # each column's digit; above 9 where it is no digit
    ok &= (v[:, _DIGIT_AT] <= 9).all(axis=1)
    ok &= (stamp[:, 4] == 45) & (stamp[:, 7] == 45) & ((stamp[:, 10] == 32) | (stamp[:, 10] == 84)) & (stamp[:, 13] == 58) & (stamp[:, 16] == 58)
    key = np.where(ok, v[:, _MINUTE_DIGITS].astype(np.int64) @ _MINUTE_WEIGHTS, 0)
    second = v[:, 17].astype(np.int64) * 10 + v[:, 18]
    if key.size and (key[1:] >= key[:-1]).all():  # a log's lines in time order: its minutes without a sort
        first = np.concatenate(([True], key[1:] != key[:-1]))
        uniq, inverse = key[first], np.cumsum(first) - 1
    else:
        uniq, inverse = np.unique(key, return_inverse=True)
    minutes = np.array([logs.minute(u) for u in uniq.tolist()])
    t = minutes[inverse] + second
    t[second > 61] = np.nan
    # the fraction: [,.] then 1-6 digits, inside the first 64 characters; 0.123 as 123000 / 10**6 (the same double as 123 / 10**3)
    sep = stamp[:, 19]
    going = (lead + 19 < limit) & ((sep == 44) | (sep == 46))
    inside = lead + 20 + np.arange(6) < limit[:, None]
    run = np.cumprod((v[:, 20:26] <= 9) & inside & going[:, None], axis=1, dtype=np.int64)  # 1 while the digits go on
    value = (v[:, 20:26] * run) @ _FRACTION_WEIGHTS
    has = run[:, 0] > 0
    t[has] += value[has] / 1e6
    t[~ok] = np.nan
    return t, ok


def _stamps(body: bytes, arr: np.ndarray, starts: np.ndarray, ends: np.ndarray, width: int, lead: int | None):
    """(times, done) from the first *width* characters; with *lead*, lines whose first digit is later, or that are no common stamp, are left undone."""
    n = starts.size
    out = np.full(n, np.nan)
    limit = np.minimum(ends - starts, 64)
    cols = np.arange(width)
    window = arr[np.minimum(starts[:, None] + cols, arr.size - 1)]
    inside = cols[None, :] < limit[:, None]
    digit = (window >= 48) & (window <= 57) & inside
    first = np.where(digit.any(axis=1), digit.argmax(axis=1), 64)
    ok = first + 19 <= limit
    if lead is not None:
        ok &= first <= lead
    k = np.minimum(first, width - 20)
    rows = np.arange(n)

    def at(j):
        return window[rows, k + j]

    for j in _DIGIT_AT:
        ok &= (at(j) >= 48) & (at(j) <= 57)
    ok &= (at(4) == 45) & (at(7) == 45) & ((at(10) == 32) | (at(10) == 84)) & (at(13) == 58) & (at(16) == 58)
    if lead is None:
        # not the common layout: the line parser's own function, where a date (dddd-dd-dd) stands somewhere at all
        dash = (window == 45) & inside
        date = digit[:, :-9] & digit[:, 1:-8] & digit[:, 2:-7] & digit[:, 3:-6] & dash[:, 4:-5]
        date &= digit[:, 5:-4] & digit[:, 6:-3] & dash[:, 7:-2] & digit[:, 8:-1] & digit[:, 9:]
        for i in np.flatnonzero(~ok & date.any(axis=1)).tolist():
            out[i] = logs.wall_time(body[starts[i] : ends[i]].decode())
    done = ok if lead is not None else np.ones(n, dtype=bool)
    good = np.flatnonzero(ok)
    if not good.size:
        return out, done

    def number(js):
        v = np.zeros(good.size, dtype=np.int64)
        for j in js:
            v = v * 10 + (window[good, k[good] + j].astype(np.int64) - 48)
        return v

    year, month, day, hour, minute, second = number((0, 1, 2, 3)), number((5, 6)), number((8, 9)), number((11, 12)), number((14, 15)), number((17, 18))
    key = (((year * 100 + month) * 100 + day) * 100 + hour) * 100 + minute
    uniq, inverse = np.unique(key, return_inverse=True)
    minutes = np.array([logs.minute(u) for u in uniq.tolist()])
    t = minutes[inverse] + second
    t[second > 61] = np.nan
    # the fraction: [,.] then 1-6 digits, inside the first 64 characters
    sep_at = k[good] + 19
    within = sep_at < limit[good]
    sep = window[good, np.minimum(sep_at, width - 1)]
    has_sep = within & ((sep == 44) | (sep == 46))
    frac = np.zeros(good.size)
    digits = np.zeros(good.size, dtype=np.int64)
    value = np.zeros(good.size, dtype=np.int64)
    going = has_sep.copy()
    for j in range(1, 7):
        pos = sep_at + j
        c = window[good, np.minimum(pos, width - 1)]
        d = going & (pos < limit[good]) & (c >= 48) & (c <= 57)
        value = np.where(d, value * 10 + (c.astype(np.int64) - 48), value)
        digits += d
        going = d
    has = digits > 0
    frac[has] = value[has] / 10.0 ** digits[has]
    t = np.where(has, t + frac, t)
    out[good] = t
    return out, done


# MFLossMonitor's progress line (mindformers 1.x): "  5.0% |██   | 13.05672 samples/s/p  0:00:11 }"; the whole number
# (nothing of a number just before it) begins within 64 characters of the literal, where logs._MF_PROGRESS looks for it
_PROGRESS = re.compile(rb"(?<![0-9.eE+-])([-+]?+(?:[0-9.][0-9.eE+-]{0,54}+|(?i:nan|inf(?:inity)?)(?![A-Za-z]))) {0,8}samples/s/p")


def _mf(parser, where, wanted):
    """MFLossMonitor lines and their progress lines: ``(points, their line numbers)``, or None."""
    keep = tuple(wanted is None or tag in wanted for tag in _MF_TAGS)
    pattern = _MF_PATTERNS.get(keep) or _MF_PATTERNS.setdefault(keep, _mf_pattern(keep))
    got = where.lines_of(pattern, log_layouts.MF_LOSS_MONITOR.marker, 1, _MF_LONGEST, progress=True)
    if got is None:
        return None
    cols, lines = got
    n = lines.size
    if not n:
        return [], lines
    epoch, step, per_epoch = (_ints(cols[i], 9) for i in (0, 1, 2))
    gstep = (epoch - 1) * per_epoch + step
    if (gstep < 0).any():
        return None
    wall = where.wall(lines)
    out = []
    if wanted is None or "loss" in wanted:
        bracket, sink = cols[3], cols[4]
        loss = _floats(bracket if all(bracket) else sink if not any(bracket) else [a or b for a, b in zip(bracket, sink)])
        if loss is None:
            return None
        out.append(("loss", np.ones(n, dtype=bool), loss))
    at = 5
    for tag in (t for t, k in zip(_MF_TAGS, keep) if k):
        values = cols[at]
        at += 1
        if tag == "global_norm":  # [value] or value
            plain = cols[at]
            at += 1
            values = values if all(values) else plain if not any(values) else [a or b for a, b in zip(values, plain)]
        if not any(values):
            continue
        col = _column(values, n)
        if col is None:
            return None
        out.append((tag, *col))
    before = parser.last_global
    parser.matched += n
    parser.last_global = (int(gstep[-1]), float(wall[-1]))
    progress = where.progress_lines()
    if progress is None:
        return _points(out, lines, gstep, wall), lines
    got = _progress_points(*progress, lines, gstep, wall, before)
    if got is None:
        return None
    plines, pstep, pwall, pvalue = got
    parser.matched += plines.size
    m = plines.size
    out = [(tag, np.concatenate([present, np.zeros(m, dtype=bool)]), values) for tag, present, values in out]
    if wanted is None or "throughput" in wanted:
        out.append(("throughput", np.concatenate([np.zeros(n, dtype=bool), np.ones(m, dtype=bool)]), pvalue))
    every = np.concatenate([lines, plines])
    return _points(out, every, np.concatenate([gstep, pstep]), np.concatenate([wall, pwall])), np.sort(every)


def _progress_points(text: bytes, line_of, progress: np.ndarray, loss_lines: np.ndarray, lines: np.ndarray, gstep: np.ndarray, wall: np.ndarray, before):
    """(line, step, time, samples/s) of the progress lines read as the line reader reads them: the step and time of the loss line before.

    *text* holds every progress line whole, *line_of* gives the chunk's line of a position in it, *progress* the literal's
    positions, *loss_lines* the lines holding "Epoch:[" (a loss line, even one not of the layout, is no progress line:
    the line reader reads it as a loss line first). None where a progress line's number is not read as the line reader reads it.
    """
    marked = line_of(progress)
    if np.unique(marked).size != marked.size:
        return None  # a line with the literal twice: the line reader's business
    matches = list(_PROGRESS.finditer(text))
    at = line_of(np.fromiter((m.end() for m in matches), dtype=np.int64, count=len(matches)))
    if not np.isin(marked[~np.isin(marked, lines) & ~np.isin(marked, loss_lines)], at).all():
        return None  # a progress line whose number this pattern does not take whole (a longer one): the line reader's
    mine = ~np.isin(at, lines) & ~np.isin(at, loss_lines)  # (a loss line holding the literal is read as a loss line)
    plines = at[mine]
    values = _floats([m.group(1) for m, ok in zip(matches, mine.tolist()) if ok])
    if values is None:
        return None
    j = np.searchsorted(lines, plines) - 1  # the loss line before each
    if (j < 0).any() and before is None:
        keep = j >= 0  # no loss line yet: the line reader gives nothing for it
        plines, values, j = plines[keep], values[keep], j[keep]
    step = np.where(j >= 0, gstep[np.maximum(j, 0)], before[0] if before else 0)
    time = np.where(j >= 0, wall[np.maximum(j, 0)], before[1] if before else np.nan)
    return plines, step, time, values


def _layout(pattern: re.Pattern, chunk: _Chunk, marks: np.ndarray, per_line: int):
    """``(capture columns, line of each match)`` of *pattern*'s whole-line matches, or ``(None, None)`` when one is not where the line reader looks.

    Every matched line must hold its marker exactly *per_line* times (the pattern's own), so the
    match starts at the line's first marker, where the line reader starts.
    """
    marked = chunk.line_of(marks)
    k = pattern.groups
    parts = pattern.split(chunk.body)
    between = parts[:: k + 1]
    n = len(between) - 1
    if n and n * per_line == marked.size:
        lines = marked[::per_line]  # every marker line matched, each holding per_line markers
    else:  # some marker lines are not of the layout (they are judged apart): a match's line is the line ends before it
        text = np.frombuffer(b"".join(between), dtype=np.uint8)
        ends = np.cumsum(np.fromiter(map(len, between[:-1]), dtype=np.int64, count=n))
        lines = np.searchsorted(np.flatnonzero(text == 10), ends)
    if lines.size:
        held = np.bincount(marked, minlength=chunk.nl.size)[lines]
        if (held != per_line).any() or not chunk.ascii_lines(lines):
            return None, None
    return [parts[1 + j :: k + 1] for j in range(k)], lines


def _points(cols, idx, gstep, wall):
    """Rows in the line parser's order, by line, then by field: ``(names, tag index, step, time, value, line)``."""
    if not cols:
        return []
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
    return names, np.concatenate(tags)[sort], np.concatenate(steps)[sort], np.concatenate(walls)[sort], np.concatenate(values)[sort], line[sort]


# the layout table's iteration head inside one line: its \\s is [ \\t\\x1f] there (the other whitespace breaks lines or is not
# ASCII), and a step of 18 digits at most (int64 whatever they are)
_MEGATRON_HEAD = log_layouts.megatron_head(space=r"[ \t\x1f]", step=r"(\d{1,18})").encode()
_MEGATRON_AT = log_layouts.MEGATRON.marker


_MEGATRON_VALUE = 4096  # characters of a field's value in a line read in bulk (a longer one: the line reader's)
# a value's characters: no field separator, no line break str.splitlines() knows, and no colon, so no "Epoch:[" (which the
# line reader looks for before Megatron's fields); a value holding one is no number, and its line is the line reader's
_MEGATRON_TEXT = rb"[^|:\n\x00\r\x0b\x0c\x1c-\x1e"


def _megatron_pattern(parts: list, kept: set, tag_of) -> tuple[re.Pattern, int]:
    """The layout of a first iteration line's ``|``-separated parts, capturing the fields whose tag is kept; and its longest match."""
    pattern, longest = [], 9 + 4 * 64 + 18 + 19 + 2  # the head, its spaces bounded
    value = rb"]{0,%d}+" % _MEGATRON_VALUE
    for part in parts:
        name, colon, _ = part.partition(":")
        if not colon:
            pattern.append(_MEGATRON_TEXT + value)
        else:
            kept_text = _MEGATRON_TEXT + rb"]{0,96}+"  # megatron_number reads no longer value: a line with one is the line reader's
            text = _MEGATRON_TEXT + value
            pattern.append(re.escape(name.encode()) + (rb":(" + kept_text + rb")" if tag_of(name) in kept else rb":" + text))
        longest += len(name.encode()) + 2 + _MEGATRON_VALUE
    return re.compile(_MEGATRON_HEAD + rb"\|".join(pattern) + rb"$", re.M), longest


def _megatron_numbers(values, n: int):
    """(present, numbers) of one field as :func:`msnb.events.logs.megatron_number` reads it."""
    numbers = _floats(values)  # (a kept value is at most 96 characters, as megatron_number reads: the pattern says so)
    if numbers is not None:
        return np.ones(n, dtype=bool), numbers
    got = [logs.megatron_number(v.decode()) for v in values]
    return np.fromiter((g is not None for g in got), dtype=bool, count=n), np.array([g for g in got if g is not None], dtype=np.float64)


def _megatron(parser, where, wanted):
    """Megatron-LM iteration lines of the first one's layout: ``(points, their line numbers)``, or None."""
    body = where.body
    first = re.search(_MEGATRON_HEAD, body)
    if first is None:
        return [], np.zeros(0, dtype=np.int64)
    line_end = body.find(b"\n", first.end())
    line_start = body.rfind(b"\n", 0, first.start()) + 1
    parts = body[first.end() : line_end].decode("utf-8", errors="replace").split("|")
    tag_of = parser.megatron[""].tag
    fields = [(name, tag_of(name)) for name, colon, _ in (part.partition(":") for part in parts) if colon]
    tagged = [tag for _, tag in fields if tag is not None]
    per_line = 1 + sum(name.count(_MEGATRON_AT.decode()) for name, _ in fields)
    if not tagged or body[line_start:line_end].count(_MEGATRON_AT) != per_line:
        return None  # a layout read with care by the line reader (no field, or "iteration" in a value or before the head)
    kept = [tag for tag in tagged if wanted is None or tag in wanted]
    for attempt in (kept, tagged):  # the wanted fields; all of them when some line has none of those readable
        if not attempt:
            continue
        pattern, longest = _megatron_pattern(parts, set(attempt), tag_of)
        got = where.lines_of(pattern, _MEGATRON_AT, per_line, longest, free=True)
        if got is None:
            return None
        groups, lines = got
        n = lines.size
        if not n:
            return [], lines
        cols, readable = [], np.zeros(n, dtype=bool)
        for (_, tag), values in zip([f for f in fields if f[1] in attempt], groups[1:]):
            present, numbers = _megatron_numbers(values, n)
            readable |= present
            if wanted is None or tag in wanted:
                cols.append((tag, present, numbers))
        if readable.all():
            break
    else:
        return None  # an iteration line without a readable field: the line reader counts and says it
    gstep = _ints(groups[0], 18)
    wall = where.wall(lines)
    if wall is None:
        return None
    parser.matched += n
    return _points(cols, lines, gstep, wall), lines


# mindformers' dynamic-graph trainer (1.9, 2.0, 2.1): "{ step:[%5d/%5d], [consumed_samples: .., global_batch_size: .., ]loss: ..., name: value[unit], ... }"
_PYNATIVE_HEAD = rb"\{ step:\[ {0,64}+(\d{1,18})/ {0,64}+\d{1,18}\],"
_PYNATIVE_FIELD = re.compile(r" ([a-z][a-z0-9_]{0,63}):( *)(" + _NUM.decode() + r")([A-Za-z]{0,8})(,| \}$)")
_MTP_NAME = re.compile(r"mtp_(\d{1,3})_loss")


# mindformers 2.x's loss field on a non-last pipeline stage (loss_callback.py), then a comma
_NOT_LAST_STAGE = " loss: N/A (non-last PP stage, refer to last stage for real loss)"


def _pynative(parser, where, wanted):
    """Dynamic-graph trainer lines of the first one's layout: ``(points, their line numbers)``, or None.

    A non-last pipeline stage prints every line with ``loss: N/A (...)``: those are a layout of their own, read as
    the line reader reads them (the stage's counters and step time, no loss, no last step kept).
    """
    body = where.body
    first = re.search(_PYNATIVE_HEAD, body)
    if first is None:
        return [], np.zeros(0, dtype=np.int64)
    line_end = body.find(b"\n", first.end())
    rest = body[first.end() : line_end]
    if not rest.isascii() or len(rest) > 2048:
        return None
    rest = rest.decode()
    fields, at, stage = [], 0, False
    while at < len(rest):
        if not stage and rest.startswith(_NOT_LAST_STAGE + ",", at):
            stage = True
            fields.append(("loss", 1, ""))
            at += len(_NOT_LAST_STAGE) + 1
            continue
        m = _PYNATIVE_FIELD.match(rest, at)
        if m is None:
            return None  # not a layout of plain "name: number" fields (N/A, a list, a word): the line reader's
        fields.append((m.group(1), len(m.group(2)), m.group(4)))
        at = m.end()
    names = [name for name, _, _ in fields]
    if "loss" not in names or any(_MEGATRON_AT.decode() in name for name in names):
        return None  # no loss (the line reader's to judge), or a line it could take for Megatron's
    if any(unit in log_layouts.PYNATIVE_FIELDS for _, _, unit in fields):
        return None  # "grad_norm: 1.lr }": the line reader reads "lr" there as a field of its own
    if names[: names.index("loss") if "loss" in names else 0] not in ([], ["consumed_samples", "global_batch_size"]) or len(set(names)) != len(names):
        return None
    if any(spaces > 64 or (name.endswith("_loss") and not spaces) or (i < names.index("loss") and unit) for i, (name, spaces, unit) in enumerate(fields)):
        return None  # where the line reader stops looking for the value, or where "_loss: " would not be seen
    loss_at = names.index("loss")
    generation_2 = stage or parser.generation == 2 or loss_at > 0 or any(name.endswith("_loss") for name in names[loss_at + 1 :])
    mtp = {} if stage else {name: f"mtp-{int(m.group(1))}-loss" for name in names if (m := _MTP_NAME.fullmatch(name))}
    known = dict(log_layouts.STAGE_FIELDS) if stage else {**log_layouts.PYNATIVE_FIELDS, "loss": "loss", **mtp}
    kept = {name for name in names if name in known and (wanted is None or known[name] in wanted)}
    pattern, captured, longest = [_PYNATIVE_HEAD], [], 9 + 2 * 64 + 2 * 18 + 3
    for i, (name, _, unit) in enumerate(fields):
        if stage and i == loss_at:
            pattern.append((b"," if i else b"") + re.escape(_NOT_LAST_STAGE.encode()))
            longest += len(_NOT_LAST_STAGE) + 1
            continue
        number = rb"\d{1,19}" if i < loss_at else None  # the line reader's counters before the loss are digits only
        number = rb"(" + (number or _NUM) + rb")" if name in kept else (number or _EXACT)
        pattern.append((b"," if i else b"") + b" " + name.encode() + b":" + rb" {0,64}+" + number + re.escape(unit.encode()))
        longest += len(name) + len(unit) + 3 + 64 + 64
        if name in kept:
            captured.append(name)
    pattern.append(rb" \}$")
    got = where.lines_of(re.compile(b"".join(pattern), re.M), log_layouts.PYNATIVE.marker, 1, longest + 2)
    if got is None:
        return None
    groups, lines = got
    n = lines.size
    if not n:
        return [], lines
    gstep = _ints(groups[0], 18)
    wall = where.wall(lines)
    values = {}
    for name, col in zip(captured, groups[1:]):
        numbers = _floats(col)
        if numbers is None:
            return None
        values[name] = numbers
    # the line reader's order: the loss, its named fields in its own order, then the mtp_N_loss fields as printed
    if stage:
        order = [name for name in log_layouts.STAGE_FIELDS if name in values]
    else:
        order = [name for name in ("loss", *log_layouts.PYNATIVE_FIELDS) if name in values] + [name for name in names if name in mtp and name in values]
    cols = []
    for name in order:
        cols.append((known[name], np.ones(n, dtype=bool), values[name]))  # as printed (logs.LogParser.take_units)
    if generation_2:
        parser.generation = 2
    elif "throughput" in names and not stage:
        parser.unit_1_9 += n
    parser.matched += n
    if stage:
        parser.not_last_stage += n  # (such a line keeps no last step: the line reader's neither)
    else:
        parser.last_global = (int(gstep[-1]), float(wall[-1]))
    return _points(cols, lines, gstep, wall), lines


# the whole-chunk reader of each layout that has one, tried in table order (:func:`parse`)
CHUNK_READERS = {log_layouts.MEGATRON: _megatron, log_layouts.PYNATIVE: _pynative, log_layouts.MF_LOSS_MONITOR: _mf}
