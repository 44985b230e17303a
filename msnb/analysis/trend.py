"""Is the loss falling, rising or did it never fall?  Mann-Kendall's rank test, so noise and scale do not fool it.

The trend is judged from the run's start: over the whole run and over its
first 10, 20, 40 ... points (``min_points`` doubled), so a run that fell fast
and then flattened (converged) is told apart from one that never fell, whose
last stretch looks the same.  The p-values are exact for short series
(:mod:`msnb.analysis.kendall`) and Bonferroni-corrected for the number of
stretches looked at.
"""

from __future__ import annotations

import numpy as np

from ..words import count
from .kendall import PrefixTrends, Trend, mann_kendall
from .rules import DEFAULT_RULES, FAIL, PASS, SKIP, WARN, Check, Rules
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


def block_means(values, most: int):
    """*values* as means of consecutive points, at most *most* of them, so a million-step run is judged in milliseconds.

    Mann-Kendall's S over every pair grows as n log n at best; beyond a few ten
    thousand points the means of short runs of steps carry the same trend (and
    less of the step-to-step correlation the test assumes away).

    Args:
        values: the series.
        most: the most points judged.

    Returns:
        ``(judged, per)``: the means (the values themselves when they are few enough) and how many points each covers
        (the last mean may cover fewer).
    """
    values = np.asarray(values, float)
    n = values.size
    if n <= most:
        return values, 1
    per = -(-n // most)
    starts = np.arange(0, n, per)
    return np.add.reduceat(values, starts) / np.diff(np.append(starts, n)), per


def stretches(n: int, first: int) -> list[int]:
    """The prefix lengths the fall is looked for in: *first*, twice that, ... below *n*, and *n* itself.

    Args:
        n: points in the series.
        first: the shortest stretch (``Rules.min_points``).

    Returns:
        Increasing lengths, the last one *n*.
    """
    out, m = [], max(2, first)
    while m < n:
        out.append(m)
        m *= 2
    return out + [n]


def loss_trend(steps, values, label: str = "", rules: Rules = DEFAULT_RULES, cause: str | None = None, ranks: int = 1) -> Check:
    """``loss_falling``: pass when the loss fell from the run's start, fail when it rose or never fell.

    Rising (fail): the whole run rises significantly (one-sided p below
    ``trend_p``) and ends above where it began (smoothed), or the smoothed
    tail ends above ``rising_factor`` times the head; when *cause* says nothing trained, a rise is the batches' order
    and the failure says the loss never fell, with the cause, instead of divergence.  Fell (pass): the whole run, or a stretch from its start (see
    :func:`stretches`), falls with a p below ``trend_p`` after multiplying by
    the number of stretches; the loss may have flattened since (``loss_stalled``
    says so).  Below ``trend_weak_p`` only: a warning (too noisy to be sure), or a failure when *cause* says
    nothing trained (a learning rate of 0 cannot make a loss fall: the weak trend is the batches' order).
    Otherwise the loss never fell: a failure, with *cause* when one is known.

    Args:
        steps: steps of the finite loss values, increasing.
        values: the loss (finite values only).
        label: suffix for the check's name (``[rank 1]``).
        rules: ``trend_p``, ``trend_weak_p``, ``rising_factor``, ``min_points``, ``smooth``, ``trend_max_points``.
        cause: what the run's other records say about a loss that did not move
            (:func:`msnb.analysis.stuck.likely_cause`), added to a failure or a warning.
        ranks: how many ranks *values* is the median of (said in the detail).

    Returns:
        The check; its detail says how many points were judged and the test's numbers.
    """
    steps, values = np.asarray(steps), np.asarray(values, float)
    name = f"loss_falling{label}"
    n = values.size
    if n < rules.min_points:
        return Check(name, WARN, f"only {n} loss points: too few to judge a trend (at least {rules.min_points})", outcome="too short")
    judged, per = block_means(values, rules.trend_max_points)
    prefixes = PrefixTrends(judged)
    whole = prefixes.at(judged.size)
    lengths = stretches(judged.size, rules.min_points)
    best: Trend = min((prefixes.at(m) for m in lengths), key=lambda t: (t.p_falling, -t.n))
    p_fell = min(1.0, best.p_falling * len(lengths))
    head, tail, change = _head_tail(values, rules.smooth)
    unit = "points" if per == 1 else f"means of {per} points"
    blocks = f", judged as {judged.size} means of {per} consecutive points" if per > 1 else ""
    where = f"{count(n, 'point')} (steps {int(steps[0])}-{int(steps[-1])}{f', median of {ranks} ranks' if ranks > 1 else ''}{blocks})"
    smoothed = f"smoothed loss {head:.4g} -> {tail:.4g} ({change:+.0%})"
    if tail > rules.rising_factor * abs(head) or (whole.p_rising < rules.trend_p and tail > head):
        if cause:  # nothing trained (lr 0, frozen weights): a rise is the batches' order, not divergence
            return Check(
                name,
                FAIL,
                f"loss never fell: it rose while nothing trained (the batches' order, not divergence): Mann-Kendall over {where}: "
                f"{whole.describe('rising')}; {smoothed}; likely cause: {cause}",
                outcome="flat",
            )
        return Check(name, FAIL, f"loss is rising (diverging): Mann-Kendall over {where}: {whole.describe('rising')}; {smoothed}", outcome="rising")
    k = len(lengths)
    span = lambda t: f"steps {int(steps[0])}-{int(steps[min(t.n * per, n) - 1])}"  # noqa: E731
    if p_fell < rules.trend_p:
        if whole.p_falling * k < rules.trend_p:
            return Check(name, PASS, f"loss falls: Mann-Kendall over all {where}: {whole.describe()}; {smoothed}", outcome="falling")
        return Check(
            name,
            PASS,
            f"loss fell over the first {best.n} {unit} ({span(best)}: {best.describe()}; p x {k} stretches looked at = {p_fell:.2g}), "
            f"then stopped falling (converged?): over all {where}: {whole.describe()}; {smoothed}",
            outcome="falling",
        )
    looked = f"{', '.join(str(m) for m in lengths[:-1])} {unit} and all" if k > 1 else "all"
    over = (
        f"Mann-Kendall over all {where}: {whole.describe()}; the best of the first {looked}: "
        f"{best.n} {unit} ({span(best)}, tau {best.tau:+.2f}, p {best.p_falling:.2g} x {k} = {p_fell:.2g})"
    )
    why = f"; likely cause: {cause}" if cause else ""
    if p_fell < rules.trend_weak_p and not cause:
        return Check(name, WARN, f"only a weak downward trend (too noisy to be sure): {over}; {smoothed}", outcome="flat")
    if p_fell < rules.trend_weak_p:  # nothing trained (lr 0, frozen weights): a weak trend is the batches' order, not learning
        return Check(name, FAIL, f"loss never fell: only a weak downward trend while nothing trained: {over}; {smoothed}{why}", outcome="flat")
    if n < rules.flat_fail_points and not cause:
        return Check(
            name,
            WARN,
            f"no downward trend in only {n} points (fewer than {rules.flat_fail_points}: too few to call it never fell): {over}; {smoothed}",
            outcome="flat",
        )
    return Check(name, FAIL, f"loss never fell: no downward trend from the start: {over}; {smoothed}{why}", outcome="flat")


def loss_stall(steps, values, label: str = "", rules: Rules = DEFAULT_RULES) -> Check:
    """``loss_stalled``: warn when the last part of the run no longer lowers the loss (converged, or stuck).

    Args:
        steps: steps of the finite loss values.
        values: the loss (finite values only).
        label: suffix for the check's name.
        rules: ``stall_fraction``, ``stall_min_points``, ``stall_min_change``, ``trend_p``, ``trend_max_points``.

    Returns:
        The check (pass or warn, skip when too short to judge; a stall alone never fails a run).
    """
    steps, values = np.asarray(steps), np.asarray(values, float)
    name = f"loss_stalled{label}"
    n = max(rules.stall_min_points, int(values.size * rules.stall_fraction))
    if values.size < 2 * rules.stall_min_points:
        return Check(name, SKIP, f"not judged: only {values.size} loss points (at least {2 * rules.stall_min_points})")
    s, v = steps[-n:], values[-n:]
    trend = mann_kendall(block_means(v, rules.trend_max_points)[0])
    half = n // 2
    before, after = float(np.mean(v[:half])), float(np.mean(v[half:]))
    change = (after - before) / abs(before) if before else float("nan")
    detail = f"last {n} points (steps {int(s[0])}-{int(s[-1])}): {trend.describe()}, mean {before:.4g} -> {after:.4g} from one half to the next ({change:+.1%})"
    if trend.p_falling >= rules.trend_p and abs(change) < rules.stall_min_change:
        return Check(name, WARN, "loss stalled (converged, or stuck: learning rate, frozen weights, data?): " + detail, outcome="stalled")
    return Check(name, PASS, ("still falling: " if change < 0 else "not flat: ") + detail)
