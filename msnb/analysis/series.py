"""From table rows to the curves the rules judge: restarts resolved, one value per step, ranks aligned.

What a repeated step means.  ``msnb.read`` keeps every record, in read order
(files of one run and rank in the order of their names' timestamps).  Within
one (run, rank, tag), a step lower than the one before it marks a *restart*:
a job resumed from a checkpoint writes those steps again.  The later records
replace the earlier ones from the restart step on, as TensorBoard purges
orphaned data on restart.  A step written twice in a row (same step, no going
back) is not a restart; the last record of a step is the one judged.  NaN and
Inf are looked for in every record before any of this (see
:mod:`msnb.analysis.nonfinite`), so replacing or deduplicating never hides one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..events.tables import distinct


@dataclass
class Curve:
    """One rank's curve of one tag: ``steps`` ascending and unique, ``values`` the record judged at each.

    ``restarts`` lists the steps at which the job started again; ``replaced``
    counts the earlier records a restart superseded.
    """

    run: str
    rank: int
    tag: str
    steps: np.ndarray
    values: np.ndarray
    restarts: list = field(default_factory=list)
    replaced: int = 0


def resolve_restarts(steps, values):
    """Apply restarts to records in read order.

    Args:
        steps: step of each record, in read order.
        values: value of each record.

    Returns:
        ``(steps, values, restarts, replaced)``: unique ascending steps with the
        last surviving record of each, the restart steps, and how many earlier
        records were superseded.
    """
    steps = np.asarray(steps, dtype=np.int64)
    values = np.asarray(values, dtype=np.float64)
    if steps.size == 0:
        return steps, values, [], 0
    back = np.flatnonzero(steps[1:] < steps[:-1]) + 1  # index of the first record after each restart
    restarts = steps[back].tolist()
    keep = np.ones(steps.size, dtype=bool)
    if back.size:
        # record j is superseded when a later restart starts at or below its step
        marks = np.full(steps.size, np.iinfo(np.int64).max, dtype=np.int64)
        marks[back] = steps[back]
        later = np.minimum.accumulate(marks[::-1])[::-1]  # min restart step at index >= j
        later = np.append(later[1:], np.iinfo(np.int64).max)  # ... at index > j
        keep = steps < later
    s, v = steps[keep], values[keep]
    order = np.argsort(s, kind="stable")
    s, v = s[order], v[order]
    last = np.append(s[1:] != s[:-1], True)  # the last record of each step
    return s[last], v[last], restarts, int((~keep).sum())


def curves(scalars, tag: str, run=None, rows=None) -> list[Curve]:
    """Every (run, rank) curve of *tag* in a ScalarTable, restarts resolved.

    Args:
        scalars: a :class:`~msnb.events.tables.ScalarTable`.
        tag: the real tag (resolve aliases first).
        run: only this run (default: all).
        rows: the table's rows of *tag* in read order, where the caller found them already (each search is a pass over every row).

    Returns:
        Curves sorted by run then rank.
    """
    idx = np.flatnonzero(scalars.tag == tag) if rows is None else rows
    if run is not None:
        idx = idx[scalars.run[idx] == run]
    out = []
    if idx.size == 0:
        return out
    everywhere = distinct(scalars.run)
    names = sorted(everywhere) if len(everywhere) == 1 else sorted(distinct(runs := scalars.run[idx]))
    ranks = scalars.rank[idx]
    key = ranks + 1
    if len(names) > 1:
        run_code = np.searchsorted(np.array(names, dtype=object), runs)
        key += run_code * (int(ranks.max()) + 2)
    else:
        run_code = None  # one run: the rank alone tells the curves apart
    if np.any(key[1:] < key[:-1]):  # files are read grouped by run and rank, so this is rare
        order = np.argsort(key, kind="stable")  # stable: read order kept within each (run, rank)
        idx, ranks, key = idx[order], ranks[order], key[order]
        run_code = None if run_code is None else run_code[order]
    bounds = np.concatenate(([0], np.flatnonzero(key[1:] != key[:-1]) + 1, [idx.size])).tolist()
    del key
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        rows = idx[lo:hi]
        s, v, restarts, replaced = resolve_restarts(scalars.step[rows], scalars.value[rows])
        out.append(Curve(names[0 if run_code is None else int(run_code[lo])], int(ranks[lo]), tag, s, v, restarts, replaced))
    return out


def stride(steps) -> int:
    """The fixed step stride of a curve (1 for every step), or 0 when steps advance irregularly.

    Sink mode (callbacks once per sink of ``sink_size`` steps) or a collect
    frequency records every N steps; the gaps are the design, not lost data.
    Nine in ten gaps equal to the most common one count as fixed.

    Args:
        steps: ascending unique steps.

    Returns:
        The stride N, 1 when consecutive, 0 when irregular or too short to tell.
    """
    steps = np.asarray(steps)
    if steps.size < 3:
        return 1 if steps.size == 2 and steps[1] - steps[0] == 1 else 0
    gaps = np.diff(steps)
    values, counts = np.unique(gaps, return_counts=True)
    best = int(values[np.argmax(counts)])
    return best if counts.max() >= 0.9 * gaps.size else 0


def align(curve_list: list[Curve]):
    """Ranks side by side on the steps they all recorded.

    Args:
        curve_list: curves of one run and tag.

    Returns:
        ``(steps, matrix)``: common steps and a (ranks x steps) float array.
    """
    if not curve_list:
        return np.zeros(0, np.int64), np.zeros((0, 0))
    common = curve_list[0].steps
    if all(np.array_equal(common, c.steps) for c in curve_list[1:]):  # the usual case: every rank logged the same steps
        return common, np.vstack([c.values for c in curve_list])
    for c in curve_list[1:]:
        common = np.intersect1d(common, c.steps, assume_unique=True)
    matrix = np.vstack([c.values[np.searchsorted(c.steps, common)] for c in curve_list]) if common.size else np.zeros((len(curve_list), 0))
    return common, matrix
