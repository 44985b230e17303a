"""Runs that hold the same loss series, said: each keeps its own verdict.

One job's writers (``train.log``, ``info.log``, TensorBoard) are one run already, by the reader's run identity
(:mod:`msnb.events.identity`).  What is left are runs of different folders holding the same losses: a copy of a
job, or two folders the user named that hold one training.  They are never folded into one (a copy whose
``global_norm`` is NaN must fail, whatever its twin says); the judge only says that their loss series are the
same (same steps, values equal to the print's precision, at least :data:`MIN_POINTS` of them, clocks agreeing
up to a whole time-zone offset: logs print local time).
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


def same_series(scalars, runs: list) -> dict:
    """``{run: the earlier run whose loss series it repeats}``, every run kept.

    Args:
        scalars: the :class:`~msnb.events.tables.ScalarTable` the runs were judged from.
        runs: verdicts (each with ``run`` and ``tag``), in the order they are reported.
    """
    series = {r.run: _series(scalars, r.run, r.tag) for r in runs if r.tag is not None}
    same: dict = {}
    firsts: list = []
    for r in runs:
        s = series.get(r.run)
        if s is None:
            continue
        twin = next((f for f in firsts if f.tag == r.tag and _same(series[f.run], s)), None)
        if twin is None:
            firsts.append(r)
        else:
            same[r.run] = twin.run
    return same
