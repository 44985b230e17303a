"""msprobe's training-state monitor (PyPI ``mindstudio-probe``): its CSV statistics as scalars, its ``anomaly.json`` as markers.

msprobe records what a loss curve cannot say: per-module activations and their
gradients, each weight's gradient before and after the all-reduce, Adam's m and
v, and the weights before and after the update; ``min``, ``max``, ``mean``,
``norm``, ``nans``, ``zeros``... of each, at every step.  Two layouts:

- v1 (``TrainerMon``): ``<out>/<MonDD_HH-MM-SS>-rank<R>-<uuid8>/<kind>_<a>-<b>.csv``, kinds ``actv``,
  ``actv_grad``, ``grad_unreduced``, ``grad_reduced``, ``param_origin``, ``exp_avg``, ``exp_avg_sq``,
  ``param_updated``; columns ``vpp_stage,name,step[,micro_step],<ops>,shape,dtype``.  A row becomes one scalar per
  op, tagged ``<kind>/<name>/<op>`` (``actv/fc1.input/norm``; ``exp_avg/fc1.weight/norm``: the state's own
  ``exp_avg.`` prefix is dropped so a parameter reads alike in every kind).  msprobe 26.2.0 writes the
  native-MindSpore ``exp_avg``/``exp_avg_sq`` rows one column short (no ``vpp_stage``, the step third): such rows,
  in those files and with the state's own name prefix only, are read as meant and the file gets one ``repaired``
  problem; a short row anywhere else is a torn row, skipped and said.
- v2 (``monitor_v2``): ``<out>/rank_<R>/<monitor>_step<a>-<b>.csv``, columns ``vpp_stage,step,module_name,scope
  [,micro_step],<ops>``, tagged ``<monitor>/<scope>/<module_name>/<op>``.

The rank comes from the folder (``-rank<R>-``, ``rank_<R>``); the run is the folder above it.  A non-default
``vpp_stage`` becomes a ``<stage>:`` prefix of the name and a micro step after the first a ``:<micro>`` suffix,
so no row overwrites another.  ``<out>/anomaly_detected/rank<R>/anomaly.json`` (msprobe's online rules) becomes
marker rows of kind ``msprobe <Rule>`` on the tag the CSV rows of that series carry.

Bounded: files are read in chunks of whole lines, a line longer than :data:`MAX_LINE` is skipped and
reported, an ``anomaly.json`` over :data:`MAX_ANOMALY_BYTES` is reported and not read.  A row that is
torn, short or not numbers is skipped and reported; every intact row is kept.
"""

from __future__ import annotations

import csv
import math
import os
import re
import stat
from pathlib import Path

import numpy as np

from ..errors import UnsafeFile
from ..safe_files import loads_json
from ..words import count
from .line_chunks import LineChunks
from .problems import Problem, ProblemKind
from .tables import NO_RANK, MarkerTable, ScalarTable

MSPROBE_CSV, MSPROBE_ANOMALY = "msprobe_csv", "msprobe_anomaly"
KINDS = (MSPROBE_CSV, MSPROBE_ANOMALY)

V1_KINDS = ("actv", "actv_grad", "grad_unreduced", "grad_reduced", "param_origin", "exp_avg", "exp_avg_sq", "param_updated")
"""v1's kinds in the order msprobe meets them in a step: forward, backward, the all-reduce, the optimizer."""
V2_MONITORS = ("module", "weight_grad", "cc", "param", "optimizer")
"""v2's monitors, in the same order."""
_PHASE = {kind: i for i, kind in enumerate(V1_KINDS)} | {m: i for i, m in enumerate(V2_MONITORS)}
# msprobe's own tag suffixes (anomaly.json's tag_name) -> the CSV kind that holds the series
_SUFFIX_KIND = {"actv": "actv", "actv_grad": "actv_grad", "acc_grad": "grad_unreduced", "pre_grad": "grad_unreduced", "post_grad": "grad_reduced"}
_SUFFIX_KIND |= {"param_origin": "param_origin", "param_updated": "param_updated"}

_V1_FILE = re.compile(r"(" + "|".join(sorted(V1_KINDS, key=len, reverse=True)) + r")_(\d{1,18})-(\d{1,18})\.csv")
_V2_FILE = re.compile(r"([A-Za-z0-9_.-]{1,128})_step(\d{1,18})-(\d{1,18})\.csv")
_V1_FOLDER = re.compile(r".{0,64}-rank(\d{1,18})-[0-9A-Za-z]{1,64}")
_RANK_FOLDER = re.compile(r"rank_?(\d{1,18})")
ANOMALY_NAME, ANOMALY_FOLDER = "anomaly.json", "anomaly_detected"
_OP = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
_MESSAGE = re.compile(r"Rule (\w{1,64}) reports anomaly signal in \('([^']{1,4096})', '(\w{1,64})'\)")

HEAD_BYTES = 4096  # what is looked at to tell a msprobe CSV from any other of its name
MAX_LINE = 64 * 1024  # a row of a few dozen numbers and a module path; longer is no msprobe row
CHUNK = 8 << 20  # bytes read at once
MAX_ANOMALY_BYTES = 256 << 20  # an anomaly.json is rewritten whole at every dump: read whole, so bounded
_V1_KEYS = ("vpp_stage", "name", "step")
_V2_KEYS = ("vpp_stage", "step")
_NOT_OPS = frozenset({"vpp_stage", "name", "step", "micro_step", "module_name", "scope", "shape", "dtype"})


def file_kind(path: Path) -> str | None:
    """What *path* is to msprobe, by its name and folder first, then by the head of its bytes; None: not msprobe's.

    The hook discovery calls for every ``.csv`` and ``anomaly.json``: a name that fits and a head that fits.
    """
    name = path.name
    if name == ANOMALY_NAME:
        if path.parent.parent.name != ANOMALY_FOLDER or _RANK_FOLDER.fullmatch(path.parent.name) is None:
            return None
        head = _head(path)
        return MSPROBE_ANOMALY if head is not None and head.lstrip()[:1] in (b"{", b"") else None
    if not name.endswith(".csv"):
        return None
    v1 = _V1_FILE.fullmatch(name)
    if v1 is None and _V2_FILE.fullmatch(name) is None:
        return None
    head = _head(path)
    if head is None:
        return None
    if head == b"":
        return MSPROBE_CSV if v1 is not None else None  # v1 opens every file empty, then writes its header
    header = head.lstrip(b"\xef\xbb\xbf").split(b"\n", 1)[0].rstrip(b"\r").decode("utf-8", "replace").split(",")
    return MSPROBE_CSV if _layout(header) is not None else None


def _head(path: Path) -> bytes | None:
    """The first bytes of a regular file (a FIFO put in its place is opened without waiting, and refused)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, HEAD_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)


def _layout(header: list) -> str | None:
    """``v1`` or ``v2`` for a header msprobe writes, else None."""
    if tuple(header[:3]) == _V1_KEYS:
        return "v1"
    if tuple(header[:2]) == _V2_KEYS and "module_name" in header:
        return "v2"
    return None


def place(path: Path, root: Path) -> tuple[list, int, tuple]:
    """The run (folders relative to *root*), rank and reading order of a msprobe file.

    The rank is the folder's (``...-rank3-<id>``, ``rank_3``, ``anomaly_detected/rank3``); the run is what lies
    above that folder.  Files of a run and rank are read session by session (v1's ``<time>-rank<R>-<id>``
    folders, so a later session's rows of a step replace an earlier one's, as a resumed job's do), then step range
    first, then in msprobe's order within a step.
    """
    folder = path.parent
    stop = folder.parent.parent if path.name == ANOMALY_NAME else folder.parent
    m = _V1_FOLDER.fullmatch(folder.name) or _RANK_FOLDER.fullmatch(folder.name)
    rank = int(m.group(1)) if m else NO_RANK
    if not m and path.name != ANOMALY_NAME:
        stop = folder  # a folder renamed beyond recognition: it is the run
    try:
        parts = list(stop.relative_to(root).parts) if stop != root else []
    except ValueError:
        parts = []
    v = _V1_FILE.fullmatch(path.name) or _V2_FILE.fullmatch(path.name)
    order = (folder.name, int(v.group(2)), _PHASE.get(v.group(1), len(V1_KINDS)), path.name) if v else (folder.name, -1, 0, path.name)
    return parts, rank, order


def site(tag: str) -> str | None:
    """The call a msprobe tag's row came from (``actv/fc1.input`` for ``actv/fc1.input/norm``), None for other tags.

    The first anomaly in a step is the first call msprobe recorded: health orders a step's anomalies by the
    first appearance of their call, so the forward activation comes before the gradients it caused.
    """
    head, _, _ = tag.partition("/")
    if head in _PHASE and tag.count("/") >= 2:
        return tag.rpartition("/")[0]
    return None


FRACTIONS = ("zeros", "nans")
"""msprobe's statistics that are fractions of elements (zero, NaN), not magnitudes."""


def fraction(tag: str) -> bool:
    """Whether *tag* is one of msprobe's element fractions (``actv/fc1.output/zeros``)."""
    return site(tag) is not None and tag.rpartition("/")[2] in FRACTIONS


_TAG_CACHE = 1 << 16  # names whose tags are kept built (a module list of a few thousand, many times over)


def _split(line: str) -> list | None:
    """One CSV row's fields; None when it is no CSV row.

    msprobe quotes one field (the shape, ``"(64, 16)"``): a row with one quoted field standing alone is split
    by hand, anything else by Python's csv module, one line at a time (a stray quote never swallows the lines after it).
    """
    quotes = line.count('"')
    if quotes == 0:
        return line.split(",")
    if quotes == 2:
        a = line.index('"')
        b = line.index('"', a + 1)
        if (a == 0 or line[a - 1] == ",") and (b + 1 == len(line) or line[b + 1] == ","):
            before = line[: a - 1].split(",") if a else []
            after = line[b + 2 :].split(",") if b + 1 < len(line) else []
            return [*before, line[a + 1 : b], *after]
    try:
        return next(csv.reader([line]))
    except (csv.Error, StopIteration):
        return None


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _step(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else None  # ("²".isdigit(), but no int)


class CsvFile:
    """One msprobe CSV as it is read: its header, where a partial last line starts, and what was noticed.

    :meth:`read` is given the open file and returns the new rows; a followed file is read on from where it stopped.
    """

    def __init__(self, path: str):
        self.path = path
        m = _V1_FILE.fullmatch(Path(path).name)
        self.kind = m.group(1) if m else None
        v2 = _V2_FILE.fullmatch(Path(path).name)
        self.monitor = v2.group(1) if v2 and not m else None
        self.header: list | None = None
        self.layout: str | None = None
        self.foreign = False
        self.rows = 0
        self.repaired = 0
        self.said_repaired = False
        self.long_line = False
        self.line = 0  # lines consumed
        self.tags: dict = {}  # tag -> code, for every poll of the file
        self._tags: dict = {}  # (prefix, name) -> its tags, one per statistic
        self._pattern = None  # the header's row pattern (:meth:`_row_pattern`), made at the first chunk read in bulk

    def read(self, f, pos: int, size: int, final: bool) -> tuple[int, list, list]:
        """Rows from *pos* on: ``(new_pos, parts, problems)``, parts as ``(tag codes, steps, values)`` arrays, one per chunk.

        A chunk's points become compact columns before the next chunk is read (25 bytes a point, not a tuple's
        hundred), so a long file costs little more than its table; tags are coded in :attr:`tags`.
        """
        parts, problems = [], []
        skipped: dict = {}  # why -> [rows, first line]
        if self.foreign:
            return pos, parts, problems
        chunks = LineChunks(chunk=CHUNK, max_line=MAX_LINE, pos=pos, in_long_line=self.long_line)
        for _offset, data, long in chunks.read(f, size, final):
            if long:  # no row: skipped, and said
                self.line += 1
                skipped.setdefault(f"a line longer than {MAX_LINE:,} bytes", [0, self.line])[0] += 1
            else:
                self._lines(data, parts, problems, skipped)
            if self.foreign:
                break
        self.long_line = chunks.in_long_line
        for why, (rows, first) in skipped.items():
            problems.append(Problem(self.path, None, ProblemKind.DECODE, f"{count(rows, 'row')} skipped ({why}), the first at line {first:,}"))
        return chunks.pos, parts, problems

    def _columns(self, points: list) -> tuple:
        codes = self.tags
        n = len(points)
        tag = np.fromiter((codes.setdefault(p[0], len(codes)) for p in points), dtype=np.int32, count=n)
        step = np.fromiter((p[1] for p in points), dtype=np.int64, count=n)
        value = np.fromiter((p[2] for p in points), dtype=np.float64, count=n)
        return tag, step, value

    def _lines(self, body: bytes, parts: list, problems: list, skipped: dict) -> None:
        if self.header is None and b"\n" in body:  # the header line alone, then the rows in bulk
            cut = body.index(b"\n") + 1
            self._rows_of(body[:cut], parts, problems, skipped)
            body = body[cut:]
        if self.header is not None and body:
            bulk = self._bulk(body)
            if bulk is not None:
                part, lines, rows = bulk
                self.line += lines
                self.rows += rows
                parts.append(part)
                return
        self._rows_of(body, parts, problems, skipped)

    def _bulk(self, body: bytes) -> tuple | None:
        """``((tag codes, steps, values), lines, rows)`` of a chunk whose every line is a plain row msprobe writes, else None.

        One pattern over the buffer gives the columns (only the name, stage, step and statistics captured; a quoted
        shape allowed); each distinct name is named once. A chunk with any other line (an empty one, a quote
        elsewhere, a row one column short, a step or statistic that is no number, a line too long, a byte not
        ASCII) is read row by row instead, which says what it skipped.
        """
        if not self.ops or not body.isascii():
            return None
        if not body.endswith(b"\n"):
            body += b"\n"
        if self._pattern is None:
            self._pattern = self._row_pattern()
        pattern, order, keys = self._pattern
        groups = pattern.groups
        parts = pattern.split(body)
        lines = body.count(b"\n")
        between = parts[:: groups + 1]  # b"", then each row's line end: anything else is a line of another shape
        if len(between) != lines + 1 or between[0] != b"" or between.count(b"\n") != lines:
            return None
        ends = np.flatnonzero(np.frombuffer(body, dtype=np.uint8) == 10)
        if int(np.diff(ends, prepend=-1).max()) - 1 > MAX_LINE:
            return None
        cols = [parts[1 + g :: groups + 1] for g in order]
        try:
            steps = np.fromiter(map(int, cols[0]), dtype=np.int64, count=lines)
            values = np.empty((lines, len(self.ops)), dtype=np.float64)
            for j in range(len(self.ops)):
                col = cols[1 + j]
                if col[0] == col[-1] and col.count(col[0]) == lines:  # a statistic that never changes (nans, zeros)
                    values[:, j] = float(col[0])
                else:
                    values[:, j] = np.fromiter(map(float, col), dtype=np.float64, count=lines)
        except ValueError:
            return None
        names = list(zip(*cols[1 + len(self.ops) :])) if keys else [()] * lines
        index = {key: k for k, key in enumerate(dict.fromkeys(names))}
        codes = np.empty((len(index), len(self.ops)), dtype=np.int32)
        for key, k in index.items():
            row = [""] * len(self.header)
            for i, text in zip(keys, key):
                row[i] = text.decode()
            prefix, name = self._name(row)
            for j, (_i, op) in enumerate(self.ops):
                codes[k, j] = self.tags.setdefault(f"{prefix}/{name}/{op}", len(self.tags))
        key_code = np.fromiter(map(index.__getitem__, names), dtype=np.int64, count=lines)
        return (codes[key_code].ravel(), np.repeat(steps, len(self.ops)), values.ravel()), lines, lines

    def _row_pattern(self) -> tuple[re.Pattern, list, list]:
        """The header's row as one pattern, which of its groups are the step, the statistics and the name's columns, and those columns."""
        keys = [i for i, c in enumerate(self.header) if c in ("vpp_stage", "name", "module_name", "scope", "micro_step")]
        order = [self.at["step"], *(i for i, _op in self.ops), *keys]
        fields = []
        for i, column in enumerate(self.header):
            if column == "shape":
                field = rb'(?:"[^"\n\r]{0,4096}+"|[^,"\n\r]*+)'
            elif column == "step":
                field = rb"\d{1,18}"  # as _step takes it (no sign, no underscore); spaces around it: row by row
            else:
                field = rb'[^,"\n\r]*+'  # (no CR: the row's own line end must stay outside its last field)
            fields.append(rb"(" + field + rb")" if i in order else field)
        positions = sorted(order)  # findall gives the groups in column order
        return re.compile(rb"^" + rb",".join(fields) + rb"\r?$", re.M), [positions.index(i) for i in order], keys

    def _rows_of(self, body: bytes, parts: list, problems: list, skipped: dict) -> None:
        """Rows one by one (the header included): what :meth:`_bulk` leaves, with what was skipped said."""
        lines = body.decode("utf-8", "replace").split("\n")  # a newline byte is never inside a UTF-8 character
        if lines and lines[-1] == "":
            lines.pop()
        rows = []  # (line number, text)
        for text in lines:
            self.line += 1
            if len(text) > MAX_LINE:
                skipped.setdefault(f"a line longer than {MAX_LINE:,} bytes", [0, self.line])[0] += 1
                continue
            if text.endswith("\r"):
                text = text[:-1]
            if self.header is None:
                self._set_header(text.lstrip("\ufeff"), problems)
                if self.foreign:
                    return
                continue
            if text:
                rows.append((self.line, text))
        self._convert(self._fields(rows, skipped), parts, skipped)
        if self.repaired and not self.said_repaired:
            self.said_repaired = True
            problems.append(
                Problem(
                    self.path,
                    None,
                    ProblemKind.REPAIRED,
                    "rows one column short (msprobe 26.2.0 writes MindSpore's own optimizer state without vpp_stage, the step third): "
                    "read with the name from the first column and the step from the third",
                    "info",
                )
            )

    @staticmethod
    def _fields(rows: list, skipped: dict) -> list:
        """``(line, text)`` as ``(line, fields)``: the chunk by the csv module in one pass where each line is one row,
        else line by line (a stray quote must not swallow the lines after it)."""
        texts = [t for _line, t in rows]
        try:
            parsed = list(csv.reader(texts))
        except csv.Error:
            parsed = []
        if len(parsed) == len(texts):
            return [(line, fields) for (line, _t), fields in zip(rows, parsed)]
        out = []
        for line, text in rows:
            fields = _split(text)
            if fields is None:
                skipped.setdefault("not a CSV row", [0, line])[0] += 1
            else:
                out.append((line, fields))
        return out

    def _convert(self, rows: list, parts: list, skipped: dict) -> None:
        """A chunk's rows as columns: all at once where every value is a number, else row by row."""
        n = len(self.header)
        good, where = [], []
        for line, row in rows:
            if len(row) == n - 1 and self._short_state_row(row):
                row = ["", row[0], row[2], row[1], *row[3:]]  # [name, op0, step, op1...]: the step was inserted third
                self.repaired += 1
            if len(row) != n:
                why = "torn or short" if len(row) < n else "more fields than the header"
                skipped.setdefault(f"{why}: {len(row)} fields where the header has {n}", [0, line])[0] += 1
                continue
            good.append(row)
            where.append(line)
        if not good:
            return
        try:
            parts.append(self._fast(good))
            self.rows += len(good)
            return
        except ValueError:
            pass  # a value or step that is no number somewhere in the chunk: row by row, saying which
        points: list = []
        for line, row in zip(where, good):
            why = self._row(row, points)
            if why:
                skipped.setdefault(why, [0, line])[0] += 1
        if points:
            parts.append(self._columns(points))

    def _short_state_row(self, row: list) -> bool:
        """Whether a row one column short is msprobe 26.2.0's optimizer-state row, and only then (:meth:`_convert` repairs it).

        26.2.0 writes MindSpore's own ``exp_avg``/``exp_avg_sq`` rows without ``vpp_stage``, the step third, under
        the header ``vpp_stage,name,step,<ops>`` and with the state's own prefix (``exp_avg_sq.fc1.weight``).  A
        torn row of any other file (the tail of a line a crash cut, ``c1.weight,0.5,3,...``) has the same count of
        fields; repairing it would make a new series of shifted values, so it is skipped and said.
        """
        return (
            self.layout == "v1"
            and self.kind in ("exp_avg", "exp_avg_sq")
            and self.header[:3] == ["vpp_stage", "name", "step"]
            and "micro_step" not in self.header
            and row[0].startswith(self.kind + ".")
            and _number(row[0]) is None
            and _number(row[1]) is not None
            and _step(row[2]) is not None
        )

    def _fast(self, rows: list) -> tuple:
        """``(tag codes, steps, values)`` of rows whose steps and statistics all parse; ValueError otherwise."""
        if not self.ops:
            raise ValueError("no statistic")
        cols = list(zip(*rows))
        steps = cols[self.at["step"]]
        if not all(map(str.isdigit, steps)) or max(map(len, steps)) > 18:
            raise ValueError("a step that is no whole number")
        steps = np.fromiter(map(int, steps), dtype=np.int64, count=len(rows))
        values = np.empty((len(rows), len(self.ops)), dtype=np.float64)
        for j, (i, _op) in enumerate(self.ops):
            values[:, j] = np.fromiter(map(float, cols[i]), dtype=np.float64, count=len(rows))  # "nan", "inf" as the row-by-row path reads them
        keys: dict = {}
        key_code = np.fromiter((keys.setdefault(self._name(r), len(keys)) for r in rows), dtype=np.int64, count=len(rows))
        codes = np.empty((len(keys), len(self.ops)), dtype=np.int32)
        for (prefix, name), k in keys.items():
            for j, (_i, op) in enumerate(self.ops):
                codes[k, j] = self.tags.setdefault(f"{prefix}/{name}/{op}", len(self.tags))
        return codes[key_code].ravel(), np.repeat(steps, len(self.ops)), values.ravel()

    def _name(self, row: list) -> tuple[str, str]:
        """``(prefix, name)`` of a row: its kind (v1) or monitor and scope (v2), and its name with stage and micro step."""
        at = self.at
        if self.layout == "v1":
            name = row[at["name"]]
            if self.kind in ("exp_avg", "exp_avg_sq") and name.startswith(self.kind + "."):
                name = name[len(self.kind) + 1 :]
            prefix = self.kind or "msprobe"
            default_stage, first_micro = ("0", ""), ("0", "")
        else:
            name = row[at["module_name"]]
            scope = row[at["scope"]] if "scope" in at else ""
            prefix = f"{self.monitor}/{scope}" if scope else str(self.monitor)
            default_stage, first_micro = ("-1", "", "0"), ("0", "1", "")
        stage = row[at["vpp_stage"]].strip()
        if stage not in default_stage:
            name = f"{stage}:{name}"
        if "micro_step" in at and row[at["micro_step"]].strip() not in first_micro:
            name = f"{name}:{row[at['micro_step']].strip()}"
        return prefix, name

    def _set_header(self, text: str, problems: list) -> None:
        header = [c.strip() for c in text.split(",")]
        self.layout = _layout(header)
        if self.layout is None:
            self.foreign = True
            problems.append(Problem(self.path, 0, ProblemKind.FOREIGN, f"not a msprobe monitor CSV: header {text[:80]!r}", "warning"))
            return
        self.header = header
        self.ops = [(i, c) for i, c in enumerate(header) if c not in _NOT_OPS and _OP.fullmatch(c)]
        self.at = {c: i for i, c in enumerate(header)}

    def _row(self, row: list, points: list) -> str | None:
        """Points of one row (of the header's length) into *points*; why it was skipped, or None."""
        step = _step(row[self.at["step"]])
        if step is None:
            return "a step that is no whole number"
        prefix, name = self._name(row)
        tags = self._tags.get((prefix, name))
        if tags is None:
            tags = [f"{prefix}/{name}/{op}" for _i, op in self.ops]
            if len(self._tags) < _TAG_CACHE:
                self._tags[(prefix, name)] = tags
        bad = 0
        for (i, _op), tag in zip(self.ops, tags):
            v = _number(row[i])
            if v is None:
                bad += 1
                continue
            points.append((tag, step, v))
        self.rows += 1
        return None if bad < len(self.ops) or not self.ops else "no number where the header names a statistic"


def read_csv(state: CsvFile, f, pos: int, size: int, final: bool, run: str, rank: int) -> tuple[int, ScalarTable | None, list]:
    """New rows of a msprobe CSV as a scalar table: ``(new_pos, table or None, problems)``.

    Args:
        state: the file's :class:`CsvFile` (kept between polls).
        f: the file, open for binary reading.
        pos: where the last read stopped.
        size: the file's size now.
        final: the last read: a last line without its newline is read too.
        run, rank: written into every row.
    """
    pos, parts, problems = state.read(f, pos, size, final)
    if final and size == 0:
        problems.append(Problem(state.path, 0, ProblemKind.EMPTY, "empty msprobe CSV (msprobe creates it before its first row)", "info"))
    if not parts:
        return pos, None, problems
    tag_code, step, value = (np.concatenate([p[i] for p in parts]) for i in range(3))
    names = np.empty(len(state.tags), dtype=object)
    for t, c in state.tags.items():
        names[c] = t
    n = step.size
    run_col = np.empty(n, dtype=object)
    run_col.fill(run)
    table = ScalarTable(run=run_col, rank=np.full(n, rank, dtype=np.int64), tag=names[tag_code], step=step, wall_time=np.full(n, np.nan), value=value)
    return pos, table, problems


def anomaly_tag(tag_name: str, op: str) -> str:
    """msprobe's series name in ``anomaly.json`` (``0:fc1.input:0/rank0/actv``, ``exp_avg.fc1.weight``) as the CSV rows' tag."""
    parts = tag_name.split("/")
    if len(parts) >= 3 and parts[-1] in _SUFFIX_KIND:
        kind = _SUFFIX_KIND[parts[-1]]
        fields = "/".join(parts[:-2]).split(":")
        stage, name, micro = (fields + ["", ""])[:3] if len(fields) > 1 else ("0", fields[0], "")
        name = name if stage in ("0", "") else f"{stage}:{name}"
        if micro not in ("", "0"):
            name = f"{name}:{micro}"
        return f"{kind}/{name}/{op}"
    for kind in ("exp_avg_sq", "exp_avg"):
        if tag_name.startswith(kind + "."):
            return f"{kind}/{tag_name[len(kind) + 1 :]}/{op}"
    return f"msprobe/{tag_name}/{op}"


def read_anomalies(f, size: int, path: str, run: str, rank: int, final: bool) -> tuple[MarkerTable | None, list, bool]:
    """msprobe's ``anomaly.json`` as markers: ``(table or None, problems, done)``.

    msprobe rewrites the file whole; a file that does not parse yet (being written) is left for the next poll
    (*done* False) unless this is the *final* read, when it is reported.
    """
    if size > MAX_ANOMALY_BYTES:
        return None, [Problem(path, None, ProblemKind.NOT_READ, f"anomaly.json of {size:,} bytes, over {MAX_ANOMALY_BYTES:,}: not read", "warning")], True
    f.seek(0)
    raw = f.read(size)
    try:
        data = loads_json(raw, where=path)
    except UnsafeFile as exc:
        if not final:
            return None, [], False
        return None, [Problem(path, 0, ProblemKind.DECODE, f"anomaly.json could not be read: {exc}")], True
    if not isinstance(data, dict):
        return None, [Problem(path, 0, ProblemKind.FOREIGN, "anomaly.json is not a JSON object of anomalies", "warning")], True
    rows, bad = [], 0
    for value in data.values():
        row = _anomaly_row(value)
        if row is None:
            bad += 1
        else:
            rows.append(row)
    problems = (
        [Problem(path, None, ProblemKind.DECODE, f"{count(bad, 'entry', 'entries')} of anomaly.json not read (no step, tag_name or message of msprobe's form)")]
        if bad
        else []
    )
    if not rows:
        return None, problems, True
    rows.sort(key=lambda r: (r[1], r[2], r[0]))
    n = len(rows)
    run_col = np.empty(n, dtype=object)
    run_col.fill(run)
    table = MarkerTable(
        run=run_col,
        rank=np.full(n, rank, dtype=np.int64),
        tag=[r[0] for r in rows],
        step=[r[1] for r in rows],
        wall_time=np.full(n, np.nan),
        kind=[f"msprobe {r[3]}" for r in rows],
        bytes=np.zeros(n, dtype=np.int64),
    )
    return table, problems, True


def _anomaly_row(value) -> tuple | None:
    """``(tag, step, call_id, rule)`` of one anomaly.json entry, or None."""
    if not isinstance(value, dict):
        return None
    step, tag_name, message, call = value.get("step"), value.get("tag_name"), value.get("message"), value.get("call_id", -1)
    if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step < 1 << 62 or not isinstance(tag_name, str) or not isinstance(message, str):
        return None
    m = _MESSAGE.search(message[:8192])
    if m is None:
        return None
    call = call if isinstance(call, int) and not isinstance(call, bool) and abs(call) < 1 << 62 else -1
    return anomaly_tag(tag_name[:4096], m.group(3)), step, call if call >= 0 else math.inf, m.group(1)


def markers_of(markers) -> MarkerTable:
    """The rows of a marker table that msprobe's rules wrote (``kind`` ``msprobe <Rule>``)."""
    if not len(markers):
        return markers
    return markers.take(np.fromiter((str(k).startswith("msprobe ") for k in markers.kind.tolist()), dtype=bool, count=len(markers)))
