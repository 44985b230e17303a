"""Envelopes and facts of long series in bounded memory, against a brute-force oracle and real files."""

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import msnb
from msnb.analysis.overview import Envelope, Overview


def _oracle_check(env: Envelope, steps: np.ndarray, values: np.ndarray):
    es, ev = env.envelope()
    pairs = set(zip(es.tolist(), [("nan" if math.isnan(v) else v) for v in ev.tolist()]))
    given_pairs = set(zip(steps.tolist(), [("nan" if math.isnan(v) else v) for v in values.tolist()]))
    assert pairs <= given_pairs  # only real points are drawn
    assert es.size <= 5 * env.buckets
    bucket = (steps - env.origin) // env.width
    assert bucket.min() >= 0 and bucket.max() < env.buckets
    for b in np.unique(bucket).tolist():
        s, v = steps[bucket == b], values[bucket == b]
        lo, hi = s.min(), s.max()
        assert any(p[0] == lo for p in pairs) or not np.isfinite(v[s == lo]).any()
        assert any(p[0] == hi for p in pairs) or not np.isfinite(v[s == hi]).any()
        ok = np.isfinite(v)
        if ok.any():
            assert any(p[1] == v[ok].min() and p[0] in set(s[ok][v[ok] == v[ok].min()].tolist()) for p in pairs)
            assert any(p[1] == v[ok].max() and p[0] in set(s[ok][v[ok] == v[ok].max()].tolist()) for p in pairs)
        if (~ok).any():
            first_bad = s[~ok].min()
            assert any(p[0] == first_bad and (p[1] == "nan" or math.isinf(p[1])) for p in pairs)
    f = env.facts()
    ok = np.isfinite(values)
    assert (f.points, f.finite, f.nonfinite) == (steps.size, int(ok.sum()), int((~ok).sum()))
    assert f.first_step == steps.min()
    assert f.last_step == steps.max()
    top = np.flatnonzero(steps == steps.max())[-1]
    assert f.last_value == values[top] or (math.isnan(f.last_value) and math.isnan(values[top]))
    assert f.min_value == (values[ok].min() if ok.any() else None)
    assert f.max_value == (values[ok].max() if ok.any() else None)
    assert f.first_nonfinite_step == (steps[~ok].min() if (~ok).any() else None)


values_st = st.one_of(st.floats(-1e6, 1e6), st.just(math.nan), st.just(math.inf), st.just(-math.inf))


@settings(max_examples=400, deadline=None)
@given(
    buckets=st.integers(1, 16),
    chunks=st.lists(st.lists(st.tuples(st.integers(-50, 3000), values_st), min_size=1, max_size=60), min_size=1, max_size=6),
)
def test_envelope_against_brute_force(buckets, chunks):
    env = Envelope(buckets)
    for chunk in chunks:
        env.add([s for s, _ in chunk], [v for _, v in chunk])
    steps = np.array([s for c in chunks for s, _ in c], dtype=np.int64)
    values = np.array([v for c in chunks for _, v in c], dtype=np.float64)
    _oracle_check(env, steps, values)


def test_a_long_job_stays_bounded_and_keeps_its_spike():
    env = Envelope(256)
    rng = np.random.default_rng(0)
    for lo in range(0, 2_000_000, 100_000):  # two million steps, fed as a watch would
        s = np.arange(lo, lo + 100_000)
        v = 2.0 + rng.normal(0, 0.01, s.size)
        if lo == 1_300_000:
            v[12_345] = 50.0  # one step's spike
        env.add(s, v)
    steps, values = env.envelope()
    assert steps.size <= 4 * 256
    assert 50.0 in values.tolist() and steps[values.tolist().index(50.0)] == 1_312_345
    assert sum(a.nbytes for a in env._b.values()) < 256 * 10 * 8 + 1


def test_overview_facts_of_a_real_multi_rank_read(tb_files):
    r = msnb.read(tb_files, workers=1)
    ov = Overview(buckets=8)
    half = len(r.scalars) // 2
    ov.add(r.scalars.take(np.arange(half)))  # two polls' worth
    ov.add(r.scalars.take(np.arange(half, len(r.scalars))))
    rows = ov.facts()
    assert {(x["rank"], x["tag"]) for x in rows} == set(zip(r.scalars.rank.tolist(), r.scalars.tag.tolist()))
    for x in rows:
        steps, values = r.scalars.series(x["tag"], run=x["run"], rank=x["rank"])
        env = ov.series[(x["run"], x["rank"], x["tag"])]
        _oracle_check(env, steps, values)
    loss1 = next(x for x in rows if x["rank"] == 1 and x["tag"] == "loss")
    assert loss1["first_nonfinite_step"] == 60 and loss1["nonfinite"] == 1  # the NaN the writer put there
    table = ov.envelopes()
    assert set(table.tags()) == set(r.scalars.tags()) and len(table) <= len(r.scalars)
