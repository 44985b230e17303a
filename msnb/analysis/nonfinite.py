"""NaN and Inf, found in every record: per rank, with the first step, before any replacing or averaging.

A rank that logs a NaN at a step it also logged a finite value for (a retried
step, a resumed job) still has a NaN: it is reported, never deduplicated away.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..words import count
from .rules import RankFlag


@dataclass
class NonFinite:
    """The non-finite records of one (run, rank, tag): first step and value, and how many of how many records."""

    run: str
    rank: int
    tag: str
    step: int
    value: str
    count: int
    records: int
    steps: list

    def as_dict(self) -> dict:
        return {"run": self.run, "rank": self.rank, "tag": self.tag, "step": self.step, "value": self.value, "count": self.count, "records": self.records}


def find_nonfinite(scalars, tags, *, keep_steps: int = 20) -> list[NonFinite]:
    """Every (run, rank, tag) among *tags* with a NaN or Inf record.

    Args:
        scalars: a ScalarTable.
        tags: real tags to look at.
        keep_steps: how many non-finite steps to keep per entry (for drawing).

    Returns:
        One entry per (run, rank, tag) with a non-finite record, sorted by run, rank, tag.
    """
    bad = np.flatnonzero(~np.isfinite(scalars.value))
    bad = bad[np.isin(scalars.tag[bad], list(tags))]
    if not bad.size:
        return []
    out = []
    keys = sorted(set(zip(scalars.run[bad].tolist(), scalars.rank[bad].tolist(), scalars.tag[bad].tolist())))
    for run, rank, tag in keys:
        rows = np.flatnonzero(scalars.rank == rank)  # integers first: the string compares then run over one rank's rows
        rows = rows[(scalars.run[rows] == run) & (scalars.tag[rows] == tag)]
        steps, values = scalars.step[rows], scalars.value[rows]
        nf = ~np.isfinite(values)
        order = np.argsort(steps[nf], kind="stable")
        bsteps, bvalues = steps[nf][order], values[nf][order]
        out.append(NonFinite(run, int(rank), tag, int(bsteps[0]), str(bvalues[0]), int(nf.sum()), int(rows.size), bsteps[:keep_steps].tolist()))
    return out


@dataclass
class NonFiniteRange:
    """Consecutive non-finite records of one (run, rank, tag) with the same value: ``nan in loss (rank 1) at steps 150-169 (20 steps)``.

    Consecutive means no finite record of that rank and tag in between, so a run recorded every 5 steps still
    gives one range.  ``count`` is how many records the range holds.
    """

    run: str
    rank: int
    tag: str
    value: str
    first: int
    last: int
    count: int

    def as_dict(self) -> dict:
        return {"run": self.run, "rank": self.rank, "tag": self.tag, "value": self.value, "step": self.first, "last_step": self.last, "steps": self.count}

    def steps_text(self) -> str:
        """``step 150`` or ``steps 150-169 (20 steps)``."""
        if self.count == 1:
            return f"step {self.first}"
        return f"steps {self.first}-{self.last} ({count(self.count, 'step')})"

    def describe(self, run: str | None = None) -> str:
        """One line for people: ``nan in loss of run a (rank 1) at steps 150-169 (20 steps)``; *run* names the run (None: not said)."""
        of = f" of run {run}" if run is not None else ""
        rank = f" (rank {self.rank})" if self.rank >= 0 else ""
        return f"{self.value} in {self.tag}{of}{rank} at {self.steps_text()}"


def nonfinite_ranges(scalars, found: list[NonFinite]) -> list[NonFiniteRange]:
    """The non-finite records of each entry of *found*, as ranges of consecutive steps (one line each, not one per step).

    Args:
        scalars: the ScalarTable *found* came from.
        found: from :func:`find_nonfinite`.

    Returns:
        Ranges in the order of *found*, each in step order.
    """
    out = []
    for f in found:
        rows = np.flatnonzero(scalars.rank == f.rank)
        rows = rows[(scalars.run[rows] == f.run) & (scalars.tag[rows] == f.tag)]
        order = np.argsort(scalars.step[rows], kind="stable")
        steps, values = scalars.step[rows][order], scalars.value[rows][order]
        kind = np.where(np.isnan(values), 1, np.where(np.isposinf(values), 2, np.where(np.isneginf(values), 3, 0)))
        starts = np.flatnonzero((kind != 0) & np.r_[True, kind[1:] != kind[:-1]])
        for a in starts.tolist():
            b = a
            while b + 1 < kind.size and kind[b + 1] == kind[a]:
                b += 1
            out.append(NonFiniteRange(f.run, f.rank, f.tag, str(values[a]), int(steps[a]), int(steps[b]), b - a + 1))
    return out


def nonfinite_flags(found: list[NonFinite], ranks_of_run: dict) -> list[RankFlag]:
    """Flags for non-finite records: "alone" when the other ranks of the run stayed finite at that step.

    Args:
        found: from :func:`find_nonfinite`.
        ranks_of_run: run -> its ranks (to tell "alone" from "all ranks").

    Returns:
        One flag per entry of *found*.
    """
    flags = []
    by_step = {}
    for f in found:
        by_step.setdefault((f.run, f.tag), {}).setdefault(f.step, []).append(f.rank)
    for f in found:
        ranks = ranks_of_run.get(f.run) or []
        others = [r for r in by_step[(f.run, f.tag)].get(f.step, []) if r != f.rank]
        if f.rank >= 0 and len(ranks) > 1 and not others:
            reason = f"{f.tag} is {f.value} on rank {f.rank} alone from step {f.step}"
        elif f.rank >= 0:
            reason = f"{f.tag} is {f.value} on rank {f.rank} from step {f.step}"
        else:
            reason = f"{f.tag} is {f.value} from step {f.step}"
        if f.count > 1:
            reason += f" ({f.count} of {count(f.records, 'record')})"
        flags.append(RankFlag(f.run, f.rank, f.tag, f.step, reason))
    return flags
