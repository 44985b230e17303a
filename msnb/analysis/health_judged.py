"""What the judge says of the job ``msnb health`` scans: its failed runs, and which series are an evaluation's.

``msnb health`` finds where a run went bad first; ``msnb check`` decides whether it did.  On one job the two must not
disagree: a run the judge fails (a writer's copy of the loss that rises, :func:`msnb.analysis.judge.judge_run`) is
named by health as the judge names it, and an evaluation table's series beside a training log (a NaN in
``eval_results.csv``), a warning in the judge's ``evaluation`` check, is a warning in health too, never its failure.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import NothingReadable
from ..events import ReadResult
from ..events.identity import is_table
from ..events.msprobe import site as msprobe_site
from .check import check
from .health import PER_PARAMETER
from .rules import FAIL


@dataclass
class Judged:
    """The judge's answer on a job: ``failed`` (the runs' :class:`~msnb.analysis.judge.RunVerdict` s that failed, each
    with the ``origins`` of its run) and ``evaluation`` (``(run, tag)`` of the tables' series judged as evaluation)."""

    failed: list = field(default_factory=list)
    evaluation: set = field(default_factory=set)
    origins: dict = field(default_factory=dict)

    def named(self, verdict) -> str:
        """``run job: 'train/loss' from train.log failed (loss_falling, loss_spikes)``: the series whose verdict stands."""
        where = self.origins.get(verdict.run, {}).get(verdict.tag)
        failed = ", ".join(c.name for c in verdict.checks if c.status == FAIL)
        return f"run {verdict.run}: {verdict.tag!r}" + (f" from {where}" if where else "") + f" failed ({failed})"

    def as_dict(self, verdict) -> dict:
        where = self.origins.get(verdict.run, {}).get(verdict.tag)
        failed = [{"name": c.name, "detail": c.detail} for c in verdict.checks if c.status == FAIL]
        return {"run": verdict.run, "tag": verdict.tag, "from": None if where is None else str(where), "failed": failed}


def judged(result: ReadResult) -> Judged:
    """The judge's verdict on every run of *result* (``msnb check``'s, read the same way), per-parameter and msprobe
    series left out (they only explain a failure; health scans them itself).

    Returns:
        A :class:`Judged`; empty where no run holds a loss (nothing for the judge to say).
    """
    scalars = result.scalars
    tags = scalars.tags()
    kept = {t for t in tags if not t.startswith(PER_PARAMETER) and msprobe_site(t) is None}
    if len(kept) < len(tags):
        scalars = scalars.take(np.fromiter((t in kept for t in scalars.tag.tolist()), dtype=bool, count=len(scalars)))
    try:
        verdicts = check(replace(result, scalars=scalars)).runs
    except NothingReadable:
        return Judged()
    out = Judged(origins=result.origins)
    for verdict in verdicts:
        origins = result.origins.get(verdict.run) or {}
        if verdict.tag is not None and not is_table(verdict.tag, origins):  # a training loss: the tables are evaluation
            out.evaluation |= {(verdict.run, t) for t in origins if is_table(t, origins)}
        if not verdict.passed:
            out.failed.append(verdict)
    return out
