"""Mann-Kendall's trend statistic for every prefix of a series at once, and how likely it is without a trend.

``S = sum over pairs i < j of sign(y_j - y_i)``: positive when the series
rises, negative when it falls, scale-free and blind to the curve's shape (1/t,
exp, a staircase all fall).  Without a trend every order of the values is
equally likely, and for ``n`` distinct values ``S = n(n-1)/2 - 2 I`` where
``I`` is the number of inversions of a uniformly random permutation.  Its
distribution is computed exactly (integer counts by the standard recursion)
up to :data:`EXACT_MAX` points, because the normal approximation is too
cautious for short series (a 10-point log falling 85 % is a clear fall);
beyond that, or when values repeat (the exact law assumes none), the normal
approximation with the tie-corrected variance and a continuity correction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from itertools import accumulate

import numpy as np

EXACT_MAX = 60  # up to this many points (without ties) the null distribution is exact: n! fits any Python int, the counts take milliseconds


@cache
def inversion_counts(n: int) -> tuple[int, ...]:
    """How many permutations of *n* items have 0, 1, ... n(n-1)/2 inversions (Mahonian numbers), exactly.

    Recursion: placing the n-th item adds 0 ... n-1 inversions, so
    ``N(n, k) = sum_{j=0}^{min(k, n-1)} N(n-1, k-j)``.

    Args:
        n: the number of items (0 and 1 give one arrangement).

    Returns:
        The counts, indexed by the number of inversions; they sum to ``n!``.
    """
    if n <= 1:
        return (1,)
    prev = inversion_counts(n - 1)
    cum = list(accumulate(prev, initial=0))  # cum[i] = sum(prev[:i])
    size = len(prev) + n - 1
    return tuple(cum[min(k + 1, len(prev))] - cum[max(0, k - n + 1)] for k in range(size))


def exact_tails(n: int, s: int) -> tuple[float, float]:
    """``P(S <= s)`` and ``P(S >= s)`` for *n* distinct values in random order (no trend), exactly.

    Args:
        n: points.
        s: the statistic observed.

    Returns:
        (p of a fall at least this strong, p of a rise at least this strong).
    """
    counts = inversion_counts(n)
    pairs = n * (n - 1) // 2
    total = math.factorial(n)
    # S = pairs - 2 I: S <= s  <=>  I >= (pairs - s) / 2, S >= s  <=>  I <= (pairs - s) / 2
    at_least = max(0, math.ceil((pairs - s) / 2))
    at_most = math.floor((pairs - s) / 2)
    low = sum(counts[at_least:]) / total
    high = sum(counts[: at_most + 1]) / total if at_most >= 0 else 0.0
    return min(1.0, low), min(1.0, high)


def _normal_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


@dataclass(frozen=True)
class Trend:
    """Mann-Kendall's answer for one series: ``n`` points, ``s``, Kendall's ``tau`` (tau-b: ties allowed),
    ``p_falling`` / ``p_rising`` (one-sided: how likely a fall / rise at least this strong is without any trend),
    and ``exact`` (the p-values come from the exact distribution, not the normal approximation)."""

    n: int
    s: int
    tau: float
    p_falling: float
    p_rising: float
    exact: bool

    def describe(self, direction: str = "falling") -> str:
        """``Kendall tau -0.62, p 3.1e-09 (exact)``, with the p of *direction* (``falling`` or ``rising``)."""
        p = self.p_falling if direction == "falling" else self.p_rising
        return f"Kendall tau {self.tau:+.2f}, p {p:.2g} ({'exact' if self.exact else 'normal approximation'})"


class PrefixTrends:
    """Mann-Kendall's statistic of every prefix ``values[:m]`` of a series, from one O(n sqrt n) pass.

    Each point's contribution ``sum_{i<j} sign(y_j - y_i)`` is counted against the sorted earlier points
    (binary search, a block at a time) and within its block (one small matrix), so the prefix sums give
    ``S`` of every prefix; the tie terms of the variance are counted the same way.

    Args:
        values: finite values in step order (steps strictly increasing).
    """

    def __init__(self, values):
        y = np.asarray(values, dtype=np.float64)
        n = y.size
        contrib = np.zeros(n, dtype=np.int64)
        block = max(64, math.isqrt(max(n, 1)))
        seen = np.empty(0)
        for start in range(0, n, block):
            b = y[start : start + block]
            if seen.size:
                below = np.searchsorted(seen, b, "left")  # earlier points lower than each
                above = seen.size - np.searchsorted(seen, b, "right")  # earlier points higher
                contrib[start : start + b.size] += below - above
            contrib[start : start + b.size] += np.tril(np.sign(b[:, None] - b[None, :]), -1).sum(axis=1).astype(np.int64)
            bs = np.sort(b)
            seen = np.insert(seen, np.searchsorted(seen, bs), bs)
        self.s = np.cumsum(contrib)
        # occurrence of each value among the equal ones before it: the ties each new point adds
        order = np.argsort(y, kind="stable")
        ys = y[order]
        fresh = np.r_[True, ys[1:] != ys[:-1]] if n else np.zeros(0, bool)
        start_of_group = np.maximum.accumulate(np.where(fresh, np.arange(n), 0)) if n else np.zeros(0, np.int64)
        occ = np.empty(n, dtype=np.int64)
        occ[order] = np.arange(n) - start_of_group
        self.tied_pairs = np.cumsum(occ)  # sum over tie groups of t(t-1)/2
        f = lambda t: t * (t - 1) * (2 * t + 5)  # noqa: E731 - the variance's tie term of a group of t
        self.tie_term = np.cumsum(f(occ + 1) - f(occ))
        self.n = n

    def at(self, m: int) -> Trend:
        """The trend of the first *m* points.

        Args:
            m: the prefix length (1 ... n).

        Returns:
            The :class:`Trend`; fewer than 2 points or all values equal: no evidence either way (p 1).
        """
        if m < 2:
            return Trend(m, 0, 0.0, 1.0, 1.0, True)
        s = int(self.s[m - 1])
        pairs = m * (m - 1) // 2
        tied = int(self.tied_pairs[m - 1])
        tau = s / math.sqrt(pairs * (pairs - tied)) if pairs > tied else 0.0
        ties = int(self.tie_term[m - 1])
        if ties == 0 and m <= EXACT_MAX:
            low, high = exact_tails(m, s)
            return Trend(m, s, tau, low, high, True)
        var = (m * (m - 1) * (2 * m + 5) - ties) / 18.0
        if var <= 0:
            return Trend(m, s, tau, 1.0, 1.0, False)
        sd = math.sqrt(var)
        return Trend(m, s, tau, _normal_cdf((s + 1) / sd), _normal_cdf(-(s - 1) / sd), False)


def mann_kendall(values) -> Trend:
    """Mann-Kendall's trend test of *values* (in step order, finite).

    Args:
        values: the series.

    Returns:
        Its :class:`Trend`.
    """
    p = PrefixTrends(values)
    return p.at(p.n)
