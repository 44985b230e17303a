"""One side of a comparison: what a path holds, reduced to one curve per meaning (loss, lr, grad norm).

A side is anything msnb reads (a file, a run directory, a tree, ``rank_N`` folders; a
Megatron-LM log, a ``trainer_state.json`` or a table as well), found by the one walk.  Its tags are matched by meaning
(``lm loss`` / ``loss`` / ``loss/auto`` ...), restarts are resolved as ``msnb
check`` resolves them (:func:`msnb.analysis.series.resolve_restarts`: the later
records win), several ranks become rank N's curve or their median per step, and
NaN/Inf are looked for in every record of the ranks used, before any of that.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import NothingReadable, UsageError
from ..events import read
from ..events.discovery import WalkBounds
from ..events.identity import is_table
from ..events.objects import local
from ..events.reader import ReadResult
from ..events.tables import NO_RANK
from ..events.tags import resolve, spellings
from ..words import listed
from .medians import nan_median
from .series import align, curves

MEANINGS = ("loss", "lr", "grad_norm", "skipped")


@dataclass
class Series:
    """One meaning's curve on one side: unique ascending ``steps`` (offset applied), ``values``, the real ``tag``."""

    tag: str
    steps: np.ndarray
    values: np.ndarray
    restarts: list = field(default_factory=list)
    nonfinite: tuple | None = None  # (step, value) of the first NaN/Inf record of the ranks used


@dataclass
class Side:
    """What one path gave: ``series`` by meaning, how ranks were combined (``how``), the ``problems`` met."""

    path: str
    series: dict
    how: str
    run: str
    problems: list
    notes: list = field(default_factory=list)

    def get(self, name: str) -> Series | None:
        return self.series.get(name)


def read_side(source, *, verify: bool = True, tags=None) -> tuple[ReadResult, str]:
    """Read a path as :func:`msnb.events.read` reads it (every format, at any depth).

    Args:
        source: a path, or a :class:`ReadResult` already read.
        verify: check CRCs of event files.
        tags: the tags a comparison needs (every spelling); a baseline format that can skip the rest does.

    Returns:
        ``(result, label)``.

    Raises:
        NothingReadable: the path is missing or holds no scalar.
    """
    if isinstance(source, ReadResult):
        return source, "the data given"
    given = os.fspath(source)
    path = Path(local(given))  # a bucket's prefix: its mirror (msnb.events.objects)
    if not path.exists():
        raise NothingReadable(f"{path}: no such file or directory")
    refused = WalkBounds(path).refuse_root() if path.is_dir() else None
    if refused:  # /proc: its files are the machine's processes, and reading one can block
        raise NothingReadable(f"{path}: {refused}")
    result = read(path, verify=verify, tags=tags, jobs=True)  # one run per job, a table never standing in for the training's loss
    if not len(result.scalars):
        why = f" ({result.problems[0]})" if result.problems else ""
        raise NothingReadable(f"{path}: no scalar could be read{why}")
    return result, given


def wanted_tags(*names) -> frozenset:
    """Every spelling of the meanings compared (and of any tag named), for readers that can skip the rest."""
    return spellings([*names, *MEANINGS], compared=True)


def _pick_tag(name: str, tags: set, explicit: bool, label: str) -> str | None:
    real = resolve(name, tags, compared=True)
    if real is None and explicit:
        raise UsageError(f"{label} has no tag {name!r} (tags: {listed(sorted(tags))})")
    return real


def _first_nonfinite(scalars, rows: np.ndarray, run: str, ranks) -> tuple | None:
    """(step, value) of the earliest NaN/Inf among *rows* (one tag's) of *run* and *ranks*, superseded records included."""
    idx = rows[scalars.run[rows] == run]
    if ranks is not None:
        idx = idx[np.isin(scalars.rank[idx], ranks)]
    bad = idx[~np.isfinite(scalars.value[idx])]
    if not bad.size:
        return None
    i = bad[np.argmin(scalars.step[bad])]
    return int(scalars.step[i]), float(scalars.value[i])


def build_side(result: ReadResult, label: str, *, tags: dict, rank="median", offset: int = 0) -> Side:
    """Reduce a read to one :class:`Series` per meaning.

    Args:
        result: what was read.
        label: the path, for messages.
        tags: meaning -> (name asked for, explicit); an explicit name the side lacks is an error.
        rank: ``"median"`` (the ranks' median per step; one rank: itself) or a rank number.
        offset: added to every step (the candidate's numbering onto the baseline's).

    Returns:
        The :class:`Side`.

    Raises:
        UsageError: a tag asked for by name is missing, or the rank asked for is not there.
        NothingReadable: no loss on this side.
    """
    scalars = result.scalars
    available = set(scalars.tags())
    loss_name, loss_explicit = tags["loss"]
    tables = {t for tags_of in result.origins.values() for t in tags_of if is_table(t, tags_of)}
    training = available - tables  # a table (an evaluation's eval_results.csv) never stands in for a training log's loss
    loss_tag = _pick_tag(loss_name, training, False, label) if training != available else None
    loss_tag = loss_tag or _pick_tag(loss_name, available, loss_explicit, label)
    if loss_tag is None:
        raise NothingReadable(f"{label} has no loss (tags: {listed(sorted(available))}); name it with --tag")
    rows = {loss_tag: np.flatnonzero(scalars.tag == loss_tag)}  # each tag's rows, found once
    loss_curves = curves(scalars, loss_tag, rows=rows[loss_tag])
    by_run: dict = {}
    for c in loss_curves:
        by_run.setdefault(c.run, []).append(c)
    run = max(by_run, key=lambda r: (max(c.steps.size for c in by_run[r]), r == "."))
    notes = []
    if len(by_run) > 1:
        notes.append(f"{label}: {len(by_run)} runs hold {loss_tag!r}; compared the longest, {run!r}")
    origin = result.origins.get(run, {}).get(loss_tag)
    if origin and len(result.files) > 1:
        notes.append(f"{label}: {loss_tag} read from {origin}")
    ranks_here = sorted({c.rank for c in by_run[run]})
    if rank != "median":
        if rank not in ranks_here:
            shown = ", ".join("unknown" if r == NO_RANK else str(r) for r in ranks_here)
            raise UsageError(f"{label} has no rank {rank} (ranks: {shown})")
        chosen = [rank]
        how = f"rank {rank}"
    else:
        chosen = ranks_here
        how = "one series" if len(chosen) == 1 and chosen[0] == NO_RANK else (f"rank {chosen[0]}" if len(chosen) == 1 else f"median of {len(chosen)} ranks")
    series = {}
    for meaning in MEANINGS:
        name, explicit = tags[meaning]
        real = loss_tag if meaning == "loss" else _pick_tag(name, available, explicit, label)
        if real is None:
            continue
        if real not in rows:
            rows[real] = np.flatnonzero(scalars.tag == real)
        cs = [c for c in (loss_curves if meaning == "loss" else curves(scalars, real, run=run, rows=rows[real])) if c.run == run and c.rank in chosen]
        if not cs:
            continue
        if len(cs) == 1:
            steps, values = cs[0].steps, cs[0].values
        else:
            steps, matrix = align(cs)
            values = nan_median(np.ascontiguousarray(matrix.T), axis=1) if steps.size else np.zeros(0)
        restarts = sorted({s for c in cs for s in c.restarts})
        bad = _first_nonfinite(scalars, rows[real], run, None if chosen == ranks_here else chosen)
        if bad is not None:
            bad = (bad[0] + offset, bad[1])
        series[meaning] = Series(real, steps + offset, np.asarray(values, dtype=np.float64), restarts, bad)
    problems = [p for p in result.problems if str(getattr(p, "severity", "")) != "info"]
    return Side(label, series, how, run, problems, notes)


def describe_steps(steps: np.ndarray) -> str:
    """``steps 1..2000 every 10`` (or ``irregularly``) for messages."""
    if not steps.size:
        return "no steps"
    gaps = np.diff(steps)
    if gaps.size and np.all(gaps == gaps[0]):
        every = f" every {int(gaps[0])}" if gaps[0] != 1 else ""
    else:
        every = " irregularly" if gaps.size else ""
    return f"steps {int(steps[0])}..{int(steps[-1])}{every}"


def finite_or_none(x) -> float | None:
    """A number for JSON: None for NaN/Inf."""
    return float(x) if x is not None and math.isfinite(x) else None
