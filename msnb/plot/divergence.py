"""Which ranks of a multi-rank run have left the others?

Data-parallel ranks see different batches, so their losses differ step to
step but move together.  A rank is flagged when its smoothed loss departs from
the ranks' median smoothed loss (the other rank's, with two) by more than ``threshold`` for
``patience`` consecutive common steps, or when it goes NaN/Inf while the
others stay finite.  The gap is measured relative to the loss's size (the
larger of the current median and its mean over the run, so a loss near zero
does not turn noise into a flag).  With two ranks only the one whose loss is
higher is flagged.  The flag carries the step where the departure began.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass

import numpy as np

from .smoothing import ema


@dataclass
class RankFlag:
    run: str
    rank: int
    tag: str
    step: int
    reason: str

    def as_dict(self) -> dict:
        return asdict(self)


def rank_divergence(scalars, tag: str = "loss", *, smooth: float = 0.6, threshold: float = 0.2, patience: int = 5) -> list[RankFlag]:
    """Flags for every run of *scalars* (a ScalarTable) with two or more ranks reporting *tag*."""
    flags: list[RankFlag] = []
    table = scalars.where(tag=tag)
    for run in sorted(set(table.run.tolist())):
        per_run = table.where(run=run)
        ranks = sorted(r for r in set(per_run.rank.tolist()) if r >= 0)
        if len(ranks) < 2:
            continue
        series = {}
        for r in ranks:
            steps, values = per_run.series(tag, rank=r)
            steps, first = np.unique(steps, return_index=True)  # a step logged twice counts once
            series[r] = (steps, values[first])
        common = series[ranks[0]][0]
        for r in ranks[1:]:
            common = np.intersect1d(common, series[r][0])
        if common.size == 0:
            continue
        raw = np.vstack([s[1][np.searchsorted(s[0], common)] for s in (series[r] for r in ranks)])
        finite = np.isfinite(raw)
        for i, r in enumerate(ranks):
            alone = ~finite[i] & np.delete(finite, i, axis=0).all(axis=0)
            if alone.any():
                step = int(common[np.argmax(alone)])
                flags.append(RankFlag(run, r, tag, step, f"{tag} is {raw[i][np.argmax(alone)]} on rank {r} alone from step {step}"))
        smoothed = np.vstack([ema(row, smooth) for row in raw])
        clean = np.where(np.isfinite(smoothed), smoothed, np.nan)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: nothing to compare there
            overall = np.nanmedian(clean, axis=0)
            # losses shrink towards zero, where relative gaps explode: measure against the run's typical size too
            scale = np.maximum(np.abs(overall), np.nanmean(np.abs(overall)) if np.isfinite(overall).any() else 0.0)
            scale = np.maximum(np.nan_to_num(scale, nan=0.0), 1e-12)
            candidates = []
            for i, r in enumerate(ranks):
                if any(f.run == run and f.rank == r for f in flags):
                    continue
                # with three or more ranks the median of all of them is robust to the one that leaves;
                # with two, each is compared with the other
                median = overall if len(ranks) >= 3 else np.nanmedian(np.delete(clean, i, axis=0), axis=0)
                rel = np.nan_to_num(np.abs(clean[i] - median) / scale, nan=0.0)
                start = _first_run(rel > threshold, patience)
                if start is not None:
                    # report the onset: walk back while the gap was already opening (a quarter of the threshold)
                    onset = start
                    while onset > 0 and rel[onset - 1] > threshold / 4:
                        onset -= 1
                    candidates.append((i, r, onset, median, start))
        if len(ranks) == 2 and len(candidates) == 2:
            # two ranks that disagree: the one whose loss is higher is the one that left
            candidates = [max(candidates, key=lambda c: np.nan_to_num(clean[c[0]][c[4]], nan=np.inf))]
        for i, r, start, median, crossed in candidates:
            step = int(common[start])
            end = min(crossed + patience - 1, common.size - 1)
            flags.append(
                RankFlag(
                    run,
                    r,
                    tag,
                    step,
                    f"smoothed {tag} of rank {r} departs from the other ranks' median by more than {threshold:.0%} from step {step} "
                    f"({clean[i][end]:.4g} vs {median[end]:.4g} at step {int(common[end])})",
                )
            )
    return flags


def _first_run(mask: np.ndarray, length: int) -> int | None:
    """Index where *mask* first holds for *length* consecutive entries."""
    count = 0
    for j, on in enumerate(mask.tolist()):
        count = count + 1 if on else 0
        if count >= length:
            return j - length + 1
    return None
