"""Per-rank overviews of long jobs in bounded memory: an M4 envelope for drawing and an exact summary per series.

A 4,096-rank job of a million steps is too many points to keep for a table
or a sparkline, and most rules need far less than every point: the last
value, the extremes, the first NaN.  :class:`Envelope` keeps, for each of at
most *buckets* step ranges, the points of lowest and highest step and of
lowest and highest value (M4) plus the first non-finite point, so a line drawn
through them shows every spike, and it keeps exact running facts (counts,
first and last step, last value, extremes, first non-finite step).  When the
steps outgrow the buckets, neighbouring buckets are merged two by two, which
M4 allows exactly: the extremes of a union are the extremes of its parts.
The loss the judge reads is still read in full; this is for what is only shown.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..events.tables import ScalarTable

_FIELDS = ("lo_step", "lo_value", "hi_step", "hi_value", "min_step", "min_value", "max_step", "max_value", "bad_step", "bad_value")


@dataclass
class SeriesFacts:
    """Exact facts of one series, however long (see :meth:`Envelope.facts`)."""

    points: int
    finite: int
    first_step: int | None
    last_step: int | None
    last_value: float | None
    min_value: float | None
    max_value: float | None
    nonfinite: int
    first_nonfinite_step: int | None

    def as_dict(self) -> dict:
        return dict(self.__dict__)


class Envelope:
    """The M4 envelope and exact facts of one series, fed in chunks, in memory bounded by *buckets*.

    Args:
        buckets: step ranges kept (each holds at most 5 points); a power of two is not required.
    """

    def __init__(self, buckets: int = 512):
        if buckets < 1:
            raise ValueError("buckets must be at least 1")
        self.buckets = int(buckets)
        self.origin: int | None = None  # step where bucket 0 starts
        self.width = 1  # steps per bucket
        self._b = {f: np.zeros(0, dtype=np.int64 if f.endswith("step") else np.float64) for f in _FIELDS}
        self.points = 0
        self.finite = 0
        self.nonfinite = 0
        self._last = None  # (step, value) of the highest step seen; a later point of the same step replaces it
        self._first_step = None
        self._first_bad = None

    # ------------------------------------------------------------ feeding
    def add(self, steps, values) -> None:
        """Add points (any order; a step may come again after a restart).

        Args:
            steps: integer steps.
            values: their values (NaN and Inf are counted and marked, never drawn as extremes).
        """
        steps = np.asarray(steps, dtype=np.int64).ravel()
        values = np.asarray(values, dtype=np.float64).ravel()
        if steps.size != values.size:
            raise ValueError(f"{steps.size} steps but {values.size} values")
        if steps.size == 0:
            return
        self._update_facts(steps, values)
        lo = int(steps.min())
        if self.origin is None:
            self.origin = lo
        elif lo < self.origin:
            shift = -(-(self.origin - lo) // self.width)  # whole buckets, so old bucket edges stay edges
            self.origin -= shift * self.width
            for f, arr in self._b.items():
                self._b[f] = np.concatenate([_empty(shift, arr.dtype, f), arr])
        while (int(steps.max()) - self.origin) // self.width >= self.buckets or self._b["lo_step"].size > self.buckets:
            self._coarsen()
        self._merge(_aggregate((steps - self.origin) // self.width, steps, values))

    def _update_facts(self, steps, values) -> None:
        ok = np.isfinite(values)
        self.points += steps.size
        self.finite += int(ok.sum())
        self.nonfinite += int(steps.size - ok.sum())
        top = int(np.flatnonzero(steps == steps.max())[-1])  # the last-arrived point of the highest step
        if self._last is None or steps[top] >= self._last[0]:
            self._last = (int(steps[top]), float(values[top]))
        first = int(steps.min())
        self._first_step = first if self._first_step is None else min(self._first_step, first)
        if not ok.all():
            bad = int(steps[~ok].min())
            self._first_bad = bad if self._first_bad is None else min(self._first_bad, bad)

    def _coarsen(self) -> None:
        """Twice as many steps a bucket: buckets 2k and 2k+1 become bucket k."""
        n = self._b["lo_step"].size
        if n % 2:
            for f, arr in self._b.items():
                self._b[f] = np.concatenate([arr, _empty(1, arr.dtype, f)])
        pairs = {f: arr.reshape(-1, 2) for f, arr in self._b.items()}
        self._b = {f: _empty(pairs["lo_step"].shape[0], arr.dtype, f) for f, arr in self._b.items()}
        for half in (0, 1):
            self._merge({f: p[:, half] for f, p in pairs.items()})
        self.width *= 2

    def _merge(self, new: dict) -> None:
        """Combine bucket aggregates *new* (same bucket numbering, maybe fewer buckets) into the kept ones."""
        n = new["lo_step"].size
        if self._b["lo_step"].size < n:
            extra = n - self._b["lo_step"].size
            for f, arr in self._b.items():
                self._b[f] = np.concatenate([arr, _empty(extra, arr.dtype, f)])
        b = self._b
        # at an equal step a finite value beats a non-finite one: the envelope draws only finite points
        finer_lo = (new["lo_step"] == b["lo_step"][:n]) & np.isfinite(new["lo_value"]) & ~np.isfinite(b["lo_value"][:n])
        finer_hi = (new["hi_step"] == b["hi_step"][:n]) & np.isfinite(new["hi_value"]) & ~np.isfinite(b["hi_value"][:n])
        _take(b, new, n, "lo", (new["lo_step"] < b["lo_step"][:n]) | finer_lo)
        _take(b, new, n, "hi", (new["hi_step"] > b["hi_step"][:n]) | finer_hi)
        _take(b, new, n, "min", new["min_value"] < b["min_value"][:n])
        _take(b, new, n, "max", new["max_value"] > b["max_value"][:n])
        _take(b, new, n, "bad", new["bad_step"] < b["bad_step"][:n])

    # ------------------------------------------------------------ reading
    def envelope(self) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) to draw: per bucket its first, last, lowest, highest and first non-finite point, by step."""
        b = self._b
        used = b["lo_step"] != _NO_LO
        steps = np.concatenate([b["lo_step"][used], b["hi_step"][used], b["min_step"][used], b["max_step"][used]])
        values = np.concatenate([b["lo_value"][used], b["hi_value"][used], b["min_value"][used], b["max_value"][used]])
        bad = b["bad_step"] != _NO_LO
        steps = np.concatenate([steps, b["bad_step"][bad]])
        values = np.concatenate([values, b["bad_value"][bad]])
        keep = np.isfinite(values) | (np.arange(values.size) >= values.size - int(bad.sum()))  # min/max of an all-NaN bucket are placeholders
        steps, values = steps[keep], values[keep]
        order = np.lexsort((values, steps))
        steps, values = steps[order], values[order]
        if steps.size:
            dup = np.concatenate([[False], (steps[1:] == steps[:-1]) & ((values[1:] == values[:-1]) | (np.isnan(values[1:]) & np.isnan(values[:-1])))])
            steps, values = steps[~dup], values[~dup]
        return steps, values

    def facts(self) -> SeriesFacts:
        """Exact facts over every point added."""
        b = self._b
        finite_min = b["min_value"][np.isfinite(b["min_value"])]
        finite_max = b["max_value"][np.isfinite(b["max_value"])]
        return SeriesFacts(
            points=self.points,
            finite=self.finite,
            first_step=self._first_step,
            last_step=None if self._last is None else self._last[0],
            last_value=None if self._last is None else self._last[1],
            min_value=float(finite_min.min()) if finite_min.size else None,
            max_value=float(finite_max.max()) if finite_max.size else None,
            nonfinite=self.nonfinite,
            first_nonfinite_step=self._first_bad,
        )


_NO_LO = np.iinfo(np.int64).max  # "no point": a lowest step above every real one
_NO_HI = np.iinfo(np.int64).min


def _empty(n: int, dtype, field: str) -> np.ndarray:
    if field in ("lo_step", "bad_step", "min_step", "max_step"):
        return np.full(n, _NO_LO, dtype=np.int64)
    if field == "hi_step":
        return np.full(n, _NO_HI, dtype=np.int64)
    if field == "min_value":
        return np.full(n, math.inf)
    if field == "max_value":
        return np.full(n, -math.inf)
    return np.full(n, math.nan)


def _take(b: dict, new: dict, n: int, prefix: str, better: np.ndarray) -> None:
    for f in (f"{prefix}_step", f"{prefix}_value"):
        b[f][:n] = np.where(better, new[f], b[f][:n])


def _aggregate(bucket: np.ndarray, steps: np.ndarray, values: np.ndarray) -> dict:
    """Per bucket 0..max(bucket): the M4 points and the first non-finite point of (steps, values)."""
    n = int(bucket.max()) + 1
    out = {f: _empty(n, np.int64 if f.endswith("step") else np.float64, f) for f in _FIELDS}
    ok = np.isfinite(values)

    def pick(mask, key, prefix, lowest: bool):
        idx = np.flatnonzero(mask)
        if not idx.size:
            return
        k = key[idx] if lowest else -key[idx]
        order = np.lexsort((steps[idx], ~ok[idx], k, bucket[idx]))  # by bucket, then key, ties to a finite value, then the lower step
        idx = idx[order]
        first = np.concatenate([[True], bucket[idx][1:] != bucket[idx][:-1]])
        chosen = idx[first]
        out[f"{prefix}_step"][bucket[chosen]] = steps[chosen]
        out[f"{prefix}_value"][bucket[chosen]] = values[chosen]

    every = np.ones(steps.size, dtype=bool)
    pick(every, steps.astype(np.float64), "lo", True)
    pick(every, steps.astype(np.float64), "hi", False)
    pick(ok, values, "min", True)
    pick(ok, values, "max", False)
    pick(~ok, steps.astype(np.float64), "bad", True)
    return out


class Overview:
    """One :class:`Envelope` per (run, rank, tag), fed from scalar tables as they are read.

    Args:
        buckets: buckets per series (memory: about 100 bytes a bucket a series).
    """

    def __init__(self, buckets: int = 512):
        self.buckets = buckets
        self.series: dict[tuple, Envelope] = {}

    def add(self, scalars) -> None:
        """Add every row of a :class:`~msnb.events.ScalarTable` (a whole read or one poll's new rows)."""
        if not len(scalars):
            return
        runs, run_code = _codes(scalars.run)
        tags, tag_code = _codes(scalars.tag)
        ranks, rank_code = np.unique(scalars.rank, return_inverse=True)
        key = (run_code * ranks.size + rank_code) * len(tags) + tag_code
        order = np.argsort(key, kind="stable")
        cuts = np.flatnonzero(np.diff(key[order])) + 1
        for part in np.split(order, cuts):
            i = int(part[0])
            key = (runs[run_code[i]], int(ranks[rank_code[i]]), tags[tag_code[i]])
            env = self.series.get(key)
            if env is None:
                env = self.series[key] = Envelope(self.buckets)
            env.add(scalars.step[part], scalars.value[part])

    def facts(self) -> list[dict]:
        """One dict per series: run, rank, tag and its :class:`SeriesFacts`, sorted by run, rank, tag."""
        return [{"run": r, "rank": k, "tag": t, **self.series[(r, k, t)].facts().as_dict()} for r, k, t in sorted(self.series)]

    def envelopes(self):
        """A :class:`~msnb.events.ScalarTable` of every series' envelope points (what a figure of all ranks needs)."""
        parts = []
        for (run, rank, tag), env in sorted(self.series.items()):
            steps, values = env.envelope()
            n = steps.size
            parts.append(ScalarTable(run=[run] * n, rank=np.full(n, rank), tag=[tag] * n, step=steps, wall_time=np.full(n, np.nan), value=values))
        return ScalarTable.concat(parts)


def _codes(column) -> tuple[list, np.ndarray]:
    """(distinct values in order of appearance, the code of each row): a factorisation that needs no sort of strings."""
    seen: dict = {}
    codes = np.fromiter((seen.setdefault(v, len(seen)) for v in column.tolist()), dtype=np.int64, count=len(column))
    return list(seen), codes
