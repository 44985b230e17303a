"""loss_falling: Mann-Kendall's test with its exact small-sample law, checked against brute force and scipy, and the
judgement it gives on the cases that matter: a short log that falls, a run that fell then flattened, a run that never fell."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from msnb.analysis import DEFAULT_RULES, likely_cause, loss_trend, mann_kendall, spearman
from msnb.analysis.judge import judge_run
from msnb.analysis.kendall import EXACT_MAX, PrefixTrends, exact_tails, inversion_counts
from msnb.analysis.rules import FAIL, WARN
from msnb.analysis.trend import block_means, stretches
from msnb.events.tables import ScalarTable
from msnb.smoke.shared.verdict import judge_loss


def brute_s(y) -> int:
    return int(sum(np.sign(y[j] - y[i]) for i in range(len(y)) for j in range(i + 1, len(y))))


def every_order_s(y) -> np.ndarray:
    """S of every reordering of *y*, pair by pair (one row per permutation)."""
    p = np.array(list(itertools.permutations(y)), dtype=float).reshape(-1, len(y))
    return sum(np.sign(p[:, j] - p[:, i]) for i in range(len(y)) for j in range(i + 1, len(y))) + np.zeros(len(p))


@pytest.mark.parametrize("n", range(1, 9))
def test_exact_law_is_the_permutations_counted_one_by_one(n):
    """Every ordering of n distinct values (n <= 8: 40,320 of them), S computed pair by pair: the recursion's law is that count."""
    values, freq = np.unique(every_order_s(range(n)), return_counts=True)
    counts = {int(v): int(c) for v, c in zip(values, freq)}
    pairs = n * (n - 1) // 2
    mahonian = inversion_counts(n)
    assert sum(mahonian) == math.factorial(n)
    assert {pairs - 2 * k: c for k, c in enumerate(mahonian) if c} == counts
    total = math.factorial(n)
    for s in range(-pairs - 1, pairs + 2):
        low = sum(c for v, c in counts.items() if v <= s) / total
        high = sum(c for v, c in counts.items() if v >= s) / total
        assert exact_tails(n, s) == pytest.approx((low, high), rel=1e-12, abs=0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-5, 5), min_size=2, max_size=8), st.booleans())
def test_p_values_of_a_series_against_brute_force(ints, distinct):
    """P(S <= s) counted over every reordering of the series itself (ties included: the normal approximation then)."""
    y = np.array(sorted(set(ints)) if distinct else ints, dtype=float)
    if y.size < 2:
        return
    y = np.random.default_rng(len(ints)).permutation(y)
    t = mann_kendall(y)
    assert t.s == brute_s(y)
    if np.unique(y).size == y.size:
        assert t.exact
        others = every_order_s(y)
        assert t.p_falling == pytest.approx(np.mean(others <= t.s), rel=1e-12)
        assert t.p_rising == pytest.approx(np.mean(others >= t.s), rel=1e-12)
    else:
        assert not t.exact and 0 <= t.p_falling <= 1 and 0 <= t.p_rising <= 1


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 400), st.integers(0, 2**32 - 1), st.sampled_from([None, 0, 1]))
def test_statistic_tau_and_p_match_scipy(n, seed, decimals):
    from scipy.stats import kendalltau

    rng = np.random.default_rng(seed)
    y = rng.standard_normal(n) - np.linspace(0, rng.uniform(0, 2), n)
    if decimals is not None:
        y = np.round(y, decimals)  # ties
    t = mann_kendall(y)
    ref = kendalltau(np.arange(n), y, alternative="less", method="exact" if t.exact else "asymptotic")
    if np.unique(y).size == 1:
        assert t.tau == 0 and t.p_falling == 1
        return
    assert t.tau == pytest.approx(ref.statistic, abs=1e-12)
    if t.exact:
        assert t.p_falling == pytest.approx(ref.pvalue, rel=1e-9)
    else:  # msnb adds the continuity correction scipy leaves out: within one step of S
        var = n * (n - 1) * (2 * n + 5) / 18
        assert abs(t.p_falling - ref.pvalue) < 2 / math.sqrt(var)


def test_every_prefix_at_once_equals_each_prefix_alone():
    rng = np.random.default_rng(3)
    y = np.round(rng.standard_normal(700), 1)  # ties, and more than one block
    p = PrefixTrends(y)
    for m in (1, 2, 9, 64, 65, 300, 700):
        alone = mann_kendall(y[:m])
        assert p.at(m) == alone
    assert int(p.s[199]) == brute_s(y[:200])


def test_stretches_double_from_min_points():
    assert stretches(10, 10) == [10]
    assert stretches(300, 10) == [10, 20, 40, 80, 160, 300]
    assert stretches(40, 10) == [10, 20, 40]


def test_a_ten_point_log_that_falls_85_percent_falls():
    """A noisy 10-point log, -85 % from first to last: the normal approximation of the old test said 'no clear trend'."""
    steps = np.arange(10, 110, 10)
    loss = np.array([2.856, 1.522, 1.062, 0.614, 0.946, 1.143, 0.683, 0.624, 0.574, 0.428])
    assert loss[-1] / loss[0] == pytest.approx(0.15, abs=0.002)
    assert spearman(steps, loss) * math.sqrt(9) > -2.58  # what used to decide: short of significance
    check = loss_trend(steps, loss)
    assert check.status == "pass" and check.outcome == "falling", check.detail
    assert "over all 10 points" in check.detail and "(exact)" in check.detail


def test_too_few_points_warn_and_say_how_many():
    check = loss_trend(np.arange(9), np.linspace(3, 1, 9))
    assert check.status == "warn" and "only 9 loss points" in check.detail and check.outcome == "too short"


def test_a_run_that_fell_then_flattened_passes():
    """Fell in its first 15 of 300 steps, flat since: the whole run's trend is weak, the stretch from the start is not."""
    rng = np.random.default_rng(14)
    s = np.arange(1, 301)
    loss = np.where(s < 15, 0.5 + 2.5 / np.sqrt(s), 0.5 + 2.5 / np.sqrt(15)) * np.exp(0.05 * rng.standard_normal(300))
    assert mann_kendall(loss).p_falling * len(stretches(300, DEFAULT_RULES.min_points)) > DEFAULT_RULES.trend_p
    check = loss_trend(s, loss)
    assert check.status == "pass" and "then stopped falling" in check.detail, check.detail


@pytest.mark.parametrize("seed", range(5))
def test_a_loss_that_never_moved_fails(seed):
    rng = np.random.default_rng(seed)
    s = np.arange(1, 301)
    flat = 2.3 * np.exp(0.05 * rng.standard_normal(300))
    check = loss_trend(s, flat)
    assert check.status in ("fail", "warn") and check.outcome == "flat", check.detail
    exact = loss_trend(s, np.full(300, 2.3))  # not even noise: every value tied
    assert exact.status == "fail" and "never fell" in exact.detail and "over all 300 points" in exact.detail


def test_a_rising_loss_fails_as_rising():
    s = np.arange(1, 101)
    check = loss_trend(s, 1 + 0.01 * s)
    assert check.status == "fail" and check.outcome == "rising" and "rising" in check.detail


def _table(rows):
    run, rank, tag, step, value = zip(*rows)
    return ScalarTable(
        run=np.array(run, dtype=object),
        rank=np.array(rank),
        tag=np.array(tag, dtype=object),
        step=np.array(step),
        wall_time=np.zeros(len(rows)),
        value=np.array(value, dtype=float),
    )


def _flat_run(extra_tag=None, extra=lambda r, s: 0.0, ranks=2, n=120):
    rng = np.random.default_rng(1)
    rows = []
    for r in range(ranks):
        for s in range(1, n + 1):
            rows.append(("exp", r, "loss", s, 2.3 * math.exp(0.05 * rng.standard_normal())))
            if extra_tag:
                rows.append(("exp", r, extra_tag, s, extra(r, s)))
    return _table(rows)


def test_the_likely_cause_is_named_only_when_the_data_shows_it():
    assert "learning rate (lr) is 0 on all 240 records" in likely_cause(_flat_run("lr"))
    assert likely_cause(_flat_run("lr", lambda r, s: 1e-4)) is None
    assert likely_cause(_flat_run()) is None
    frozen = likely_cause(_flat_run("weight_norm", lambda r, s: 12.5 + r))  # constant on each rank (ranks may differ)
    assert "weight_norm did not change over steps 1-120" in frozen
    assert likely_cause(_flat_run("weight_norm", lambda r, s: 12.5 + 1e-3 * s)) is None
    assert "gradient norm (global_norm) is 0" in likely_cause(_flat_run("global_norm"))


def test_judge_and_smoke_say_the_same_about_a_flat_loss():
    table = _flat_run("learning-rate")
    verdict = judge_run(table, "exp")
    falling = next(c for c in verdict.checks if c.name == "loss_falling")
    assert not verdict.passed and falling.status == "fail" and "likely cause: the learning rate (learning-rate) is 0" in falling.detail
    assert "median of 2 ranks" in falling.detail
    smoke, flags = judge_loss([table])  # the smoke's loss checks are the judge's, on the same table
    assert [c.as_dict() for c in smoke] == [c.as_dict() for c in verdict.checks if c.name not in ("tags", "steps")] and flags == verdict.flags
    loss_only = table.take(table.tag == "loss")
    alone = next(c for c in judge_loss([loss_only])[0] if c.name == "loss_falling")
    assert "likely cause" not in alone.detail  # no learning rate in the table: no guess
    beside = next(c for c in judge_loss([loss_only], context=table)[0] if c.name == "loss_falling")
    assert "likely cause: the learning rate (learning-rate) is 0" in beside.detail  # the summary beside the log names it


def test_exact_up_to_its_limit_then_normal():
    y = np.linspace(3, 1, EXACT_MAX + 1)
    assert mann_kendall(y[:EXACT_MAX]).exact and not mann_kendall(y).exact
    assert mann_kendall(y[:EXACT_MAX]).p_falling == pytest.approx(1 / math.factorial(EXACT_MAX), rel=1e-12)


def test_a_long_series_is_judged_as_means_and_says_so():
    means, per = block_means(np.arange(10.0), 4)
    assert per == 3 and means.tolist() == [1.0, 4.0, 7.0, 9.0]  # the last mean covers what is left
    assert block_means(np.arange(4.0), 4)[1] == 1
    rules = DEFAULT_RULES
    n = 3 * rules.trend_max_points + 7
    s = np.arange(1, n + 1)
    rng = np.random.default_rng(2)
    falling = loss_trend(s, (0.5 + 2.5 / np.sqrt(s)) * np.exp(0.2 * rng.standard_normal(n)))
    assert falling.status == "pass" and f"all {n} points" in falling.detail and "judged as 15002 means of 4 consecutive points" in falling.detail
    flat = loss_trend(s, np.exp(0.2 * rng.standard_normal(n)))
    assert flat.status in ("fail", "warn") and "means of 4 points" in flat.detail


def test_a_rise_after_a_fall_is_rising_only_when_it_ends_above_its_start():
    s = np.arange(1, 401)
    rng = np.random.default_rng(5)
    noise = np.exp(0.05 * rng.standard_normal(400))
    fell_then_crept = (0.5 + 2.5 / np.sqrt(s)) * (1 + 0.002 * np.clip(s - 100, 0, None)) * noise  # ends below its start
    jumped = (0.5 + 2.5 / np.sqrt(s)) * np.where(s >= 250, 3.0, 1.0) * noise  # ends above its start
    assert mann_kendall(fell_then_crept).p_rising < DEFAULT_RULES.trend_p and mann_kendall(jumped).p_rising < DEFAULT_RULES.trend_p
    assert loss_trend(s, fell_then_crept).outcome == "falling"
    assert loss_trend(s, jumped).outcome == "rising"


def test_a_weak_trend_while_nothing_trained_fails_naming_the_cause():
    """With a learning rate of 0 the loss cannot fall; a weak downward trend is the order of the batches. Found on a
    real mindformers run with lr 0 (p 0.047 warned instead of failing, about one run in four)."""
    steps = np.arange(1, 201)
    for seed in range(200):  # a flat noisy series whose trend test lands in the weak band
        values = 5.0 + np.random.default_rng(seed).standard_normal(200) * 0.05 - steps * 2e-5
        plain = loss_trend(steps, values)
        if plain.status == WARN and "weak downward trend" in plain.detail:
            break
    else:
        raise AssertionError("no series in the weak band")
    stuck = loss_trend(steps, values, cause="learning rate (lr) is 0")
    assert stuck.status == FAIL and "never fell" in stuck.detail and "learning rate (lr) is 0" in stuck.detail


def test_a_rise_while_nothing_trained_fails_naming_the_cause_not_divergence():
    """With a learning rate of 0 the loss cannot diverge; a significant rise over 20 points is the order of the batches.
    Found on a real mindformers smoke with lr 0 (mindformers 2.0): Kendall tau +0.41, p 0.0056, called "diverging"."""
    steps = np.arange(1, 21)
    values = 5.53 + np.random.default_rng(0).standard_normal(20) * 0.01 + steps * 2e-3
    assert loss_trend(steps, values).outcome == "rising"  # the series the real run gave: a trend test would call it rising
    stuck = loss_trend(steps, values, cause="the learning rate (lr) is 0 on all 20 records")
    assert stuck.status == FAIL and stuck.outcome == "flat" and "diverging" not in stuck.detail
    assert stuck.detail.startswith("loss never fell: it rose while nothing trained") and stuck.detail.endswith(
        "likely cause: the learning rate (lr) is 0 on all 20 records"
    )
