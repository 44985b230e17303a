"""The judge: rules that decide whether a run is healthy, over the tables ``msnb.read`` returns.

Used by the smoke verdict, by the plot's flags and by ``msnb check``; it
imports only the data layer below it.  Every rule's parameters live in
:class:`Rules`.
"""

from .divergence import divergence_details, rank_divergence
from .kendall import Trend, mann_kendall
from .nonfinite import NonFinite, NonFiniteRange, find_nonfinite, nonfinite_flags, nonfinite_ranges
from .rules import DEFAULT_RULES, FAIL, PASS, SKIP, WARN, Check, RankFlag, Rules
from .series import Curve, align, curves, resolve_restarts, stride
from .smoothing import ema
from .spikes import run_curve, spike_flag, unrecovered_spikes
from .steptime import step_time_stability
from .stuck import likely_cause
from .trend import loss_stall, loss_trend, spearman

__all__ = [
    "Rules",
    "DEFAULT_RULES",
    "Check",
    "RankFlag",
    "PASS",
    "WARN",
    "FAIL",
    "SKIP",
    "Curve",
    "curves",
    "align",
    "resolve_restarts",
    "stride",
    "ema",
    "spearman",
    "Trend",
    "mann_kendall",
    "likely_cause",
    "loss_trend",
    "loss_stall",
    "rank_divergence",
    "divergence_details",
    "NonFinite",
    "find_nonfinite",
    "nonfinite_ranges",
    "NonFiniteRange",
    "nonfinite_flags",
    "unrecovered_spikes",
    "run_curve",
    "spike_flag",
    "step_time_stability",
]
