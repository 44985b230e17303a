"""One side of a comparison: what a path holds, reduced to one curve per meaning (loss, lr, grad norm).

A side is anything msnb reads (a file, a run directory, a tree, ``rank_N`` folders; a
Megatron-LM log, a ``trainer_state.json`` or a table as well), found by the one walk.  Its tags are matched by meaning
(``lm loss`` / ``loss`` / ``loss/auto`` ...), restarts are resolved as ``msnb
check`` resolves them (:func:`msnb.analysis.series.resolve_restarts`: the later
records win), several ranks become rank N's curve or their median per step, and
NaN/Inf are looked for in every record of the ranks used, before any of that.

A side may hold its loss more than once: under several spellings, or as a job's writer's copy that differs from the
series read (``train/loss``: :mod:`msnb.events.identity`).  Every such training series is kept (:attr:`Side.losses`,
the one read first; equal ones once), so :func:`msnb.analysis.compare.compare` compares each and the worse result
stands, as the judge judges each (:func:`msnb.analysis.judge.loss_series`).  A table's series (an evaluation's
``eval_results.csv``) never stands in for a training log's loss.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..errors import NothingReadable, UsageError
from ..events import read
from ..events.discovery import WalkBounds
from ..events.identity import is_table, stands_for
from ..events.objects import local
from ..events.reader import ReadResult
from ..events.tables import NO_RANK, distinct
from ..events.tags import resolve, spellings
from ..words import listed
from .judge import loss_series
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
    origin: str = ""  # the file or folder of the job it was read from, where the read says (ReadResult.origins)
    how: str = ""  # how its ranks were combined (``rank 0``, ``median of 8 ranks``), where it differs from its side's
    companions: dict = field(default_factory=dict)  # a copy's writer's own differing lr, grad norm...: meaning -> Series

    def same_as(self, other: Series) -> bool:
        """The same curve (steps, values, first NaN/Inf): one series under two names, compared once."""
        return self.nonfinite == other.nonfinite and np.array_equal(self.steps, other.steps) and np.array_equal(self.values, other.values, equal_nan=True)

    def named(self) -> str:
        """``'train/loss' from train.log``: the tag, and the file where known."""
        return f"{self.tag!r}" + (f" from {self.origin}" if self.origin else "")


@dataclass
class Side:
    """What one path gave: ``series`` by meaning, how ranks were combined (``how``), the ``problems`` met."""

    path: str
    series: dict
    how: str
    run: str
    problems: list
    notes: list = field(default_factory=list)
    losses: list = field(default_factory=list)  # every differing training series of the loss, the one read first
    files: int = 1  # files read: the loss's file is said where there were several

    def get(self, name: str) -> Series | None:
        return self.series.get(name)

    def variants(self) -> list:
        """This side once per training series of its loss (:attr:`losses`), each with that series as its loss."""
        if len(self.losses) <= 1:
            return [self]
        return [replace(self, series={**self.series, **s.companions, "loss": s}, how=s.how or self.how) for s in self.losses]


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
    """Reduce a read to one :class:`Series` per meaning, and every differing training series of the loss.

    Args:
        result: what was read.
        label: the path, for messages.
        tags: meaning -> (name asked for, explicit); an explicit name the side lacks is an error.
        rank: ``"median"`` (the ranks' median per step; one rank: itself) or a rank number.
        offset: added to every step (the candidate's numbering onto the baseline's).

    Returns:
        The :class:`Side`: ``series["loss"]`` the series read, ``losses`` it and every other training series of the
        loss that differs from it (another spelling, a writer's differing copy), each named with its file.

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
    origins = result.origins.get(run) or {}
    ranks_here = sorted({c.rank for c in by_run[run]})
    chosen, how = _chosen_ranks(rank, ranks_here, label)
    series = {}
    for meaning in MEANINGS:
        name, explicit = tags[meaning]
        real = loss_tag if meaning == "loss" else _pick_tag(name, available, explicit, label)
        if real is None:
            continue
        if real not in rows:
            rows[real] = np.flatnonzero(scalars.tag == real)
        cs = [c for c in (loss_curves if meaning == "loss" else curves(scalars, real, run=run, rows=rows[real])) if c.run == run and c.rank in chosen]
        if cs:
            series[meaning] = _reduce(scalars, cs, rows[real], run, None if chosen == ranks_here else chosen, offset, str(origins.get(real, "")))
    losses = [series["loss"], *_other_losses(scalars, origins, run, loss_tag, loss_name if loss_explicit else "loss", rank, offset, series["loss"])]
    problems = [p for p in result.problems if str(getattr(p, "severity", "")) != "info"]
    return Side(label, series, how, run, problems, notes, losses, len(result.files))


def _chosen_ranks(rank, ranks_here: list, label: str) -> tuple[list, str]:
    """The ranks a side's curves are taken from, and how they are combined, in words."""
    if rank != "median" and rank not in ranks_here:
        shown = ", ".join("unknown" if r == NO_RANK else str(r) for r in ranks_here)
        raise UsageError(f"{label} has no rank {rank} (ranks: {shown})")
    chosen = [rank] if rank != "median" else ranks_here
    return chosen, _how(chosen)


def _how(chosen: list) -> str:
    if len(chosen) == 1:
        return "one series" if chosen[0] == NO_RANK else f"rank {chosen[0]}"
    return f"median of {len(chosen)} ranks"


def _reduce(scalars, cs: list, rows: np.ndarray, run: str, ranks, offset: int, origin: str) -> Series:
    """One curve from a tag's curves *cs* (the median per step of several ranks), its first NaN/Inf among *ranks* (None: all)."""
    if len(cs) == 1:
        steps, values = cs[0].steps, cs[0].values
    else:
        steps, matrix = align(cs)
        values = nan_median(np.ascontiguousarray(matrix.T), axis=1) if steps.size else np.zeros(0)
    restarts = sorted({s for c in cs for s in c.restarts})
    bad = _first_nonfinite(scalars, rows, run, ranks)
    if bad is not None:
        bad = (bad[0] + offset, bad[1])
    return Series(cs[0].tag, steps + offset, np.asarray(values, dtype=np.float64), restarts, bad, origin)


def _other_losses(scalars, origins: dict, run: str, loss_tag: str, asked: str, rank, offset: int, first: Series) -> list:
    """The loss of each other training writer of the run (:func:`~msnb.analysis.judge.loss_series`: a writer's
    differing copy, ``train/loss``, or its own spelling), each reduced as the loss read was, less those equal to one
    already kept.

    One writer gives one series, its first in the judge's order: a writer's other spellings are other quantities
    (Hugging Face's ``train_loss`` is the whole run's mean, logged once), not copies of its curve.  A copy's ranks are
    its own: the rank asked for where it holds it, else all of them (a console's copy has no rank).  A copy is compared
    with its own writer's learning rate and grad norm where those differ from the ones read too (``train/lr``).
    """
    present = set(distinct(scalars.tag[scalars.run == run]))
    training, evaluation = loss_series(asked, present, origins)
    out: list = []
    writers = {str(origins.get(loss_tag, ""))}
    for tag in training if not is_table(loss_tag, origins) else evaluation:
        writer = str(origins.get(tag, ""))
        if tag == loss_tag or writer in writers:
            continue
        writers.add(writer)
        rows = np.flatnonzero(scalars.tag == tag)
        cs = curves(scalars, tag, run=run, rows=rows)
        ranks = sorted({c.rank for c in cs})
        chosen = [rank] if rank != "median" and rank in ranks else ranks
        cs = [c for c in cs if c.rank in chosen]
        if not cs:
            continue
        s = _reduce(scalars, cs, rows, run, None if chosen == ranks else chosen, offset, str(origins.get(tag, "")))
        s.how = _how(chosen)
        s.companions = _companions(scalars, origins, run, present, writer, chosen, offset)
        if not any(s.same_as(o) for o in (first, *out)):
            out.append(s)
    return out


def _companions(scalars, origins: dict, run: str, present: set, writer: str, chosen: list, offset: int) -> dict:
    """A writer's own differing copies of the other meanings (``train/lr``, ``train/global_norm``), reduced on *chosen* ranks."""
    out = {}
    for name in MEANINGS[1:]:
        for tag in sorted(present):
            base = stands_for(tag, origins)
            if base == tag or str(origins.get(tag, "")) != writer or resolve(name, {base}, compared=True) is None:
                continue
            rows = np.flatnonzero(scalars.tag == tag)
            cs = [c for c in curves(scalars, tag, run=run, rows=rows) if c.rank in chosen]
            if cs:
                out[name] = _reduce(scalars, cs, rows, run, chosen, offset, writer)
                break
    return out


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
