"""Is the loss falling, rising or stalled?  Rank correlation, so noise and scale do not fool it.

Spearman's rho between step and loss ignores the curve's shape (1/t, exp, a
staircase all fall) and outliers; under "no trend" rho is about N(0, 1/(n-1)),
so ``z = rho * sqrt(n - 1)`` says how sure the direction is.
"""

from __future__ import annotations

import math

import numpy as np

from .rules import DEFAULT_RULES, FAIL, PASS, WARN, Check, Rules
from .smoothing import ema


def spearman(x, y) -> float:
    """Spearman's rank correlation of *x* and *y* (ties get average ranks); NaN under 3 points, 0 when one is constant."""

    def ranks(a):
        order = np.argsort(a, kind="stable")
        r = np.empty(len(a))
        r[order] = np.arange(len(a))
        _vals, inv, counts = np.unique(a, return_inverse=True, return_counts=True)
        sums = np.bincount(inv, weights=r)
        return (sums / counts)[inv]

    if len(x) < 3:
        return float("nan")
    rx, ry = ranks(np.asarray(x, float)), ranks(np.asarray(y, float))
    sx, sy = rx.std(), ry.std()
    if sx == 0 or sy == 0:
        return 0.0
    return float(((rx - rx.mean()) * (ry - ry.mean())).mean() / (sx * sy))


def _head_tail(values, smooth: float):
    s = ema(values, smooth)
    k = max(3, values.size // 10)
    head, tail = float(np.mean(s[:k])), float(np.mean(s[-k:]))
    return head, tail, ((tail - head) / abs(head) if head else float("nan"))


def loss_trend(steps, values, label: str = "", rules: Rules = DEFAULT_RULES) -> Check:
    """``loss_falling``: pass when the loss clearly falls, fail when it rises, warn when unclear or too short.

    Args:
        steps: steps of the finite loss values.
        values: the loss (finite values only).
        label: suffix for the check's name (``[rank 1]``).
        rules: thresholds (``trend_rho``, ``trend_z``, ``rising_factor``, ``min_points``, ``smooth``).

    Returns:
        The check.
    """
    steps, values = np.asarray(steps), np.asarray(values, float)
    name = f"loss_falling{label}"
    if values.size < rules.min_points:
        return Check(name, WARN, f"only {values.size} loss points: too few to judge a trend")
    rho = spearman(steps, values)
    z = rho * math.sqrt(values.size - 1)
    head, tail, change = _head_tail(values, rules.smooth)
    detail = f"Spearman rho {rho:+.2f} over {values.size} points (z {z:+.1f}); smoothed loss {head:.4g} -> {tail:.4g} ({change:+.0%})"
    if tail > rules.rising_factor * abs(head) or (rho > rules.trend_rho and z > rules.trend_z):
        return Check(name, FAIL, "loss is rising (diverging): " + detail)
    if rho < -rules.trend_rho and z < -rules.trend_z:
        return Check(name, PASS, "loss falls: " + detail)
    return Check(name, WARN, "no clear downward trend: " + detail)


def loss_stall(steps, values, label: str = "", rules: Rules = DEFAULT_RULES) -> Check:
    """``loss_stalled``: warn when the last part of the run no longer lowers the loss (converged, or stuck).

    Args:
        steps: steps of the finite loss values.
        values: the loss (finite values only).
        label: suffix for the check's name.
        rules: ``stall_fraction``, ``stall_min_points``, ``stall_min_change``, ``trend_z``.

    Returns:
        The check (pass or warn; a stall alone never fails a run).
    """
    steps, values = np.asarray(steps), np.asarray(values, float)
    name = f"loss_stalled{label}"
    n = max(rules.stall_min_points, int(values.size * rules.stall_fraction))
    if values.size < 2 * rules.stall_min_points:
        return Check(name, PASS, f"only {values.size} loss points: not judged")
    s, v = steps[-n:], values[-n:]
    rho = spearman(s, v)
    z = rho * math.sqrt(n - 1)
    half = n // 2
    before, after = float(np.mean(v[:half])), float(np.mean(v[half:]))
    change = (after - before) / abs(before) if before else float("nan")
    detail = f"last {n} points (steps {int(s[0])}-{int(s[-1])}): rho {rho:+.2f} (z {z:+.1f}), mean {before:.4g} -> {after:.4g} from one half to the next ({change:+.1%})"
    if z > -rules.trend_z and abs(change) < rules.stall_min_change:
        return Check(name, WARN, "loss stalled (converged, or stuck: learning rate, frozen weights, data?): " + detail)
    return Check(name, PASS, ("still falling: " if change < 0 else "not flat: ") + detail)
