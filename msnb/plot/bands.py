"""Drawing cross-rank bands (:mod:`msnb.analysis.bands`) into a scalar panel.

The min..max band is drawn very light and the 10-90 % band darker in the run's
colour, the median solid on top; the ranks the judge flagged are drawn by the
caller as ordinary lines in colours of their own, so they stand out against
one calm shape instead of hiding among a thousand lines.  Long runs are
reduced to an envelope per bucket of steps (lowest low, highest high), so
the band never looks narrower than the data.
"""

from __future__ import annotations

import numpy as np

from .downsample import m4

# colours for ranks drawn as lines: none of them is the first colours of matplotlib's cycle used for runs
LINE_COLORS = ("#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf", "#7f7f7f", "#ff7f0e")
MAX_LABELLED = 8  # outlier ranks named in the legend; the rest share one entry


def envelope(xs: np.ndarray, lower: np.ndarray, upper: np.ndarray, max_points: int):
    """At most *max_points* buckets of (x, lowest lower, highest upper); NaN buckets stay NaN (gaps)."""
    if xs.size <= max_points:
        return xs, lower, upper
    edges = np.linspace(0, xs.size, max_points + 1).astype(np.int64)
    edges = np.unique(edges[:-1])
    with np.errstate(invalid="ignore"):
        lo = np.fmin.reduceat(lower, edges)
        hi = np.fmax.reduceat(upper, edges)
    return xs[edges], lo, hi


def draw_bands(ax, xs: np.ndarray, bands, color: str, label: str, max_points: int) -> int:
    """Fill min..max and the inner band, draw the median; returns the points handed to matplotlib.

    Args:
        ax: the panel.
        xs: x value of each of ``bands.steps``.
        bands: a :class:`~msnb.analysis.bands.RankBands`.
        color: the run's colour.
        label: the run's legend label ("" when the figure has one run).
        max_points: points per drawn edge at most.
    """
    n_in = len(bands.ranks) - len(bands.outliers) if len(bands.outliers) < len(bands.ranks) else len(bands.ranks)
    q0, q1 = (round(100 * q) for q in bands.quantiles)
    prefix = f"{label}: " if label else ""
    ex, lo, hi = envelope(xs, bands.low, bands.high, max_points)
    ax.fill_between(ex, lo, hi, color=color, alpha=0.2, linewidth=0, label=f"{prefix}min-max of {n_in} rank{'s' if n_in != 1 else ''}")
    ix, qlo, qhi = envelope(xs, bands.q_low, bands.q_high, max_points)
    ax.fill_between(ix, qlo, qhi, color=color, alpha=0.45, linewidth=0, label=f"{prefix}{q0}-{q1} % of ranks")
    finite = np.isfinite(bands.median)
    mx, my = m4(xs[finite], bands.median[finite], max_points)
    ax.plot(mx, my, color=color, linewidth=1.4, label=f"{prefix}median")
    return 2 * (ex.size + ix.size) + mx.size


def line_color(i: int) -> str:
    return LINE_COLORS[i % len(LINE_COLORS)]
