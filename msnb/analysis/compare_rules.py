"""The tolerances of a precision comparison (``msnb compare``), with MindSpore's migration standard as defaults.

The defaults are the "Large Model Migration Accuracy Standard" of the mindformers
accuracy-tuning guide: a model migrated to MindSpore matches its baseline
(Megatron-LM, MindSpeed, Hugging Face) when the first loss, the loss over the run
and the global norm stay within these errors, observed over enough steps, after
the learning-rate schedules were made to agree.  Override any of them with
``CompareRules(mean_rel=0.02)`` or ``dataclasses.replace(DEFAULT_COMPARE_RULES, ...)``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class CompareRules:
    """Parameters of every comparison check, with the standard's defaults.

    First loss (``first_loss``): at the first common step the absolute error is
    below ``first_loss_abs`` (0.005) **or** the relative error below
    ``first_loss_rel`` (0.5 %).

    Loss over the run (``mean_error``): the mean absolute error below
    ``mean_abs`` (0.01) **or** the mean relative error below ``mean_rel`` (1 %),
    over every common step and again over the trailing ``tail_fraction`` of
    them (at least ``tail_min_points``), so a late divergence fails even when
    the whole-run mean is small.  The same "or" sets the per-step tolerance
    (``max(mean_abs, mean_rel * |baseline|)``) that ``first_divergence`` uses.

    Global norm (``grad_norm``): mean relative error at most ``grad_norm_rel`` (10 %).

    Coverage (``coverage``): fewer than ``min_steps`` (1,000) common steps is a
    warning; the guide recommends ``recommended_steps`` (5,000) or 12 hours.

    Learning rate (``lr_schedule``): a step whose rates differ by more than
    ``lr_rel`` relative (and ``lr_abs`` absolute) is a mismatch.  1e-3 because
    Megatron-LM prints the rate with four significant digits (``3.984E-06``).

    Where it left the baseline (``first_divergence``): the per-step difference
    in units of the tolerance, averaged over a trailing window of
    ``divergence_window`` common steps, beyond 1 for ``divergence_patience``
    steps in a row; the step reported is where that departure began (a change
    point).  Both shrink to a tenth of the common steps on short runs.

    Baseline reruns: each rerun's own errors against the baseline (first loss,
    means, grad norm, and per step, its moving mean) raise the limits to them
    where they are larger: the candidate then only has to stay within the
    baseline's own run-to-run spread.
    """

    first_loss_abs: float = 0.005
    first_loss_rel: float = 0.005
    mean_abs: float = 0.01
    mean_rel: float = 0.01
    grad_norm_rel: float = 0.10
    min_steps: int = 1000
    recommended_steps: int = 5000
    lr_rel: float = 1e-3
    lr_abs: float = 1e-12
    tail_fraction: float = 0.1
    tail_min_points: int = 10
    divergence_window: int = 50
    divergence_patience: int = 10

    def as_dict(self) -> dict:
        return asdict(self)


DEFAULT_COMPARE_RULES = CompareRules()
