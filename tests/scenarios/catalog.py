"""The scenario corpus: what each run's loss looks like, and what the judge must say about it.

Pure numpy (no writer, no MindSpore): ``write.py`` turns these curves into
files with the real writers, the tests read those files back and compare the
judge's answers with ``expect``.  Noise is multiplicative and log-normal (a
batch mean's spread), ``noise`` is its per-step relative size.
"""

from __future__ import annotations

import numpy as np


def base(steps, floor=0.5, start=3.0):
    """A falling loss: fast at first, then slowly towards *floor*."""
    return floor + (start - floor) / np.sqrt(steps)


def noisy(rng, clean, noise):
    return clean * np.exp(noise * rng.standard_normal(clean.shape))


def _healthy(n_ranks, noise, steps=400, seed=0):
    rng = np.random.default_rng(seed)
    s = np.arange(1, steps + 1)
    return {r: [(s, noisy(rng, base(s), noise))] for r in range(n_ranks)}


def _nan_rank():
    rng = np.random.default_rng(4)
    s = np.arange(1, 301)
    out = {r: [(s, noisy(rng, base(s), 0.1))] for r in range(4)}
    v = out[2][0][1].copy()
    v[s >= 150] = np.nan
    out[2] = [(s, v)]
    return out


def _drift(n_ranks, noise, onset, rate, steps=400, bad=1, seed=5):
    rng = np.random.default_rng(seed)
    s = np.arange(1, steps + 1)
    out = {r: [(s, noisy(rng, base(s), noise))] for r in range(n_ranks)}
    v = out[bad][0][1] * (1 + rate * np.clip(s - onset, 0, None))
    out[bad] = [(s, v)]
    return out


def _shared_spike():
    rng = np.random.default_rng(6)
    s = np.arange(1, 401)
    out = {}
    for r in range(4):
        v = noisy(rng, base(s), 0.1)
        v[s == 200] *= 5 + r  # a bad batch every rank saw, each a little differently
        v[s == 201] *= 2
        out[r] = [(s, v)]
    return out


def _stalled():
    rng = np.random.default_rng(7)
    s = np.arange(1, 401)
    clean = np.where(s < 100, base(s), base(np.full(s.shape, 100)))
    return {r: [(s, noisy(rng, clean, 0.05))] for r in range(2)}


def _resumed():
    """Crashed while the loss blew up after step 150; resumed from the step-150 checkpoint in a new file."""
    rng = np.random.default_rng(8)
    first = np.arange(1, 201)
    v1 = noisy(rng, base(first), 0.05)
    v1[first >= 150] *= np.exp((first[first >= 150] - 149) * 0.05)
    second = np.arange(150, 351)
    v2 = noisy(rng, base(second), 0.05)
    return {r: [(first, v1 * (1 + 0.01 * r)), (second, v2 * (1 + 0.01 * r))] for r in range(2)}


def _unrecovered_spike():
    rng = np.random.default_rng(9)
    s = np.arange(1, 401)
    clean = base(s) * np.where(s >= 250, 3.0, 1.0)
    return {r: [(s, noisy(rng, clean, 0.05))] for r in range(2)}


def _sink():
    rng = np.random.default_rng(10)
    s = np.arange(4, 801, 4)
    return {0: [(s, noisy(rng, base(s), 0.05))]}


def _nan_beside_finite():
    """Rank 1 logs step 80 twice: NaN first, then a finite value (a retried step)."""
    rng = np.random.default_rng(11)
    s = np.arange(1, 201)
    out = {r: [(s, noisy(rng, base(s), 0.05))] for r in range(2)}
    s1 = np.concatenate([s[:80], [80], s[80:]])
    v1 = out[1][0][1]
    v1 = np.concatenate([v1[:79], [np.nan], v1[79:80], v1[80:]])
    out[1] = [(s1, v1)]
    return out


def _lr_zero():
    """The learning rate was 0 from the first step: the loss only moves with the batches, around where it started."""
    rng = np.random.default_rng(13)
    s = np.arange(1, 301)
    return {r: [(s, noisy(rng, np.full(s.shape, 2.3), 0.05))] for r in range(2)}


def _converged_early():
    """The loss fell in the first 15 steps of 300, then stayed flat: converged, not stuck (the whole run's trend is weak)."""
    rng = np.random.default_rng(14)
    s = np.arange(1, 301)
    clean = np.where(s < 15, base(s), base(np.full(s.shape, 15)))
    return {r: [(s, noisy(rng, clean, 0.05))] for r in range(2)}


# learning rate logged beside the loss ("learning-rate", mindformers' spelling) per scenario; 1e-4 when not listed
LEARNING_RATE = {"lr_zero": 0.0}

# name -> (writer, curves, expect); writer "tbx" writes mindformers' tensorboard/rank_N layout with tag "loss",
# "ms" MindSpore SummaryRecord in rank_N directories.
# expect: passed, flags [(rank, lo, hi)] (the flag's step must lie in [lo, hi]), and words that the named check says.
SCENARIOS = {
    "healthy_2": ("tbx", lambda: _healthy(2, 0.3, seed=1), {"passed": True, "flags": []}),
    "healthy_4": ("tbx", lambda: _healthy(4, 0.2, seed=2), {"passed": True, "flags": []}),
    "healthy_8": ("tbx", lambda: _healthy(8, 0.4, seed=3), {"passed": True, "flags": []}),
    "healthy_ms_2": ("ms", lambda: _healthy(2, 0.3, steps=200, seed=12), {"passed": True, "flags": []}),
    "nan_rank": ("tbx", _nan_rank, {"passed": False, "flags": [(2, 150, 150)], "checks": {"finite": "rank 2"}}),
    "drift_4": ("tbx", lambda: _drift(4, 0.05, 200, 0.005), {"passed": False, "flags": [(1, 195, 260)], "checks": {"rank_divergence": "rank 1"}}),
    "drift_2": ("tbx", lambda: _drift(2, 0.05, 200, 0.005), {"passed": False, "flags": [(1, 195, 260)], "checks": {"rank_divergence": "rank 1"}}),
    "shared_spike": ("tbx", _shared_spike, {"passed": True, "flags": []}),
    "stalled": ("tbx", _stalled, {"passed": True, "flags": [], "checks": {"loss_stalled": "stalled"}, "status": {"loss_stalled": "warn"}}),
    "resumed": ("tbx", _resumed, {"passed": True, "flags": [], "checks": {"steps": "restarted at step 150"}}),
    "unrecovered_spike": ("tbx", _unrecovered_spike, {"passed": False, "flags": [(-1, 245, 255)], "checks": {"loss_spikes": "did not recover"}}),
    "sink_mode": ("tbx", _sink, {"passed": True, "flags": [], "checks": {"steps": "steps recorded every 4 (a collection frequency, or sink mode"}}),
    "nan_beside_finite": ("ms", _nan_beside_finite, {"passed": False, "flags": [(1, 80, 80)], "checks": {"finite": "rank 1"}}),
    "lr_zero": (
        "tbx",
        _lr_zero,
        {"passed": False, "flags": [], "checks": {"loss_falling": "learning rate (learning-rate) is 0"}, "status": {"loss_falling": "fail"}},
    ),
    "converged_early": (
        "tbx",
        _converged_early,
        {"passed": True, "flags": [], "checks": {"loss_falling": "first 20 points"}, "status": {"loss_falling": "pass", "loss_stalled": "warn"}},
    ),
}
