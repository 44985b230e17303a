"""The judge's knobs in one place, and the shape of what each rule answers.

Every rule takes a :class:`Rules`; the defaults are what ``msnb check``, the
smoke verdict and the plot flags use.  Override any of them with
``Rules(divergence_k=6)`` or ``dataclasses.replace(DEFAULT_RULES, ...)``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..status import FAIL, PASS, SKIP, STATUSES, WARN  # noqa: F401  (the judge's words, re-exported where the rules are)


@dataclass
class Check:
    """One judged fact: ``name`` (``loss_falling``, ``rank_divergence``...), ``status`` (pass/warn/fail/skip), ``detail`` (why, with numbers).

    ``outcome`` is the rule's answer in one word where it has one (``loss_falling``: ``falling``, ``rising``,
    ``flat``, ``too short``; ``loss_stalled``: ``stalled``), so a view can show it without reading the detail;
    it is not part of the JSON document.
    """

    name: str
    status: str
    detail: str
    outcome: str = field(default="", compare=False)

    def as_dict(self) -> dict:
        return {"name": self.name, "status": self.status, "detail": self.detail}


@dataclass
class RankFlag:
    """Something wrong at one step of one rank: the flag drawn on plots and listed by ``msnb check``.

    ``rank`` is -1 when the run has no ranks; ``step`` is where the problem began.
    """

    run: str
    rank: int
    tag: str
    step: int
    reason: str

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Rules:
    """Parameters of every rule, with the defaults the judge uses.

    Trend (``loss_falling``): Mann-Kendall's test (Kendall's tau between step
    and loss; exact p-values for short series).  Rising (a failure) when the
    whole run rises with a one-sided p below ``trend_p`` and its smoothed tail
    ends above its head, or the tail exceeds ``rising_factor`` times the head (smoothing weight ``smooth``,
    TensorBoard's); fell when the whole run or a stretch from its start (the
    first ``min_points``, twice that, ...) falls with a p below ``trend_p``
    after the Bonferroni correction for the stretches looked at; below
    ``trend_weak_p`` only, a warning; otherwise the loss never fell (a
    failure), when judged on at least ``flat_fail_points`` points or when a
    likely cause is known (a learning rate of 0, frozen weights); on fewer, no
    fall is a warning: a short noisy series cannot tell "never fell" from
    noise.  Fewer than ``min_points`` points: too few to judge.  A series
    longer than ``trend_max_points`` is judged as that many means of
    consecutive points (the detail says so).

    Stall (``loss_stalled``): over the last ``stall_fraction`` of the points
    (at least ``stall_min_points``), no significant fall (Mann-Kendall's p not below ``trend_p``) and a
    change of the mean from its first half to its second below
    ``stall_min_change`` (relative): a warning (converged, or stuck).  Noisy
    runs whose halves differ by more than that are not called stalled.

    Rank divergence: residual of each rank against the ranks' median (the gap
    between them with two ranks), in log space when the loss is positive;
    moving means over ``divergence_windows`` steps compared with the
    residual's own noise (``divergence_k`` scales) and with a minimum size
    (``divergence_min_gap``, in log units: 0.1 is about 10 %), both holding for
    ``divergence_patience`` consecutive steps.

    Spikes (``loss_spikes``): a jump up of the run's loss by more than
    ``spike_factor`` (ratio of the means after and before) that is still there
    ``spike_recovery`` steps later and stands ``spike_k`` noise scales out.  A run of at most
    ``spike_short_points`` points is a smoke: where it is too short for that window, the window is a third of
    its points (at least ``spike_min_recovery``), and a one-step jump of the (positive) loss to ``spike_blowup``
    times the median before it is a spike even if the loss comes back: a smoke has no room to show that a
    blow-up was harmless, and healthy noise never reaches a hundredfold.

    Step time, after the first ``step_time_skip`` fraction of the steps (compilation), warns only where the
    time says something the user can act on (a spread of noise, e.g. another job on the same CPU, is not it):
    a stall, steps over ``step_time_stall_ratio`` times the median, ``step_time_stall_ms`` above it and far
    outside the run's own spread (the third quartile plus three interquartile ranges), that
    together lost at least ``step_time_stall_share`` of the run's time; or a trend, the last third of the
    steps ``step_time_trend_ratio`` times slower than the first third (medians, ``step_time_trend_ms`` apart
    at least) with step time rising with the step (Spearman's rho over ``step_time_trend_rho``).

    Memory (``memory``, where the logs hold MindSpore's memory report, :mod:`msnb.analysis.memory`): a rank whose peak
    leaves less than ``memory_headroom`` of MindSpore's limit, and ranks whose peaks differ by more than
    ``memory_imbalance`` (the highest over the lowest), are warnings naming the ranks.
    """

    smooth: float = 0.6
    min_points: int = 10
    trend_p: float = 0.01
    trend_weak_p: float = 0.05
    flat_fail_points: int = 50
    trend_max_points: int = 20_000
    rising_factor: float = 10.0
    stall_fraction: float = 1 / 3
    stall_min_points: int = 20
    stall_min_change: float = 0.02
    divergence_windows: tuple = (8, 32, 64, 128, 256)
    divergence_k: float = 6.0
    divergence_min_gap: float = 0.1
    divergence_patience: int = 10
    spike_factor: float = 1.5
    spike_recovery: int = 50
    spike_k: float = 6.0
    spike_short_points: int = 200
    spike_min_recovery: int = 5
    spike_blowup: float = 100.0
    step_time_skip: float = 0.05
    step_time_stall_ratio: float = 5.0
    step_time_stall_ms: float = 500.0
    step_time_stall_share: float = 0.1
    step_time_trend_ratio: float = 1.5
    step_time_trend_ms: float = 5.0
    step_time_trend_rho: float = 0.5
    memory_headroom: float = 0.05
    memory_imbalance: float = 0.20

    def as_dict(self) -> dict:
        return asdict(self)


DEFAULT_RULES = Rules()
