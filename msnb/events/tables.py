"""Tidy tables of what was read: one row per point, columns as numpy arrays.

Every point is kept (no reservoir sampling); downsampling belongs to plotting.
``rank`` is an integer column where :data:`NO_RANK` (-1) means the file's rank
is unknown.  ``to_pandas()`` builds a DataFrame where pandas is installed.
"""

from __future__ import annotations

import ctypes

import numpy as np

from ..errors import UsageError
from ..heap import give_back_freed_memory
from ..options import KIND_SPELLINGS
from .tags import resolve

NO_RANK = -1
MAX_CODES = 1024  # distinct objects an object column is coded into at most (see object_codes)
_BLOCK = 1 << 15  # rows grouped at once: a block of a merged table spans a few files, so holds a few objects
_MASK_PASSES = 12  # objects of a block found with one comparison pass each, then by sorting the block


def _addresses(col: np.ndarray) -> np.ndarray:
    """The object pointers a C-contiguous object array stores, read as integers (no reference is taken or dropped)."""
    return np.ctypeslib.as_array((ctypes.c_size_t * col.size).from_address(col.ctypes.data))


def _block_groups(addr: np.ndarray, codes: bool):
    """``(firsts, local)``: the first row of each distinct address of a block in order of appearance, and each row's index into them."""
    local = np.zeros(addr.size, dtype=np.int64) if codes else None
    firsts = []
    left = np.ones(addr.size, dtype=bool)
    first = 0
    for _ in range(_MASK_PASSES):
        same = addr == addr[first]
        if codes:
            local[same] = len(firsts)
        firsts.append(first)
        left &= ~same
        first = int(left.argmax())
        if not left[first]:
            return np.array(firsts), local
    _, where, inverse = np.unique(addr, return_index=True, return_inverse=True)  # many objects: sort the block
    order = np.argsort(where)
    if codes:
        position = np.empty_like(order)
        position[order] = np.arange(order.size)
        local = position[inverse]
    return where[order], local


def object_codes(col: np.ndarray, *, codes: bool = True, limit: int | None = MAX_CODES):
    """The distinct objects of an object column and, per row, which one it holds, without a Python step per row.

    Columns such as run and tag hold a few objects over and over; rows holding
    one object store one address, so grouping rows by address is exact: every
    row gets back the very object it held.  Blocks of rows are grouped one at
    a time, so time stays linear and memory small however many files (each
    with its own objects) a table joins.

    Args:
        col: a 1-D object array.
        codes: also return the code of each row (else None in its place).
        limit: give up (None) past this many distinct objects (None: never).

    Returns:
        ``(objects, codes)``: the objects in order of first appearance and an unsigned array with
        ``objects[codes[i]] is col[i]``; or None where *col* is not C-contiguous or holds more than *limit* objects.
    """
    n = col.size
    if not col.flags.c_contiguous:
        return None
    addr = _addresses(col)
    out = np.empty(n, dtype=np.uint16 if limit is not None and limit < 1 << 16 else np.int64) if codes else None
    seen: dict = {}  # address -> code
    objects: list = []
    for lo in range(0, n, _BLOCK):
        block = addr[lo : lo + _BLOCK]
        firsts, local = _block_groups(block, codes)
        lut = np.empty(firsts.size, dtype=np.int64)
        for j, (f, key) in enumerate(zip(firsts.tolist(), block[firsts].tolist())):
            code = seen.get(key)
            if code is None:
                code = seen[key] = len(objects)
                objects.append(col[lo + f])
                if limit is not None and len(objects) > limit:
                    return None
            lut[j] = code
        if codes:
            out[lo : lo + block.size] = lut[local]
    if codes and len(objects) <= 256:
        out = out.astype(np.uint8)
    return objects, out


def distinct(col: np.ndarray) -> set:
    """``set(col.tolist())`` of an object column (a tag, run or kind column), without a Python object per row.

    Where the rows hold many objects (a column built by ``np.full``, whose every
    row is an object of its own), grouping them costs more than the set: it is
    given up past one object in 64 rows and the set is built instead.
    """
    grouped = object_codes(col, codes=False, limit=max(1024, col.size // 64)) if col.dtype.kind == "O" and col.ndim == 1 else None
    return set(grouped[0]) if grouped is not None else set(col.tolist())


def distinct_integers(col: np.ndarray) -> np.ndarray:
    """``np.unique`` of an integer column that comes in long runs of one value (a rank column), in linear time."""
    if col.size == 0:
        return np.unique(col)
    starts = np.flatnonzero(col[1:] != col[:-1]) + 1
    return np.unique(col[np.concatenate(([0], starts))])  # every value starts a run


class Table:
    """Columns of equal length; subclasses name them in ``COLUMNS``."""

    COLUMNS: tuple = ()
    _DTYPES: dict = {}

    def __init__(self, **columns):
        n = None
        for name in self.COLUMNS:
            col = columns.get(name)
            if col is None:
                col = np.zeros(0, dtype=self._DTYPES.get(name, object))
            elif not isinstance(col, np.ndarray):
                col = _as_column(col, self._DTYPES.get(name, object))
            if n is None:
                n = len(col)
            elif len(col) != n:
                raise ValueError(f"column {name!r} has {len(col)} rows, expected {n}")
            setattr(self, name, col)

    def __len__(self) -> int:
        return len(getattr(self, self.COLUMNS[0])) if self.COLUMNS else 0

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self.COLUMNS:
            raise KeyError(f"{type(self).__name__} has no column {name!r}; columns: {', '.join(self.COLUMNS)}")
        return getattr(self, name)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {len(self)} rows; columns {', '.join(self.COLUMNS)}>"

    def take(self, index) -> Table:
        """Rows selected by a boolean mask or an index array."""
        return type(self)(**{c: getattr(self, c)[index] for c in self.COLUMNS})

    def where(self, **conditions) -> Table:
        """Rows whose columns equal the given values (a list or set means "any of")."""
        mask = np.ones(len(self), dtype=bool)
        for name, wanted in conditions.items():
            col = self[name]
            if isinstance(wanted, (list, tuple, set, frozenset)):
                mask &= np.isin(col, list(wanted))
            else:
                mask &= col == wanted
        return self.take(mask)

    def rows(self):
        """Each row as a dict (for export and small tables)."""
        cols = [getattr(self, c) for c in self.COLUMNS]
        for values in zip(*cols):
            yield dict(zip(self.COLUMNS, values))

    def to_pandas(self):
        """A pandas DataFrame of this table (pandas is optional)."""
        try:
            import pandas as pd  # optional: pandas is no dependency of msnb
        except ImportError as exc:  # pragma: no cover - pandas ships with the [all] extra
            raise ImportError("to_pandas() needs pandas: pip install pandas") from exc
        return pd.DataFrame({c: getattr(self, c) for c in self.COLUMNS})

    @classmethod
    def concat(cls, tables, *, consume: bool = False) -> Table:
        """One table of the rows of *tables*, in order.

        Args:
            tables: tables of this class (None and empty ones are skipped).
            consume: the inputs are scratch: each column of theirs is released as soon as it is
                copied, so joining needs little more memory than the result.

        Returns:
            A table (one of the inputs itself when only one has rows).
        """
        tables = [t for t in tables if t is not None and len(t)]
        if not tables:
            return cls()
        if len(tables) == 1:
            return tables[0]
        columns = {}
        for c in cls.COLUMNS:
            columns[c] = np.concatenate([getattr(t, c) for t in tables])
            if consume:
                for t in tables:
                    setattr(t, c, None)
                if columns[c].nbytes >= TRIM_BYTES:
                    give_back_freed_memory()
        return cls(**columns)


TRIM_BYTES = 8 << 20  # joins of smaller columns leave too little freed to be worth a walk of the heap


def _as_column(values, dtype) -> np.ndarray:
    if dtype is object:  # one object per row, even where the rows are equal-length arrays (no 2-D broadcast)
        return np.fromiter(values, dtype=object, count=len(values))
    return np.asarray(values, dtype=dtype)


_KEY = {"run": object, "rank": np.int64, "tag": object, "step": np.int64, "wall_time": np.float64}


class ScalarTable(Table):
    """run, rank, tag, step, wall_time, value: one row per scalar point."""

    COLUMNS = ("run", "rank", "tag", "step", "wall_time", "value")
    _DTYPES = {**_KEY, "value": np.float64}

    def tags(self) -> list[str]:
        return sorted(distinct(self.tag))

    def resolve_tag(self, tag: str) -> str | None:
        """The real tag this table holds for *tag* (itself, or a spelling of its meaning: ``loss`` -> ``loss/auto``), else None."""
        return resolve(tag, distinct(self.tag))

    def series(self, tag: str, *, run=None, rank=None):
        """(steps, values) of one tag, optionally one run and rank, in read order (every record kept).

        *tag* may be a meaning (``loss``, ``lr``, ``grad_norm``...): it finds
        MindSpore's ``loss/auto``, mindformers' ``loss``, ``lm-loss``...; use
        :meth:`resolve_tag` to know which real tag that was.
        """
        real = self.resolve_tag(tag)
        mask = self.tag == (real if real is not None else tag)
        if run is not None:
            mask &= self.run == run
        if rank is not None:
            mask &= self.rank == rank
        return self.step[mask], self.value[mask]


class HistogramTable(Table):
    """One row per histogram: summary statistics plus bucket edges and counts (arrays).

    ``min``, ``max`` and ``sum`` are what the file holds.  ``sum`` is NaN where the
    writer recorded none (TF2's ``tf.summary.histogram`` keeps only buckets):
    :meth:`estimated_sum` fills those rows from the buckets, as an estimate.
    """

    COLUMNS = (
        "run",
        "rank",
        "tag",
        "step",
        "wall_time",
        "min",
        "max",
        "sum",
        "count",
        "nan_count",
        "pos_inf_count",
        "neg_inf_count",
        "left",
        "right",
        "counts",
    )
    _DTYPES = {
        **_KEY,
        "min": np.float64,
        "max": np.float64,
        "sum": np.float64,
        "count": np.int64,
        "nan_count": np.int64,
        "pos_inf_count": np.int64,
        "neg_inf_count": np.int64,
    }

    def estimated_sum(self) -> tuple[np.ndarray, np.ndarray]:
        """Each row's sum: the recorded one, or where none was recorded the bucket estimate (midpoint x count).

        A row with no finite value (all NaN or infinite) has no sum to estimate: it stays NaN.

        Returns:
            ``(sums, estimated)``: float64 sums, and a bool array, True where the sum is an estimate.
        """
        sums = np.array(self.sum, dtype=np.float64, copy=True)
        finite = self.count - self.nan_count - self.pos_inf_count - self.neg_inf_count
        estimated = np.isnan(sums) & (finite > 0)
        for i in np.flatnonzero(estimated).tolist():
            left, right, counts = (np.asarray(x, dtype=np.float64) for x in (self.left[i], self.right[i], self.counts[i]))
            sums[i] = float(((left + right) / 2 * counts).sum())
        return sums, estimated


class TensorTable(Table):
    """One row per tensor: dims (tuple), dtype (name) and values (ndarray)."""

    COLUMNS = ("run", "rank", "tag", "step", "wall_time", "dims", "dtype", "values")
    _DTYPES = dict(_KEY)


class ImageTable(Table):
    """One row per image: its size, colorspace and encoded (PNG) bytes."""

    COLUMNS = ("run", "rank", "tag", "step", "wall_time", "height", "width", "colorspace", "png")
    _DTYPES = {**_KEY, "height": np.int64, "width": np.int64, "colorspace": np.int64}


class TextTable(Table):
    """One row per text summary (tensorboardX ``add_text``, e.g. mindformers' config)."""

    COLUMNS = ("run", "rank", "tag", "step", "wall_time", "text")
    _DTYPES = dict(_KEY)


class LineageTable(Table):
    """One row per lineage record: kind (train, evaluation, dataset_graph, user_defined) and its fields."""

    COLUMNS = ("run", "rank", "step", "wall_time", "kind", "fields")
    _DTYPES = {"run": object, "rank": np.int64, "step": np.int64, "wall_time": np.float64}


class MarkerTable(Table):
    """Events that carry something msnb does not tabulate: a graph, a loss landscape."""

    COLUMNS = ("run", "rank", "tag", "step", "wall_time", "kind", "bytes")
    _DTYPES = {**_KEY, "bytes": np.int64}


TABLE_KINDS: dict[str, type[Table]] = {
    "scalars": ScalarTable,
    "histograms": HistogramTable,
    "tensors": TensorTable,
    "images": ImageTable,
    "texts": TextTable,
    "lineage": LineageTable,
    "markers": MarkerTable,
}
"""The one list of data kinds: the name of each table (an attribute of ``ReadResult``) and its class."""


def kind_name(name: str) -> str:
    """The canonical name of a data kind, from itself or one of :data:`KIND_SPELLINGS`.

    Args:
        name: a kind as a user typed it.

    Returns:
        A key of :data:`TABLE_KINDS`.

    Raises:
        msnb.errors.UsageError: for a name that is no kind.
    """
    canonical = KIND_SPELLINGS.get(name, name)
    if canonical not in TABLE_KINDS:
        raise UsageError(f"unknown kind {name!r}; choose one of {', '.join(TABLE_KINDS)}")
    return canonical
