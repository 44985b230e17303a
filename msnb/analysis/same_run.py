"""One job's identical series counted once.

A mindformers training leaves the same losses in several files: the console captured as ``train.log``,
mindformers' own ``output/log/rank_N/info.log`` and its TensorBoard files; discovery finds each as a run.
Judged apart they would count one training two to five times.  Rule: runs whose loss series are the same
(same steps, values equal to the print's precision, at least :data:`MIN_POINTS` of them) and whose clocks
agree (same wall time up to a whole time-zone offset: logs print local time) are one source; the run with
the most tags is kept (it says the most), the others are named beside it, never dropped silently.
"""

from __future__ import annotations

import math

import numpy as np

MIN_POINTS = 2
_ZONE_STEP = 900.0  # time zones are whole quarter hours apart
_CLOCK_SLACK = 120.0  # seconds between a log line's printed time and the writer's own clock
_RTOL, _ATOL = 1e-5, 1e-6  # mindformers prints the loss with 6 decimals; TensorBoard keeps float32


def _series(scalars, run: str, tag: str):
    """(steps, values, first wall time, tags) of *run*'s *tag*, ordered by step; ranks folded when the run has one."""
    mask = (scalars.run == run) & (scalars.tag == tag)
    ranks = np.unique(scalars.rank[mask])
    if ranks.size > 1:
        return None
    order = np.argsort(scalars.step[mask], kind="stable")
    steps, values, walls = scalars.step[mask][order], scalars.value[mask][order], scalars.wall_time[mask][order]
    finite = walls[np.isfinite(walls)]
    tags = np.unique(scalars.tag[scalars.run == run]).size
    return steps, values, (float(finite[0]) if finite.size else math.nan), tags


def _same(a, b) -> bool:
    steps_a, values_a, wall_a, _ = a
    steps_b, values_b, wall_b, _ = b
    if steps_a.size < MIN_POINTS or not np.array_equal(steps_a, steps_b):
        return False
    if not np.allclose(values_a, values_b, rtol=_RTOL, atol=_ATOL, equal_nan=True):
        return False
    if math.isnan(wall_a) or math.isnan(wall_b):
        return True
    off = abs(wall_a - wall_b) % _ZONE_STEP
    return min(off, _ZONE_STEP - off) <= _CLOCK_SLACK and abs(wall_a - wall_b) <= 14 * 3600 + _CLOCK_SLACK


def fold(scalars, runs: list) -> tuple[list, dict]:
    """The runs to judge, and ``{run counted once: the run kept in its place}``.

    Args:
        scalars: the :class:`~msnb.events.tables.ScalarTable` the runs were judged from.
        runs: verdicts (each with ``run`` and ``tag``), in the order to report them.
    """
    series = {r.run: _series(scalars, r.run, r.tag) for r in runs if r.tag is not None}
    kept_for: dict = {}
    groups: list[list] = []
    for r in runs:
        s = series.get(r.run)
        if s is None:
            continue
        for group in groups:
            head = group[0]
            if head.tag == r.tag and _same(series[head.run], s):
                group.append(r)
                break
        else:
            groups.append([r])
    drop = set()
    for group in groups:
        if len(group) < 2:
            continue
        keep = max(group, key=lambda r: series[r.run][3])  # most tags; the first on a tie
        for r in group:
            if r is not keep:
                kept_for[r.run] = keep.run
                drop.add(r.run)
    return [r for r in runs if r.run not in drop], kept_for
