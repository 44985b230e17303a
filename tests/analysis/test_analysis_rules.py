"""The judge's rules one by one, against independent oracles where one exists (a plain loop, scipy)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from msnb.analysis import DEFAULT_RULES, Rules, find_nonfinite, rank_divergence, resolve_restarts, spearman, step_time_stability, stride, unrecovered_spikes
from msnb.events.tables import ScalarTable
from msnb.smoke.shared.verdict import check_step_time


def table(matrix, steps=None, run="exp", tag="loss"):
    matrix = np.atleast_2d(matrix)
    ranks, n = matrix.shape
    steps = np.arange(1, n + 1) if steps is None else np.asarray(steps)
    return ScalarTable(
        run=np.array([run] * (ranks * n), dtype=object),
        rank=np.repeat(np.arange(ranks), n),
        tag=np.array([tag] * (ranks * n), dtype=object),
        step=np.tile(steps, ranks),
        wall_time=np.zeros(ranks * n),
        value=matrix.ravel(),
    )


def noisy_ranks(ranks, steps, noise, seed):
    rng = np.random.default_rng(seed)
    s = np.arange(1, steps + 1)
    return (0.5 + 2.5 / np.sqrt(s)) * np.exp(noise * rng.standard_normal((ranks, steps)))


def restart_oracle(steps, values):
    """Records in read order, a plain loop: a step lower than the previous one drops every kept step at or above it."""
    kept = {}
    prev = None
    for s, v in zip(steps, values):
        if prev is not None and s < prev:
            kept = {k: x for k, x in kept.items() if k < s}
        kept[s] = v
        prev = s
    keys = sorted(kept)
    return keys, [kept[k] for k in keys]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 30), min_size=0, max_size=60))
def test_restarts_match_a_plain_loop(steps):
    values = list(range(len(steps)))  # the record's index: says which record won
    s, v, restarts, _replaced = resolve_restarts(steps, values)
    keys, vals = restart_oracle(steps, values)
    assert s.tolist() == keys and v.tolist() == vals
    assert restarts == [b for a, b in zip(steps, steps[1:]) if b < a]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3), min_size=3, max_size=80))
def test_spearman_matches_scipy(y):
    from scipy.stats import spearmanr

    x = np.arange(len(y))
    ours = spearman(x, y)
    if len(set(y)) == 1:
        assert ours == 0.0
    else:
        assert ours == pytest.approx(spearmanr(x, y).statistic, abs=1e-9)


def test_stride_says_sink_mode():
    assert stride(np.arange(4, 400, 4)) == 4
    assert stride(np.arange(1, 100)) == 1
    assert stride(np.array([1, 2, 5, 11, 12, 30, 31])) == 0


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 50), st.sampled_from([1.0, 2.0, math.nan, math.inf, -math.inf])), min_size=1, max_size=80))
def test_every_nonfinite_record_is_found(rows):
    t = ScalarTable(
        run=np.array(["r"] * len(rows), dtype=object),
        rank=np.array([r for r, _, _ in rows]),
        tag=np.array(["loss"] * len(rows), dtype=object),
        step=np.array([s for _, s, _ in rows]),
        wall_time=np.zeros(len(rows)),
        value=np.array([v for _, _, v in rows]),
    )
    found = {f.rank: (f.step, f.count) for f in find_nonfinite(t, ["loss"])}
    oracle = {}
    for r, s, v in rows:
        if not math.isfinite(v):
            step, count = oracle.get(r, (s, 0))
            oracle[r] = (min(step, s), count + 1)
    assert found == oracle


def test_series_resolves_aliases():
    t = table(np.ones((1, 5)), tag="loss/auto")
    assert t.resolve_tag("loss") == "loss/auto" and t.resolve_tag("lr") is None
    steps, values = t.series("loss", rank=0)
    assert steps.tolist() == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("ranks,noise,seed", [(2, 0.4, 1), (3, 0.4, 2), (4, 0.3, 3), (16, 0.4, 4), (2, 0.02, 5), (8, 0.1, 6)])
def test_healthy_noisy_ranks_are_not_flagged(ranks, noise, seed):
    assert rank_divergence(table(noisy_ranks(ranks, 2000, noise, seed))) == []


def test_shared_spike_is_not_a_divergence():
    m = noisy_ranks(4, 500, 0.1, 7)
    m[:, 250] *= np.array([5, 8, 6, 20])  # everyone saw the bad batch, each a little differently
    m[:, 300:305] *= 3
    assert rank_divergence(table(m)) == []


@pytest.mark.parametrize("ranks", [3, 8, 32])
def test_slow_drift_found_near_its_onset(ranks):
    m = noisy_ranks(ranks, 1500, 0.1, 8)
    s = np.arange(1, 1501)
    m[ranks - 1] *= 1 + 0.003 * np.clip(s - 700, 0, None)
    (flag,) = rank_divergence(table(m))
    assert flag.rank == ranks - 1 and 680 <= flag.step <= 800


def test_two_ranks_that_part_without_an_odd_one_say_so():
    m = noisy_ranks(2, 600, 0.05, 9)
    m[0, 300:] *= 0.8  # both moved, in opposite directions: which one is wrong is unknowable
    m[1, 300:] *= 1.25
    (flag,) = rank_divergence(table(m))
    assert 299 <= flag.step <= 303 and "two ranks cannot tell which one is wrong" in flag.reason


def test_of_two_ranks_the_one_that_moved_is_named():
    m = noisy_ranks(2, 600, 0.05, 9)
    m[0, 300:] *= 1.5  # rank 0 jumps, rank 1 keeps the run's trend: rank 0 is the odd one, although it is the higher one either way
    (flag,) = rank_divergence(table(m))
    assert flag.rank == 0 and "rank 0 is the one that moved" in flag.reason
    m = noisy_ranks(2, 600, 0.05, 9)
    m[0, 300:] *= 0.6  # rank 0 drops: still the one that moved, though rank 1 is now the higher
    (flag,) = rank_divergence(table(m))
    assert flag.rank == 0


def test_rules_can_be_overridden():
    m = noisy_ranks(3, 600, 0.05, 10)
    m[2, 300:] *= 1.3
    assert [f.rank for f in rank_divergence(table(m))] == [2]
    assert rank_divergence(table(m), rules=Rules(divergence_min_gap=0.5)) == []


def test_negative_losses_are_judged_on_their_own_scale():
    m = -noisy_ranks(4, 600, 0.05, 11)  # e.g. a log-likelihood logged as a negative number
    assert rank_divergence(table(m)) == []
    m[0, 300:] *= 1.5
    assert [f.rank for f in rank_divergence(table(m))] == [0]


def test_spikes_that_recover_or_not():
    rng = np.random.default_rng(12)
    s = np.arange(1, 601)
    v = (0.5 + 2.5 / np.sqrt(s)) * np.exp(0.05 * rng.standard_normal(600))
    spiky = v.copy()
    spiky[300] *= 10
    assert unrecovered_spikes(s, spiky) is None
    jumped = v * np.where(s >= 400, 2.0, 1.0)
    step, before, after = unrecovered_spikes(s, jumped)
    assert step == 400 and after / before == pytest.approx(2.0, rel=0.1)


def test_step_time_warns_on_a_stall_or_a_slowdown_never_on_noise_alone():
    rng = np.random.default_rng(13)
    stable = 20 + rng.normal(0, 1, 400)
    assert step_time_stability(stable).status == "pass"
    noisy = stable * np.exp(rng.normal(0, 0.5, 400))  # a shared CPU: p90 near twice the median, nothing to act on
    assert np.percentile(noisy[20:], 90) > 1.8 * np.median(noisy[20:])
    check = step_time_stability(noisy)
    assert check.status == "pass" and check.detail.startswith("no stall, no slowing down")
    stalled = stable.copy()
    stalled[200] = 3000  # one step waits 3 s (I/O, a host sync): 27 % of the run's time
    check = step_time_stability(stalled)
    assert check.status == "warn" and "stalled: 1 step" in check.detail and "the longest 3000 ms" in check.detail
    assert step_time_stability(stalled, rules=Rules(step_time_stall_share=0.5)).status == "pass"
    hiccups = stable.copy()
    hiccups[::200] += 150  # a checkpoint every 200 steps: 4 % of the time, not a stall to act on
    assert step_time_stability(hiccups).status == "pass"
    slowing = stable + np.linspace(0, 30, 400)  # 20 ms to 50 ms: a leak, a growing queue
    check = step_time_stability(slowing)
    assert check.status == "warn" and "slowing down" in check.detail
    assert step_time_stability(slowing[::-1]).status == "pass"  # getting faster is nothing to act on


def test_monitor_overhead_text_reads_right_when_collecting_steps_are_not_slower():
    rng = np.random.default_rng(14)
    ms = 75 + rng.normal(0, 2, 200)
    collected = np.arange(200) % 5 == 0
    ms[collected] -= 15  # collecting steps happened to be faster
    (_, overhead) = check_step_time({0: (np.arange(200), ms, collected)}, 5)
    assert overhead.name == "monitor_overhead" and "no measurable overhead" in overhead.detail and "+0.00" not in overhead.detail
    ms[collected] += 40
    (_, overhead) = check_step_time({0: (np.arange(200), ms, collected)}, 5)
    assert "one step in 5 collects" in overhead.detail


def test_defaults_are_documented():
    doc = Rules.__doc__
    for name in DEFAULT_RULES.as_dict():
        assert f"``{name}``" in doc, name


@settings(max_examples=300, deadline=None)
@given(
    rows=st.integers(1, 12),
    cols=st.sampled_from([1, 2, 3, 7, 128, 601, 700]),  # numpy.nanmedian changes method at 600 values along the axis
    fill=st.sampled_from([0.0, 0.1, 0.5, 0.9, 1.0]),
    infs=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
    axis=st.sampled_from([0, 1]),
    keepdims=st.booleans(),
)
def test_nan_median_is_numpy_nanmedian(rows, cols, fill, infs, seed, axis, keepdims):
    import warnings

    from msnb.analysis.medians import nan_median

    rng = np.random.default_rng(seed)
    a = rng.normal(size=(rows, cols)).round(rng.integers(0, 3))  # ties, and whole rows of equal values
    a[rng.random(a.shape) < fill] = np.nan  # all-NaN rows too
    if infs:
        a[rng.random(a.shape) < 0.1] = np.inf
        a[rng.random(a.shape) < 0.1] = -np.inf
    a = a if axis == 1 else a.T.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = np.nanmedian(a, axis=axis, keepdims=keepdims)
    got = nan_median(a, axis, keepdims)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)  # NaN where numpy gives NaN, every other value equal


def test_a_stall_while_other_programs_took_the_cpus_is_not_judged_and_says_what_it_saw():
    from msnb.smoke.run.machine_load import MachineLoad

    ms = np.full(40, 20.0)
    ms[20] = 3000.0
    collected = np.zeros(40, bool)
    load = MachineLoad(cpus=2, samples=[(2, 3)] * 6 + [(2, 0)] * 2)  # others runnable beside the run's 2 threads in 6 of 8
    (alone,) = check_step_time({0: (np.arange(40), ms, collected)}, 1)[:1]
    (crowded,) = check_step_time({0: (np.arange(40), ms, collected)}, 1, busy=load.busy())[:1]
    assert alone.status == "warn" and "stalled: 1 step" in alone.detail
    assert crowded.status == "skip" and crowded.detail.startswith("not judged: the machine was busy") and "in 75% of it" in crowded.detail
    assert "stalled: 1 step" in crowded.detail
    assert MachineLoad(cpus=2, samples=[(2, 0)] * 8).busy() is None  # the run alone on its CPUs
