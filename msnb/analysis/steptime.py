"""Step time: a warning only where the time says something, a stall or steps slowing down.

A spread of step times alone says little: on a shared CPU (a notebook drawing
its live view, another job) a clean run's 90th percentile can reach twice its
median, and a warning the user can do nothing about teaches them to ignore
warnings.  What they can act on: steps that stopped for a long while (I/O,
a host sync, a checkpoint written in the step) and cost the run real time,
and steps that keep getting slower (a leak, a growing queue).
"""

from __future__ import annotations

import numpy as np

from .rules import DEFAULT_RULES, PASS, WARN, Check, Rules
from .trend import spearman


def _stall(body, med: float, rules: Rules) -> str | None:
    """Why the stalled steps matter, or None: steps far over the median that together lost a share of the run's time."""
    q1, q3 = np.percentile(body, [25, 75])
    far_out = q3 + 3 * (q3 - q1)  # beyond the run's own spread: a noisy CPU's slow steps are within it
    slow = (body > rules.step_time_stall_ratio * med) & (body - med > rules.step_time_stall_ms) & (body > far_out)
    if not slow.any():
        return None
    lost = float(np.sum(body[slow] - med))
    share = lost / float(np.sum(body))
    if share < rules.step_time_stall_share:
        return None
    worst = float(np.max(body[slow]))
    n = int(slow.sum())
    steps = "1 step" if n == 1 else f"{n} steps"
    return f"stalled: {steps} over {rules.step_time_stall_ratio:g}x the median (the longest {worst:.0f} ms) lost {lost / 1000:.2f} s, {share:.0%} of the run's time"


def _trend(body, rules: Rules) -> str | None:
    """Why the steps are slowing down, or None: the last third slower than the first, and time rising with the step."""
    if body.size < 15:
        return None
    third = body.size // 3
    first, last = float(np.median(body[:third])), float(np.median(body[-third:]))
    if not (last > rules.step_time_trend_ratio * first and last - first > rules.step_time_trend_ms):
        return None
    rho = spearman(np.arange(body.size), body)
    if not rho > rules.step_time_trend_rho:
        return None
    return f"slowing down: the last third's steps take {last:.2f} ms, the first third's {first:.2f} ms (medians; rank correlation with the step {rho:.2f})"


def step_time_stability(ms, label: str = "", rules: Rules = DEFAULT_RULES, *, exclude=None) -> Check:
    """``step_time``: warn on a stall or on steps slowing down (see :class:`~msnb.analysis.rules.Rules`), never on noise alone.

    Args:
        ms: step times in milliseconds, in step order.
        label: suffix for the check's name.
        rules: thresholds; the first ``step_time_skip`` fraction (at least 3 steps) is compilation and not judged.
        exclude: optional boolean mask of steps slower by design (e.g. collecting steps), left out when 5 others remain.

    Returns:
        The check.
    """
    ms = np.asarray(ms, float)
    ms = ms[np.isfinite(ms)] if exclude is None else ms
    name = f"step_time{label}"
    if ms.size < 5:
        return Check(name, WARN, f"only {ms.size} timed steps")
    skip = max(3, int(ms.size * rules.step_time_skip))
    body = ms[skip:]
    if exclude is not None:
        ex = np.asarray(exclude, bool)[skip:]
        body = body[~ex] if (~ex).sum() >= 5 else body
    body = body[np.isfinite(body)]
    if body.size == 0:
        return Check(name, WARN, "no timed steps after compilation")
    med = float(np.median(body))
    p90 = float(np.percentile(body, 90))
    detail = f"median {med:.2f} ms, p90 {p90:.2f} ms after the first {skip} steps (first step {ms[0]:.0f} ms: compilation and start-up)"
    found = [why for why in (_stall(body, med, rules), _trend(body, rules)) if why]
    if found:
        return Check(name, WARN, "; ".join(found) + "; " + detail)
    return Check(name, PASS, "no stall, no slowing down: " + detail)
