"""Loss spikes that did not recover: a sudden jump of the run's loss that is still there later.

A one-step spike (a bad batch) is ordinary and the loss comes back; a jump
that stays (a learning-rate step too big, corrupted optimizer state, a bad
resume) is worth a flag.  The run's loss is the median over ranks, in log
space, so one rank's noise does not make a spike and a shared one counts once.
"""

from __future__ import annotations

import math

import numpy as np

from .medians import nan_median
from .rules import DEFAULT_RULES, RankFlag, Rules


def unrecovered_spikes(steps, values, rules: Rules = DEFAULT_RULES):
    """The first jump up that has not recovered ``spike_recovery`` steps later.

    Args:
        steps: ascending steps of the run's loss.
        values: the loss at those steps (NaN ignored).
        rules: ``spike_factor``, ``spike_recovery``, ``spike_k``.

    Returns:
        ``(step, before, after)`` of the jump (means before and after, in the
        loss's units), or None.
    """
    v = np.asarray(values, float)
    ok = np.isfinite(v)
    w = recovery_window(int(ok.sum()), rules)
    if ok.sum() < 2 * w + 1:
        return None
    s, v = np.asarray(steps)[ok], v[ok]
    logged = bool(np.all(v > 0))
    y = np.log(v) if logged else v / (np.median(np.abs(v)) or 1.0)
    c = np.concatenate([[0.0], np.cumsum(y)])
    t = np.arange(w, y.size - w + 1)  # jump between t-1 and t
    pre = (c[t] - c[t - w]) / w
    post = (c[t + w] - c[t]) / w
    q = max(1, w // 4)
    late = (c[t + w] - c[t + w - q]) / q
    d = np.diff(y)
    sigma = max(1.4826 * float(np.median(np.abs(d - np.median(d)))) / math.sqrt(2.0), 1e-6)
    jump = post - pre
    z = jump / (sigma * math.sqrt(2.0 / w))
    need = math.log(rules.spike_factor) if logged else rules.spike_factor - 1.0
    on = (jump > need) & (late - pre > need) & (z > rules.spike_k)
    if not on.any():
        return None
    first = int(np.argmax(on))
    stop = first + int(np.argmax(~on[first:])) if (~on[first:]).any() else on.size
    k = first + int(np.argmax(jump[first:stop]))
    back = (lambda a: float(np.exp(a))) if logged else (lambda a: float(a * (np.median(np.abs(v)) or 1.0)))
    return int(s[t[k]]), back(pre[k]), back(post[k])


def recovery_window(points: int, rules: Rules = DEFAULT_RULES) -> int:
    """The steps a jump must last to count: ``spike_recovery``, or a third of a smoke's points where that does not fit."""
    w = rules.spike_recovery
    if points < 2 * w + 1 and points <= rules.spike_short_points:
        w = max(rules.spike_min_recovery, points // 3)
    return w


def blowup(steps, values, rules: Rules = DEFAULT_RULES):
    """In a smoke (at most ``spike_short_points`` points), the first one-step jump of a positive loss to
    ``spike_blowup`` times the median of the points before it (at least ``spike_min_recovery`` of them).

    Args:
        steps: ascending steps of the run's loss.
        values: the loss at those steps (NaN ignored).
        rules: ``spike_blowup``, ``spike_short_points``, ``spike_min_recovery``.

    Returns:
        ``(step, before, value)``: the step, the median before it and the value there; or None.
    """
    v = np.asarray(values, float)
    ok = np.isfinite(v)
    s, v = np.asarray(steps)[ok], v[ok]
    k = rules.spike_min_recovery
    if v.size > rules.spike_short_points or v.size <= k or not np.all(v > 0):
        return None
    y = np.log(v)
    need = math.log(rules.spike_blowup)
    for i in range(k, y.size):  # a smoke: at most a few hundred medians
        before = float(np.median(y[:i]))
        if y[i] - before > need:
            return int(s[i]), math.exp(before), float(v[i])
    return None


def run_curve(matrix: np.ndarray) -> np.ndarray:
    """The run's loss at each common step: the median over ranks (a rank's NaN ignored)."""
    return nan_median(np.ascontiguousarray(np.where(np.isfinite(matrix), matrix, np.nan).T), axis=1)


def spike_flag(run: str, tag: str, steps, values, rules: Rules = DEFAULT_RULES) -> RankFlag | None:
    """A flag (rank -1: the whole run) for an unrecovered spike, or None."""
    found = unrecovered_spikes(steps, values, rules)
    blown = blowup(steps, values, rules)
    points = int(np.isfinite(np.asarray(values, float)).sum())
    w = recovery_window(points, rules)
    s = np.asarray(steps)
    # a blow-up inside the window after an unrecovered jump is what made that jump: name the blow-up
    if blown is not None and (found is None or int(np.searchsorted(s, blown[0])) <= int(np.searchsorted(s, found[0])) + w):
        step, before, value = blown
        return RankFlag(
            run, -1, tag, step, f"{tag} jumped at step {step} from {before:.4g} (median before) to {value:.4g} in one step: x{value / before:.3g}, a blow-up"
        )
    if found is None:
        return None
    step, before, after = found
    return RankFlag(run, -1, tag, step, f"{tag} jumped at step {step} from {before:.4g} to {after:.4g} (mean of {w} steps) and did not recover")
