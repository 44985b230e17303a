"""NaN and Inf, found in every record: per rank, with the first step, before any replacing or averaging.

A rank that logs a NaN at a step it also logged a finite value for (a retried
step, a resumed job) still has a NaN: it is reported, never deduplicated away.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
            reason += f" ({f.count} of {f.records} records)"
        flags.append(RankFlag(f.run, f.rank, f.tag, f.step, reason))
    return flags
