"""Tidy tables of what was read: one row per point, columns as numpy arrays.

Every point is kept (no reservoir sampling); downsampling belongs to plotting.
``rank`` is an integer column where :data:`NO_RANK` (-1) means the file's rank
is unknown.  ``to_pandas()`` builds a DataFrame where pandas is installed.
"""

from __future__ import annotations

import numpy as np

from .tags import resolve

NO_RANK = -1


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
            import pandas as pd
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
                    _give_back_freed_memory()
        return cls(**columns)


def _give_back_freed_memory() -> None:
    """Return the heap pages just freed to the system (glibc keeps them otherwise), so joining many small parts
    into one table needs the table and one column more, not the parts and the table."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def _malloc_trim():
    global _TRIM
    if _TRIM is False:
        import ctypes
        import sys

        _TRIM = None
        if sys.platform.startswith("linux"):
            try:
                _TRIM = ctypes.CDLL("libc.so.6").malloc_trim
            except (OSError, AttributeError):  # not glibc (musl...): nothing to give back this way
                _TRIM = None
    return _TRIM


_TRIM = False  # not looked up yet
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
        return sorted(set(self.tag.tolist()))

    def resolve_tag(self, tag: str) -> str | None:
        """The real tag this table holds for *tag* (itself, or a spelling of its meaning: ``loss`` -> ``loss/auto``), else None."""
        return resolve(tag, set(self.tag.tolist()))

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
    """One row per histogram: summary statistics plus bucket edges and counts (arrays)."""

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

KIND_SPELLINGS = {"scalar": "scalars", "histogram": "histograms", "tensor": "tensors", "image": "images", "text": "texts", "marker": "markers"}
"""Other spellings accepted wherever a kind is named (``msnb export --kind text``)."""


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
        from ..errors import UsageError

        raise UsageError(f"unknown kind {name!r}; choose one of {', '.join(TABLE_KINDS)}")
    return canonical
