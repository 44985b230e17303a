"""Which ranks of a data-parallel run have left the others, judged against the noise between them.

Ranks see different batches, so their losses differ step to step (30 % and
more with small batches) but follow one trend.  So:

1. Work in log space when the loss is positive: the common trend and a spike
   every rank saw (a bad batch, a learning-rate jump) cancel in differences,
   and relative noise becomes additive.
2. Residual of each rank against the ranks' median at each step (three ranks
   or more: the median ignores the one that leaves).  With two ranks there is
   no median that helps: the gap between them is judged instead.
3. The residual's noise scale comes from its step-to-step differences
   (which a slow drift hardly moves).
4. Moving means of the residual over several windows (short ones catch jumps,
   long ones slow drifts) become z-scores against that scale.  A rank is
   flagged where a z-score stays beyond ``divergence_k`` *and* the mean gap
   beyond ``divergence_min_gap`` for ``divergence_patience`` consecutive steps.
5. The step reported is where the departure began, not where it became
   visible: the start that best explains the residual up to the crossing as
   a level step plus a linear ramp (least squares, :func:`change_point`).

With two ranks a flag says that two ranks cannot tell which one is wrong,
unless one is clearly the odd one: its level moved at the onset while the
other kept the run's earlier trend (see :func:`_odd_one`).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import replace

import numpy as np

from .medians import nan_median
from .rules import DEFAULT_RULES, RankFlag, Rules
from .series import align, curves


def _transform(matrix: np.ndarray):
    """Log of a positive loss (relative noise, shared spikes cancel), else values scaled by their typical size."""
    finite = np.isfinite(matrix)
    if finite.any() and not np.any(finite & ~(matrix > 0)):  # every finite value positive (no copy of them)
        out = np.where(finite, matrix, 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            np.log(out, out=out)
        out[~finite] = np.nan
        return out, True
    vals = matrix[finite]
    scale = float(np.median(np.abs(vals))) if vals.size else 1.0
    return np.where(finite, matrix / (scale or 1.0), np.nan), False


def _noise_scale(e: np.ndarray) -> np.ndarray:
    """Per-row noise of a residual, from its step-to-step differences.

    Differences remove a slow drift, so a drifting rank does not hide itself
    by inflating its own scale.  The standard deviation (not a MAD) is what
    a moving mean's spread follows, also for skewed, heavy-tailed batch noise;
    differences beyond 10 MADs are clipped so one absurd value cannot blind
    the rule.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        d = np.diff(e, axis=1)
        ds = _sample(d)
        med = nan_median(ds, 1, True)
        mad = 1.4826 * nan_median(np.abs(ds - med), 1, True)
        lim = 10 * np.maximum(mad, 1e-12)
        d -= med  # in place, as every step below: a (ranks x steps) matrix at a time, not four
        np.clip(d, -lim, lim, out=d)
        np.multiply(d, d, out=d)
        sigma = np.sqrt(np.nanmean(d, axis=1) / 2.0)
    return np.maximum(np.nan_to_num(sigma, nan=0.0), 1e-4)


def _winsorize(e: np.ndarray, rules: Rules) -> np.ndarray:
    """Clip each row's residuals at 5 robust scales (never below 3 minimum gaps): a few wild batches cannot fake a departure."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        es = _sample(e)
        med = nan_median(es, 1, True)
        mad = 1.4826 * nan_median(np.abs(es - med), 1, True)
    lim = np.maximum(5 * np.nan_to_num(mad, nan=0.0), 3 * rules.divergence_min_gap)
    return np.clip(e, -lim, lim)


def _first_persistent(hit: np.ndarray, patience: int) -> np.ndarray:
    """Per row, index where *hit* first holds for *patience* consecutive columns, or -1."""
    c = np.cumsum(hit, axis=1)
    reset = np.maximum.accumulate(np.where(~hit, c, 0), axis=1)
    run = c - reset
    done = run >= patience
    first = np.where(done.any(axis=1), np.argmax(done, axis=1) - patience + 1, -1)
    return first


def _median_rows(a: np.ndarray, every: int = 1) -> np.ndarray:
    """Median over rows per column; with *every* > 1 computed on every n-th column and interpolated (for slow-moving medians)."""
    if every <= 1 or a.shape[1] <= 4 * every:
        return nan_median(np.ascontiguousarray(a.T), axis=1)
    cols = np.arange(0, a.shape[1], every)
    return np.interp(np.arange(a.shape[1]), cols, nan_median(np.ascontiguousarray(a[:, cols].T), axis=1))


def _sample(a: np.ndarray, most: int = 4096) -> np.ndarray:
    """At most *most* evenly spaced columns of *a*: robust scales do not need every point."""
    return a if a.shape[1] <= most else a[:, :: -(-a.shape[1] // most)]


def departures(e: np.ndarray, rules: Rules = DEFAULT_RULES, *, center: bool = False):
    """Where each row of a residual matrix departs from zero beyond its noise, persistently.

    Args:
        e: residuals (rows x steps), NaN where a value is missing.
        rules: ``divergence_windows``, ``divergence_k``, ``divergence_min_gap``, ``divergence_patience``.
        center: subtract the rows' median of each moving mean (three ranks or
            more: skewed batch noise makes every rank's mean residual against
            the median non-zero alike; this removes that shared bias).

    Returns:
        ``(crossing, onset, gap, z, sigma)`` per row: column where the
        persistent departure starts (-1 for none), column where it began,
        the mean gap and z-score at the crossing, and the noise scale.
    """
    rows, t = e.shape
    valid = np.isfinite(e)
    complete = bool(valid.all())
    e = _winsorize(e, rules)
    e0 = np.where(valid, e, 0.0)
    sigma = _noise_scale(e)
    del e  # winsorized: only e0 is needed from here on
    c0 = _cumulative(e0)
    n0 = None if complete else _cumulative(valid)
    windows = [w for w in rules.divergence_windows if w <= t]

    def window_mean(w, cols=slice(None)):
        """Moving mean over *w* steps ending at each column >= w-1 (and how many values it saw)."""
        s = c0[cols, w:] - c0[cols, :-w]
        if n0 is None:
            s /= w
            return s, float(w)
        n = n0[cols, w:] - n0[cols, :-w]
        s /= np.maximum(n, 1)
        s[~(n > 0)] = 0.0
        return s, n

    hit = np.zeros((rows, t), dtype=bool)
    centers = {}
    for w in windows:
        m, n = window_mean(w)
        if center:
            centers[w] = _median_rows(m, every=max(1, w // 4))  # the shared bias moves slowly: a median every w/4 steps is enough
            m = m - centers[w]
        if n0 is None:
            z = m * (np.sqrt(n) / sigma[:, None])
        else:
            z = np.sqrt(n)
            z /= sigma[:, None]
            z *= m
        np.abs(z, out=z)
        on = z > rules.divergence_k
        del z
        np.abs(m, out=m)
        on &= m > rules.divergence_min_gap
        del m
        if n0 is not None:
            on &= n >= w / 2
        del n
        hit[:, w - 1 :] |= on
    crossing = _first_persistent(hit, rules.divergence_patience)
    onset = np.full(rows, -1)
    gap = np.zeros(rows)
    zs = np.zeros(rows)
    for i in np.flatnonzero(crossing >= 0):
        j = crossing[i]
        end = min(j + rules.divergence_patience - 1, t - 1)
        for w in windows:  # the window that saw the departure most clearly at its end
            if end < w - 1:
                continue
            m, n = window_mean(w, slice(i, i + 1))
            k = end - (w - 1)
            mk = float(m[0, k] - (centers[w][k] if center else 0.0))
            nk = float(n if n0 is None else n[0, k])
            zk = mk * math.sqrt(nk) / sigma[i]
            if abs(mk) > rules.divergence_min_gap and abs(zk) > abs(zs[i]):
                gap[i], zs[i] = mk, zk
        onset[i] = change_point(e0[i, : end + 1] * ((1.0 if zs[i] >= 0 else -1.0) / sigma[i]))
    return crossing, onset, gap, zs, sigma


def _cumulative(a: np.ndarray) -> np.ndarray:
    """A zero column, then the running sums of each row of *a*, as float64 (written in place: no second matrix)."""
    out = np.empty((a.shape[0], a.shape[1] + 1))
    out[:, 0] = 0.0
    np.cumsum(a, axis=1, out=out[:, 1:])
    return out


def change_point(x: np.ndarray) -> int:
    """Where a departure (upwards) of *x* began: the best least-squares start of a level step, a ramp, or both.

    For each candidate start, the sum of squares explained by "zero before,
    then a constant", "zero before, then a straight ramp", and "zero before,
    then both" (the two-parameter fit pays ``log n`` for its extra parameter,
    a BIC penalty, so noise does not pull the start); the start that explains
    most wins.  Cumulative sums make every start cost O(1).

    Args:
        x: the residual up to the end of the departure in noise scales (oriented upwards, NaN as 0).

    Returns:
        Index in *x* where the departure began.
    """
    n_all = x.size
    tau = np.arange(n_all, dtype=float)
    k = np.arange(n_all, dtype=float)
    s0 = np.cumsum(x[::-1])[::-1]  # sum of x[tau:]
    s1 = np.cumsum((k * x)[::-1])[::-1]  # sum of t * x[tau:]
    n = n_all - tau
    lin = s1 - tau * s0  # sum of (t - tau) x_t
    a = n * (n - 1) / 2.0  # sum of (t - tau)
    b = (n - 1) * n * (2 * n - 1) / 6.0  # sum of (t - tau)^2
    det = n * b - a * a
    with np.errstate(invalid="ignore", divide="ignore"):
        level = s0 * s0 / n
        ramp = np.where((lin > 0) & (b > 0), lin * lin / b, 0.0)
        both = np.where(det > 0, (b * s0 * s0 - 2 * a * s0 * lin + n * lin * lin) / det, level) - math.log(max(n_all, 2))
    explained = np.where(s0 > 0, np.maximum(np.maximum(level, ramp), both), 0.0)
    return int(np.argmax(explained))


def _slope(x: np.ndarray, y: np.ndarray):
    """Least-squares slope of *y* over *x* and its standard error (NaN, inf when too few points)."""
    ok = np.isfinite(y)
    if ok.sum() < 10:
        return float("nan"), float("inf")
    x, y = x[ok].astype(float), y[ok]
    xc = x - x.mean()
    sxx = float(np.sum(xc * xc))
    b = float(np.sum(xc * (y - y.mean())) / sxx)
    resid = y - y.mean() - b * xc
    se = math.sqrt(float(np.sum(resid * resid)) / max(1, x.size - 2) / sxx)
    return b, se


def _odd_one(y: np.ndarray, onset: int, end: int) -> int | None:
    """Of two ranks, the one that moved at the onset while the other kept the run's trend; None when that is unclear.

    Each rank's mean level after the onset is compared with its level before,
    less what the run's earlier trend predicts, in units of that rank's own
    noise: the odd one moved clearly (over 5 scales) and over three times as
    much as the other.  Without steps before the onset, a rank that clearly
    rises while the other does not is the odd one.
    """
    k = max(10, end - onset + 1)
    if onset >= k and onset + k <= y.shape[1]:
        lo = max(0, onset - 3 * k)
        x = np.arange(lo, onset)
        trend, _se = _slope(np.tile(x, 2), np.concatenate([y[0, lo:onset], y[1, lo:onset]]))
        trend = 0.0 if not math.isfinite(trend) else trend
        score = []
        for i in range(2):
            before, after = y[i, onset - k : onset], y[i, onset : onset + k]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                moved = float(np.nanmean(after) - np.nanmean(before)) - trend * k
                sigma = float(np.nanstd(np.diff(y[i, lo:onset]))) / math.sqrt(2.0)
            score.append(abs(moved) / max(sigma * math.sqrt(2.0 / k), 1e-9) if math.isfinite(moved) else 0.0)
        a = int(np.argmax(score))
        if score[a] > 5 and score[a] > 3 * score[1 - a]:
            return a
        return None
    stop = min(y.shape[1], onset + max(end - onset + 1, 200))
    x = np.arange(onset, stop)
    fits = [_slope(x, y[i, onset:stop]) for i in range(2)]
    for i in range(2):
        (b, se), (other, other_se) = fits[i], fits[1 - i]
        if math.isfinite(b) and b > 3 * se and not other > 2 * other_se:
            return i
    return None


def rank_divergence(scalars, tag: str = "loss", *, rules: Rules = DEFAULT_RULES, threshold: float | None = None, run=None) -> list[RankFlag]:
    """Flags for ranks that departed from the others, in every run of *scalars* with two or more ranks.

    Args:
        scalars: a ScalarTable as ``msnb.read`` returns it.
        tag: the real tag to judge (resolve aliases first).
        rules: the divergence parameters (see :class:`~msnb.analysis.rules.Rules`).
        threshold: minimum relative gap (0.2 = 20 %), overriding ``rules.divergence_min_gap``.
        run: only this run.

    Returns:
        One flag per departed rank (with two ranks at most one flag per run),
        at the step the departure began.
    """
    return [flag for flag, _visible in divergence_details(scalars, tag, rules=rules, threshold=threshold, run=run)]


def divergence_details(scalars, tag: str = "loss", *, rules: Rules = DEFAULT_RULES, threshold: float | None = None, run=None, curve_list=None) -> list:
    """Like :func:`rank_divergence`, with the step at which each departure became visible: ``[(flag, visible_step)]``."""
    if threshold is not None:
        rules = replace(rules, divergence_min_gap=math.log1p(threshold))
    flags: list = []
    by_run: dict = {}
    for c in curve_list if curve_list is not None else curves(scalars, tag, run=run):
        if c.rank >= 0:
            by_run.setdefault(c.run, []).append(c)
    for name, cs in sorted(by_run.items()):
        if len(cs) < 2:
            continue
        steps, raw = align(cs)
        if steps.size < rules.divergence_patience + 2:
            continue
        y, logged = _transform(raw)
        del raw
        ranks = [c.rank for c in cs]
        if len(cs) >= 3:
            e = y - _median_rows(y)
            y = None  # only two ranks need it again: its memory goes back before the departures are looked for
        else:
            e = (y[1] - y[0])[None, :]
        crossing, onset, gap, z, sigma = departures(e, rules, center=len(cs) >= 3)
        for i in np.flatnonzero(crossing >= 0):
            j, o = int(crossing[i]), int(onset[i])
            end = min(j + rules.divergence_patience - 1, steps.size - 1)
            size = f"{math.expm1(abs(gap[i])):.0%}" if logged else f"{abs(gap[i]):.2g} typical sizes"
            noise = f"{sigma[i]:.1%}" if logged else f"{sigma[i]:.2g}"
            if len(cs) >= 3:
                r = ranks[i]
                where = "above" if gap[i] > 0 else "below"
                reason = (
                    f"{tag} of rank {r} departs from the ranks' median from step {steps[o]}: {size} {where} it by step {steps[end]} "
                    f"({abs(z[i]):.1f} noise scales; rank-to-rank noise {noise} a step)"
                )
            else:
                odd = _odd_one(y, o, end)
                higher = 1 if gap[i] > 0 else 0
                r = ranks[higher if odd is None else odd]
                reason = (
                    f"{tag} of ranks {ranks[0]} and {ranks[1]} part from step {steps[o]}: rank {ranks[higher]} {size} higher by step {steps[end]} "
                    f"({abs(z[i]):.1f} noise scales; gap noise {noise} a step); "
                    + ("two ranks cannot tell which one is wrong" if odd is None else f"rank {r} is the one that moved")
                )
            flags.append((RankFlag(name, r, tag, int(steps[o]), reason), int(steps[j])))
    return flags
