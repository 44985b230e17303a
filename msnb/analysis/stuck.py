"""Why a loss never fell, when the run's own records say: a learning rate of zero, weights or gradients that did not move.

A loss that never fell is the symptom; the records beside it often name the
cause.  Only what the data shows is said (no guess when the run logged neither
a learning rate nor a weight norm), so the message can be trusted.
"""

from __future__ import annotations

import numpy as np

from ..events.tags import ALIASES
from ..words import count

# tags that report the size of the weights: TrainingStateMonitor's ``weight_norm`` (per rank)
WEIGHT_NORMS = ("weight_norm", "weight-norm")


def _finite_values(scalars, tag: str):
    t = scalars.where(tag=tag)
    ok = np.isfinite(t.value)
    return t.step[ok], t.value[ok], t.rank[ok]


def likely_cause(scalars) -> str | None:
    """What in *scalars* explains a loss that never fell, or None when nothing does.

    Looked for, in this order: a learning rate of 0 on every record (of every
    spelling present: ``lr``, ``learning-rate``...); a weight norm unchanged on
    every rank over at least two steps (the weights did not move: frozen, or no
    optimizer step); a gradient norm of 0 on every record (nothing flows back).

    Args:
        scalars: the run's ScalarTable (every rank; other tags are ignored).

    Returns:
        One clause for a check's detail, e.g. ``the learning rate (lr) is 0 on all 300 records``.
    """
    present = set(scalars.tags())
    for tag in ALIASES["lr"]:
        if tag in present:
            steps, values, _ranks = _finite_values(scalars, tag)
            if values.size and not np.any(values):
                span = f" (steps {int(steps.min())}-{int(steps.max())})" if steps.size > 1 else ""
                return f"the learning rate ({tag}) is 0 on all {count(values.size, 'record')}{span}"
    for tag in WEIGHT_NORMS:
        if tag in present:
            steps, values, ranks = _finite_values(scalars, tag)
            if np.unique(steps).size < 2:
                continue
            frozen = all(np.ptp(values[ranks == r]) == 0 for r in np.unique(ranks))
            if frozen:
                return f"{tag} did not change over steps {int(steps.min())}-{int(steps.max())} ({count(values.size, 'record')}): the weights were not updated (frozen, or no optimizer step)"
    for tag in ALIASES["grad_norm"]:
        if tag in present:
            _steps, values, _ranks = _finite_values(scalars, tag)
            if values.size and not np.any(values):
                return f"the gradient norm ({tag}) is 0 on all {count(values.size, 'record')}: no gradient reaches the weights"
    return None
