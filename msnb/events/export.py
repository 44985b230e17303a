"""Writing a :class:`ReadResult` table as CSV or JSON Lines (``msnb export``).

The scalar columns are a contract other tools rely on:
``run, rank, tag, step, wall_time, value``, with ``rank`` empty (CSV) or null
(JSONL) when unknown.  Floats keep full precision; NaN and infinities are
written as ``nan``/``inf`` in CSV and ``NaN``/``Infinity`` in JSONL (as
Python's json and pandas read them), because a NaN loss is the news.
"""

from __future__ import annotations

import base64
import csv
import json
import os
import sys

import numpy as np

from ..errors import OutputError, UsageError
from ..options import KIND_NAMES
from .tables import NO_RANK, TABLE_KINDS, kind_name

KINDS = KIND_NAMES
"""Kinds ``msnb export --kind`` writes: every table of a ``ReadResult``."""


# the tables' own columns; images travel as base64 text
COLUMNS = {kind: tuple("png_base64" if c == "png" else c for c in table.COLUMNS) for kind, table in TABLE_KINDS.items()}


def _plain(value):
    """numpy values and arrays as JSON-ready Python values."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, tuple):
        return list(value)
    return value


ROWS_AT_ONCE = 65_536
"""Rows turned into Python values at a time: the export's memory beyond the table itself stays a few MB."""


def rows(result, kind: str):
    """Rows of one kind as tuples in :data:`COLUMNS` order (ranks: None when unknown).

    Made :data:`ROWS_AT_ONCE` rows at a time, so writing a 7.5 M-point table
    costs a few MB beside it, not a Python object per cell of the whole table.

    Args:
        result: a ``ReadResult``.
        kind: a data kind, in any spelling :func:`msnb.events.tables.kind_name` accepts.

    Returns:
        An iterator of tuples.
    """
    kind = kind_name(kind)
    table = getattr(result, kind)
    for lo in range(0, len(table), ROWS_AT_ONCE):
        cols = []
        for name in COLUMNS[kind]:
            source = "png" if name == "png_base64" else name
            col = table[source][lo : lo + ROWS_AT_ONCE]
            if name == "rank":
                col = [None if r == NO_RANK else r for r in col.tolist()]
            elif col.dtype != object:
                col = col.tolist()
            else:
                col = [_plain(v) for v in col]
            cols.append(col)
        yield from zip(*cols)


def _csv_cell(value):
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, dict)):
        return json.dumps(value, separators=(",", ":"))
    return value


def write(result, kind: str, fmt: str, out) -> int:
    """Write one kind of table to the text stream *out*.

    Args:
        result: a ``ReadResult``.
        kind: a data kind (any accepted spelling).
        fmt: ``csv`` or ``jsonl``.
        out: a text stream.

    Returns:
        The number of rows written.

    Raises:
        UsageError: an unknown kind or format.
        OutputError: *out* refused the bytes (``ENOSPC``, ``EIO``...); a closed pipe is not an error here.
    """
    kind = kind_name(kind)
    try:
        n = _write(result, kind, fmt, out)
        out.flush()
    except BrokenPipeError:
        _silence(out)
        raise
    except OSError as exc:
        _silence(out)
        raise OutputError(f"cannot write the output: {exc.strerror or exc}") from None
    return n


def _silence(out) -> None:
    """Point a failed stdout at /dev/null so the interpreter's final flush does not fail again with a traceback."""
    if out is sys.stdout:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass


def _write(result, kind: str, fmt: str, out) -> int:
    names = COLUMNS[kind]
    n = 0
    if fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(names)
        if kind == "scalars":
            for row in rows(result, kind):
                r, k, t, s, w, v = row
                writer.writerow((r, "" if k is None else k, t, s, repr(w), repr(v)))
                n += 1
        else:
            for row in rows(result, kind):
                writer.writerow([_csv_cell(v) for v in row])
                n += 1
    elif fmt == "jsonl":
        dumps = json.dumps
        for row in rows(result, kind):
            out.write(dumps(dict(zip(names, row))))
            out.write("\n")
            n += 1
    else:
        raise UsageError(f"unknown format {fmt!r}; choose csv or jsonl")
    return n
