"""Downsampling for drawing that keeps spikes: first, last, min and max of every bucket (M4).

A line through those four points per pixel column is indistinguishable from
the full series at that width, and a single-step spike is never averaged away.
"""

from __future__ import annotations

import numpy as np


def m4(x, y, buckets: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """Keep at most ``4 * buckets`` points of (x, y); *x* must be sorted and y finite."""
    x = np.asarray(x)
    y = np.asarray(y, dtype=np.float64)
    n = x.size
    if n <= 4 * buckets:
        return x, y
    xf = x.astype(np.float64)
    lo, hi = xf[0], xf[-1]
    if hi == lo:
        edges = np.linspace(0, n, buckets + 1).astype(np.int64)
    else:
        edges = np.searchsorted(xf, np.linspace(lo, hi, buckets + 1)[1:-1], side="left")
        edges = np.concatenate([[0], edges, [n]])
    starts = np.unique(edges[:-1][edges[:-1] < n])
    seg = np.zeros(n, dtype=np.int64)
    seg[starts[1:]] = 1
    seg = np.cumsum(seg)
    ends = np.append(starts[1:], n) - 1
    mins = np.minimum.reduceat(y, starts)
    maxs = np.maximum.reduceat(y, starts)
    is_min = y == mins[seg]
    is_max = y == maxs[seg]
    _, first_min = np.unique(seg[is_min], return_index=True)
    _, first_max = np.unique(seg[is_max], return_index=True)
    argmin = np.flatnonzero(is_min)[first_min]
    argmax = np.flatnonzero(is_max)[first_max]
    keep = np.unique(np.concatenate([starts, ends, argmin, argmax]))
    return x[keep], y[keep]
