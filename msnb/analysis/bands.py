"""Cross-rank bands: what hundreds of ranks did at each step, in five numbers, plus the ranks that left.

A thousand lines on one axis read as a smear.  What a reader wants is the
spread of the healthy ranks and, drawn apart, the ranks the judge flagged.  So
per step over the ranks: the minimum and maximum (the whole spread), the 10th
and 90th percentiles (where most ranks are: a band one stray rank cannot
widen) and the median.  The statistics are taken over the ranks *not* drawn
as lines, so a diverging rank shows as a line leaving a band that stays where
the others are, instead of dragging the band's edge with it.

Which ranks are drawn as lines is the judge's decision, not the band's: ranks
with a rank-divergence flag (noise-aware: :mod:`msnb.analysis.divergence`) or
a NaN/Inf flag.  A rank merely noisier than the rest strays outside the 10-90
band now and then, as a fifth of the ranks do at any step; how often and for
how long each rank stays outside is reported (``outside_steps``,
``longest_outside``) but draws no line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..events.tables import distinct
from .judge import judge_run
from .rules import DEFAULT_RULES
from .series import align, curves

BANDS_ABOVE = 16  # a run with more ranks than this is drawn as bands unless told otherwise
QUANTILES = (0.1, 0.9)


@dataclass
class RankBands:
    """Per-step statistics over the ranks of one run and tag.

    Attributes:
        run, tag: what the bands describe.
        ranks: every rank of the run with this tag, ascending.
        steps: the steps every rank recorded (the judge's alignment).
        low, q_low, median, q_high, high: min, ``quantiles[0]``, median, ``quantiles[1]`` and max per step over the
            finite values of the ranks in the band (NaN where none is finite).
        quantiles: the inner band's quantiles.
        outliers: ranks drawn as lines (flagged by the judge), ascending.
        reasons: rank -> the first flag's reason.
        counted: ranks in the band at each step (finite values).
        outside_steps, longest_outside: per rank (in ``ranks`` order), steps outside the inner band and the longest
            consecutive stretch outside it.
        nonfinite_steps: rank -> steps where that rank logged NaN/Inf.
    """

    run: str
    tag: str
    ranks: list
    steps: np.ndarray
    low: np.ndarray
    q_low: np.ndarray
    median: np.ndarray
    q_high: np.ndarray
    high: np.ndarray
    quantiles: tuple = QUANTILES
    outliers: list = field(default_factory=list)
    reasons: dict = field(default_factory=dict)
    counted: np.ndarray = None
    outside_steps: np.ndarray = None
    longest_outside: np.ndarray = None
    nonfinite_steps: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        """JSON-ready summary: sizes, the outlier ranks with their reasons and time outside the inner band."""
        at = {r: i for i, r in enumerate(self.ranks)}
        return {
            "run": self.run,
            "tag": self.tag,
            "ranks": len(self.ranks),
            "in_band": len(self.ranks) - len(self.outliers),
            "steps": int(self.steps.size),
            "quantiles": list(self.quantiles),
            "outliers": [
                {
                    "rank": r,
                    "reason": self.reasons.get(r, ""),
                    "steps_outside": int(self.outside_steps[at[r]]),
                    "longest_outside": int(self.longest_outside[at[r]]),
                }
                for r in self.outliers
            ],
        }


def band_statistics(matrix: np.ndarray, quantiles=QUANTILES):
    """Min, low quantile, median, high quantile and max of each column over its finite values.

    One sort gives all five (Inf is made NaN, and NaN sorts last); quantiles interpolate linearly
    between order statistics and the median averages the middle two, as ``numpy.nanquantile`` and
    ``numpy.nanmedian`` do (the tests hold them equal bit for bit), in a tenth of their time.

    Args:
        matrix: ranks x steps.
        quantiles: the inner band's two quantiles.

    Returns:
        ``(low, q_low, median, q_high, high, counted)``, each per column; NaN where a column has no finite value.
    """
    values = np.where(np.isfinite(matrix), matrix, np.nan)
    ordered = np.sort(values, axis=0)  # NaN last
    counted = np.isfinite(values).sum(axis=0)
    cols = np.arange(values.shape[1])
    has = counted > 0
    last = np.maximum(counted - 1, 0)

    def order_stat(q: float) -> np.ndarray:
        pos = q * last
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, last)
        frac = pos - lo
        a, b = ordered[lo, cols], ordered[hi, cols]
        out = np.where(frac >= 0.5, b - (b - a) * (1 - frac), a + (b - a) * frac)  # numpy's lerp, both halves
        return np.where(has, out, np.nan)

    low = np.where(has, ordered[0], np.nan)
    high = np.where(has, ordered[last, cols], np.nan)
    median = np.where(has, (ordered[last // 2, cols] + ordered[(last + 1) // 2, cols]) / 2, np.nan)  # the two middle values' mean, as numpy.median
    return low, order_stat(quantiles[0]), median, order_stat(quantiles[1]), high, counted


def _longest_true_run(hit: np.ndarray) -> np.ndarray:
    """Per row, the longest stretch of consecutive True."""
    if hit.shape[1] == 0:
        return np.zeros(hit.shape[0], dtype=np.int64)
    c = np.cumsum(hit, axis=1)
    reset = np.maximum.accumulate(np.where(~hit, c, 0), axis=1)
    return (c - reset).max(axis=1)


def judged_flags(scalars, tag: str, *, rules=None) -> list:
    """The judge's flags on *tag*, run by run (:func:`msnb.analysis.judge.judge_run`, as ``msnb check`` gives them).

    Args:
        scalars: a ScalarTable.
        tag: the real tag judged as the loss.
        rules: the judge's parameters (default: its defaults).

    Returns:
        The flags whose tag is *tag*, run after run.
    """
    runs = sorted(distinct(scalars.run))
    return [f for run in runs for f in judge_run(scalars, run, tag=tag, rules=rules or DEFAULT_RULES, explicit_tag=True).flags if f.tag == tag]


def rank_bands(scalars, tag: str, *, flags=None, run=None, quantiles=QUANTILES, curve_list=None) -> list[RankBands]:
    """Bands over the ranks of every run of *scalars* that has two or more ranks with *tag*.

    Args:
        scalars: a ScalarTable.
        tag: the real tag (resolve aliases first).
        flags: the judge's flags whose ranks are drawn as lines (default: :func:`judged_flags` on *tag*);
            any flag of a run counts, whatever its tag (a rank whose loss diverged is drawn apart in every panel).
        run: only this run.
        quantiles: the inner band.
        curve_list: curves already built for *tag* (skips rebuilding them).

    Returns:
        One :class:`RankBands` per run, sorted by run.
    """
    if flags is None:
        flags = judged_flags(scalars, tag)
    by_run: dict = {}
    for c in curve_list if curve_list is not None else curves(scalars, tag, run=run):
        if c.rank >= 0:
            by_run.setdefault(c.run, []).append(c)
    out = []
    for name, cs in sorted(by_run.items()):
        if len(cs) < 2:
            continue
        steps, matrix = align(cs)
        ranks = [c.rank for c in cs]
        reasons: dict = {}
        for f in flags:
            if f.run == name and f.rank in ranks:
                reasons.setdefault(f.rank, f.reason)
        outliers = sorted(reasons)
        inside = np.array([r not in reasons for r in ranks])
        if not inside.any():  # every rank flagged: the band is all there is to show
            inside[:] = True
        low, q_low, median, q_high, high, counted = band_statistics(matrix[inside], quantiles)
        with np.errstate(invalid="ignore"):
            outside = (matrix < q_low) | (matrix > q_high)
        bad = ~np.isfinite(matrix)
        nonfinite = {ranks[i]: steps[bad[i]] for i in np.flatnonzero(bad.any(axis=1))}
        out.append(
            RankBands(
                name,
                tag,
                ranks,
                steps,
                low,
                q_low,
                median,
                q_high,
                high,
                tuple(quantiles),
                outliers,
                reasons,
                counted,
                outside.sum(axis=1),
                _longest_true_run(outside),
                nonfinite,
            )
        )
    return out
