"""Step-time stability: a p90 far above the median means stalls (I/O, host sync, another job)."""

from __future__ import annotations

import numpy as np

from .rules import DEFAULT_RULES, PASS, WARN, Check, Rules


def step_time_stability(ms, label: str = "", rules: Rules = DEFAULT_RULES, *, exclude=None) -> Check:
    """``step_time``: warn when the 90th percentile is over ``step_time_ratio`` x the median and ``step_time_min_ms`` above it.

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
    unstable = p90 > rules.step_time_ratio * med and p90 - med > rules.step_time_min_ms
    detail = f"median {med:.2f} ms, p90 {p90:.2f} ms after the first {skip} steps (first step {ms[0]:.0f} ms: compilation and start-up)"
    return Check(name, WARN if unstable else PASS, (f"unstable: p90 is {p90 / med:.1f}x the median; " if unstable else "stable: ") + detail)
