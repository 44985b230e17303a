"""Scalars from files that other tools write as tables: Hugging Face's ``trainer_state.json``, CSV and JSON Lines.

A migrated model is judged against the run it was migrated from, and that run may come as Hugging Face Trainer's
``trainer_state.json`` or as a table exported by hand (Megatron-LM's training log is a log: :mod:`msnb.events.logs`).
These readers turn each into the same :class:`~msnb.events.tables.ScalarTable` that :func:`msnb.events.read` returns,
with the tags as the file wrote them (``loss``, ``grad_norm``, ``learning_rate``...); what they mean is
:mod:`msnb.events.tags`' business.  :func:`msnb.events.read` calls them through discovery's format table.

Formats:

- **Hugging Face** ``trainer_state.json``: each ``log_history`` entry with a ``step``
  gives one point per numeric key (``loss``, ``grad_norm``, ``learning_rate``, ``eval_loss``...).
- **Tables**: CSV with a header holding ``step``, ``tag`` and ``value`` (``msnb export``'s
  ``run,rank,tag,step,wall_time,value`` included), or a wide CSV of ``step`` and one
  column per tag; JSON Lines objects with ``step``, ``tag`` and ``value``.

Reading is bounded: text is streamed in :data:`CHUNK` pieces and a line parsed by
its first :data:`MAX_LINE` characters; a JSON file larger than
:data:`MAX_JSON_BYTES` is refused.  A line or entry that cannot be read becomes a
:class:`~msnb.events.problems.Problem` naming the file and line; nothing here raises
on bad data.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from dataclasses import dataclass

import numpy as np

from ..words import count
from .line_chunks import LineChunks, lines_at
from .logs import megatron_number as number_in  # a field's number, a unit after it allowed: one parser for logs and tables
from .problems import Problem, ProblemKind
from .reader import ReadResult
from .tables import NO_RANK, ScalarTable

HF_STATE, TABLE_CSV, TABLE_JSONL = "trainer-state", "csv", "jsonl"
MAX_LINE = 1 << 20  # characters of a line that are parsed (a wide table row of 4,000 columns is 30 KB), as for logs
CHUNK = 8 << 20  # bytes of text read at a time
MAX_JSON_BYTES = 96 << 20  # a parsed JSON document takes about 6 bytes a byte: a larger trainer_state.json is refused, named
MAX_TABLE_POINTS = 2_000_000  # points one table file gives (about 130 bytes each while read); a wider table: ask for fewer tags
MAX_PROBLEMS = 100  # bad lines listed one by one per file; the rest are counted in one problem
_INT64_MAX = (1 << 63) - 1


class _Points:
    """Points gathered as four lists, one table at the end."""

    def __init__(self):
        self.tag, self.step, self.wall, self.value = [], [], [], []

    def add(self, tag: str, step: int, wall: float, value: float) -> None:
        self.tag.append(tag)
        self.step.append(step)
        self.wall.append(wall)
        self.value.append(value)

    def table(self, run: str, rank: int = NO_RANK) -> ScalarTable:
        n = len(self.step)
        tags = np.empty(n, dtype=object)
        names: dict = {}
        tags[:] = [names.setdefault(t, t) for t in self.tag]  # one object per distinct tag
        runs = np.empty(n, dtype=object)
        runs[:] = [run] * n
        return ScalarTable(
            run=runs,
            rank=np.full(n, rank, dtype=np.int64),
            tag=tags,
            step=np.asarray(self.step, dtype=np.int64),
            wall_time=np.asarray(self.wall, dtype=np.float64),
            value=np.asarray(self.value, dtype=np.float64),
        )


class _Problems:
    """Bad lines of one file: the first :data:`MAX_PROBLEMS` one by one, then a count."""

    def __init__(self, path: str):
        self.path = path
        self.items: list = []
        self.more = 0

    def add(self, offset: int | None, message: str, kind=ProblemKind.DECODE) -> None:
        if len(self.items) < MAX_PROBLEMS:
            self.items.append(Problem(self.path, offset, kind, message))
        else:
            self.more += 1

    def done(self) -> list:
        if self.more:
            self.items.append(Problem(self.path, None, ProblemKind.DECODE, f"{count(self.more, 'more unreadable line', thousands=True)} not listed"))
        return self.items


def _lines(path: str, problems: _Problems):
    """``(line_number, byte_offset, text)`` of a text file, streamed :data:`CHUNK` bytes at a time (:mod:`line_chunks`).

    A line is parsed by its first :data:`MAX_LINE` characters; the rest of a longer one is
    skipped without being held in memory, and the file gets one ``line`` problem counting them.
    CR-only and CRLF line ends are line ends too.
    """
    number, cut = 0, 0
    chunks = LineChunks(chunk=CHUNK, max_line=MAX_LINE, cr_ends=True)
    with open(path, "rb") as f:
        for offset, data, long in chunks.read(f, os.fstat(f.fileno()).st_size, final=True):
            pieces = [(0, data)] if long else lines_at(data, cr_ends=True)
            for at, raw in pieces:
                number += 1
                if len(raw) > MAX_LINE:
                    cut += 1
                    raw = raw[:MAX_LINE]
                yield number, offset + at, raw.decode("utf-8", errors="replace")
    if cut:
        problems.add(None, f"{count(cut, 'line')} longer than {MAX_LINE:,} characters; only their start was parsed", ProblemKind.LINE)


def read_trainer_state(path: str | os.PathLike, *, run: str = ".", tags=None) -> ReadResult:
    """Hugging Face Trainer's ``trainer_state.json``: each ``log_history`` entry's numbers at its ``step``.

    Args:
        path: the JSON file (at most :data:`MAX_JSON_BYTES`).
        run: the run name the rows get.

    Returns:
        A :class:`ReadResult`; a file that is not such a JSON document is one problem, an entry
        without a whole ``step`` another.
    """
    path = str(path)
    points, problems = _Points(), _Problems(path)
    size = os.path.getsize(path)
    if size > MAX_JSON_BYTES:
        problems.add(None, f"{size:,} bytes: larger than the {MAX_JSON_BYTES:,} read for a trainer_state.json", ProblemKind.FOREIGN)
        return _result(path, points, problems, HF_STATE, run)
    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read().decode("utf-8-sig", errors="replace"))  # a byte-order mark (Windows editors) is no error
    except (ValueError, RecursionError) as exc:
        problems.add(None, f"not a JSON document: {exc}", ProblemKind.FOREIGN)
        return _result(path, points, problems, HF_STATE, run)
    history = doc.get("log_history") if isinstance(doc, dict) else None
    if not isinstance(history, list):
        problems.add(None, "no 'log_history' list: not a Hugging Face trainer_state.json", ProblemKind.FOREIGN)
        return _result(path, points, problems, HF_STATE, run)
    for i, entry in enumerate(history):
        step = entry.get("step") if isinstance(entry, dict) else None
        if isinstance(step, float) and step.is_integer():
            step = int(step)
        if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step <= _INT64_MAX:
            problems.add(None, f"log_history[{i}]: no whole 'step' (got {str(step)[:40]!r})")
            continue
        for key, value in entry.items():
            if key in ("step", "epoch") or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            number = _finite_or_said(value, f"log_history[{i}][{str(key)[:40]!r}]", problems)
            if number is not None:
                points.add(str(key)[:256], step, math.nan, number)
    return _result(path, points, problems, HF_STATE, run)


def _table_number(text, where: str, problems: _Problems, offset) -> float | None:
    if isinstance(text, bool):
        text = None
    if isinstance(text, (int, float)):
        return _finite_or_said(text, where, problems, offset)
    if isinstance(text, str):
        v = number_in(text)
        if v is not None:
            return v
        if text.strip().lower() in ("", "null", "none"):
            return math.nan
    problems.add(offset, f"{where}: not a number: {str(text)[:40]!r}")
    return None


def _finite_or_said(value, where: str, problems: _Problems, offset=None) -> float | None:
    """A JSON number as a float; an integer beyond any float (a 400-digit value) is a problem, not an OverflowError."""
    try:
        return float(value)
    except OverflowError:
        problems.add(offset, f"{where}: a number beyond any float; not read")
        return None


def _rank(value) -> int:
    """A rank cell or key: a whole number from 0 to int64's largest, else :data:`NO_RANK` (a rank of 10**30 names none)."""
    if isinstance(value, bool):
        return NO_RANK
    if isinstance(value, str):
        text = value.strip()
        if not text.isdigit() or len(text) > 19:
            return NO_RANK
        value = int(text)
    return value if isinstance(value, int) and 0 <= value <= _INT64_MAX else NO_RANK


def _table_step(text, where: str, problems: _Problems, offset) -> int | None:
    v = text if isinstance(text, int) and not isinstance(text, bool) else None
    if v is None and isinstance(text, (str, float)) and not isinstance(text, bool):
        try:
            f = float(text)
            v = int(f) if math.isfinite(f) and f.is_integer() else None
        except ValueError:
            v = None
    if v is None or not 0 <= v <= _INT64_MAX:
        problems.add(offset, f"{where}: no whole step: {str(text)[:40]!r}")
        return None
    return v


def read_table(path: str | os.PathLike, *, run: str = ".", tags=None) -> ReadResult:
    """A CSV (long: step, tag, value; or wide: step and one column per tag) or JSON Lines of step, tag, value.

    A ``rank`` column (``msnb export``'s) keeps each row's rank.

    Args:
        path: the ``.csv``, ``.jsonl`` or ``.ndjson`` file.
        run: the run name the rows get.
        tags: read only these columns of a wide CSV (None: all); at most :data:`MAX_TABLE_POINTS` points are read.

    Returns:
        A :class:`ReadResult`; every row that cannot be read is a problem naming its line.
    """
    path = str(path)
    points, problems = _Points(), _Problems(path)
    ranks: list = []
    kind = TABLE_JSONL if path.endswith((".jsonl", ".ndjson")) else TABLE_CSV
    wanted = None if tags is None else frozenset(tags)
    lines = _lines(path, problems)
    if kind == TABLE_JSONL:
        _read_jsonl_rows(lines, points, ranks, problems)
        return _result(path, points, problems, kind, run, ranks)
    header = None
    for number, offset, line in lines:
        if not line.strip():
            continue
        try:
            cells = next(csv.reader(io.StringIO(line)))
        except (csv.Error, StopIteration):
            problems.add(offset, f"line {number}: not a CSV row")
            continue
        if header is None:
            header = _csv_header(cells, wanted)
            if header is None:
                problems.add(offset, f"line {number}: the header needs 'step' and either 'tag' and 'value' or one column per tag", ProblemKind.FOREIGN)
                return _result(path, points, problems, kind, run)
            continue
        if len(points.step) >= MAX_TABLE_POINTS:
            problems.add(
                offset, f"line {number}: more than {MAX_TABLE_POINTS:,} points in this table; the rest is not read (ask for fewer tags)", ProblemKind.LINE
            )
            break
        if len(cells) != len(header.names):
            problems.add(offset, f"line {number}: {len(cells)} cells where the header has {len(header.names)}")
            continue
        _add_csv_row(cells, header, f"line {number}", offset, points, ranks, problems)
    if header is None:
        problems.add(None, "no header row", ProblemKind.FOREIGN)
    return _result(path, points, problems, kind, run, ranks)


def _read_jsonl_rows(lines, points: _Points, ranks: list, problems: _Problems) -> None:
    """Each JSON Lines object's step, tag and value (and rank) into *points*; a line that is not one is a problem."""
    for number, offset, line in lines:
        if not line.strip():
            continue
        if len(points.step) >= MAX_TABLE_POINTS:
            problems.add(offset, f"line {number}: more than {MAX_TABLE_POINTS:,} points in this table; the rest is not read", ProblemKind.LINE)
            break
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):
            problems.add(offset, f"line {number}: not a JSON object")
            continue
        if not isinstance(row, dict) or "step" not in row or "tag" not in row or "value" not in row:
            problems.add(offset, f"line {number}: needs 'step', 'tag' and 'value'")
            continue
        step = _table_step(row["step"], f"line {number}", problems, offset)
        value = _table_number(row["value"], f"line {number}", problems, offset)
        if step is None or value is None:
            continue
        points.add(str(row["tag"])[:256], step, math.nan, value)
        ranks.append(_rank(row.get("rank")))


@dataclass
class _CsvHeader:
    """A CSV table's header row, as its data rows are read."""

    names: list  # the header's cells, stripped and lower-cased
    columns: dict  # lower-cased name -> its column
    wide: bool  # one column per tag (no 'tag' column)
    read_columns: list  # (column, tag) of each tag column read in a wide table


def _csv_header(cells: list, wanted) -> _CsvHeader | None:
    """The header row read, or None when it names neither a long table (step, tag, value) nor a wide one (step, tags...)."""
    cells = [cells[0].lstrip("\ufeff"), *cells[1:]] if cells else cells  # a spreadsheet's byte-order mark
    names = [c.strip().lower() for c in cells]
    if "step" not in names or (("tag" in names) != ("value" in names)):
        return None
    raw_names = [c.strip() for c in cells]
    # the columns read: every tag column, or only those asked for (a 4,000-column table compared on its loss)
    read_columns = [
        (i, name) for i, name in enumerate(raw_names) if names[i] not in ("step", "rank", "run", "wall_time") and (wanted is None or name[:256] in wanted)
    ]
    return _CsvHeader(names, {name: i for i, name in enumerate(names)}, "tag" not in names, read_columns)


def _add_csv_row(cells: list, header: _CsvHeader, where: str, offset, points: _Points, ranks: list, problems: _Problems) -> None:
    """One data row's points (one per tag column read of a wide table, else its tag and value); bad cells are problems."""
    columns = header.columns
    step = _table_step(cells[columns["step"]], where, problems, offset)
    if step is None:
        return
    rank = NO_RANK
    if "rank" in columns:
        rank = _rank(cells[columns["rank"]])
    if header.wide:
        for i, name in header.read_columns:
            if not cells[i].strip():
                continue
            value = _table_number(cells[i], f"{where}, column {name[:40]!r}", problems, offset)
            if value is not None:
                points.add(name[:256], step, math.nan, value)
                ranks.append(rank)
    else:
        value = _table_number(cells[columns["value"]], where, problems, offset)
        if value is not None:
            points.add(cells[columns["tag"]][:256], step, math.nan, value)
            ranks.append(rank)


def _result(path: str, points: _Points, problems: _Problems, kind: str, run: str, ranks=None) -> ReadResult:
    table = points.table(run)
    if ranks is not None and len(ranks) == len(table):
        table.rank = np.asarray(ranks, dtype=np.int64)
    found = problems.done()
    if not len(table) and not any(p.kind == ProblemKind.FOREIGN for p in found):
        found.append(Problem(path, None, ProblemKind.FOREIGN, f"no {kind} point found in this file"))
    info = {"path": path, "kind": kind, "run": run, "rank": NO_RANK, "version": None, "records": len(table), "bytes_read": _size(path)}
    return ReadResult(scalars=table, problems=found, files=[info])


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
