"""The board's data: every run read once into memory, split per run, judged, and followed for new bytes.

The controls only change how this data is drawn, so a control change never
reads a file again.  Each path given has one :class:`~msnb.events.Follower`;
a poll reads only the bytes the writers added, and only the runs whose rows
changed are split out and judged again.  A run keeps its colour for the life
of the board (the order it first appeared in), so the swatch beside its
checkbox always matches its lines.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from ..analysis.judge import RunVerdict, judge_run
from ..analysis.memory import run_memory
from ..analysis.rules import FAIL, PASS, WARN
from ..analysis.series import resolve_restarts
from ..errors import UsageError
from ..events.objects import local
from ..events.reader import Follower
from ..events.runs import run_key, run_labeller, run_root
from ..events.tables import HistogramTable, ScalarTable, object_codes
from ..events.tags import ALIASES, DEFAULT_PANELS, meaning

# matplotlib's default cycle, fixed here so a run's swatch is known before anything is drawn
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")


@dataclass
class Series:
    """One line's data, sorted by step: ``rank`` is None for the mean over ranks.

    ``bad`` marks the steps where a value was NaN or Inf (for the mean: on any rank), whatever ``values`` holds there.
    """

    run: str
    rank: int | None
    tag: str
    steps: np.ndarray
    walls: np.ndarray
    values: np.ndarray
    bad: np.ndarray = None
    smoothed: dict = field(default_factory=dict)  # weight -> smoothed values (a slider moved back costs nothing)

    def __post_init__(self):
        if self.bad is None:
            self.bad = ~np.isfinite(self.values)


def light(verdict: RunVerdict | None) -> str:
    """``pass``, ``warn`` or ``fail`` for a run's verdict (``warn`` too when nothing could be judged)."""
    if verdict is None:
        return WARN
    if not verdict.passed:
        return FAIL
    return WARN if any(c.status == WARN for c in verdict.checks) else PASS


class RunData:
    """One run's rows, grouped once by (tag, rank) so a redraw only slices arrays.

    Each rank's rows of a tag are the judge's (:func:`~msnb.analysis.series.resolve_restarts`): where a resumed job
    wrote steps again, the later records replace the earlier ones, so a line shows one value per step, the one judged.
    """

    def __init__(self, key: str, scalars: ScalarTable, histograms: HistogramTable):
        self.key = key
        self.scalars = scalars
        self.histograms = histograms
        self.verdict: RunVerdict | None = None
        self.memory = None  # the ranks' memory report (msnb.analysis.memory.RunMemory), judged into the verdict's checks
        self.memory_seen: tuple = ()  # which reports it was judged from (a report that comes after the last step judges again)
        names, codes = _codes(scalars.tag)
        self.tags: list[str] = sorted(names)
        self._rows: dict = {}
        if len(scalars):
            order = np.lexsort((scalars.rank, codes))  # by tag, then rank; stable, so each group stays in read order
            key_tag, key_rank = codes[order], scalars.rank[order]
            cut = np.flatnonzero((key_tag[1:] != key_tag[:-1]) | (key_rank[1:] != key_rank[:-1])) + 1
            for part in np.split(order, cut):
                # the judge's rule for a resumed job: a restart replaces the records it repeats (one row per step, ascending)
                _steps, kept, _restarts, _replaced = resolve_restarts(scalars.step[part], np.arange(part.size, dtype=np.float64))
                name = names[int(codes[part[0]])]
                self._rows.setdefault(name, {})[int(scalars.rank[part[0]])] = part[kept.astype(np.int64)]
        self.ranks = sorted({r for by_rank in self._rows.values() for r in by_rank if r >= 0})
        self._series: dict = {}
        self.cache: dict = {}  # what the drawing derives from the rows once (bands, their medians), kept with them
        walls = scalars.wall_time[np.isfinite(scalars.wall_time)] if len(scalars) else np.zeros(0)
        self.start = float(walls.min()) if walls.size else 0.0
        self.step_range = (int(scalars.step.min()), int(scalars.step.max())) if len(scalars) else None

    def real_tag(self, name: str) -> str | None:
        """The tag this run holds for *name* (a real tag, or a meaning such as ``loss`` found as ``loss/auto``)."""
        if name in self._rows:
            return name
        m = meaning(name)
        return next((t for t in ALIASES[m] if t in self._rows), None) if m else None

    def ranks_of(self, tag: str) -> list[int]:
        return sorted(self._rows.get(tag, {}))

    def series(self, tag: str, rank: int | None) -> Series | None:
        """The rows of *tag* for one rank, or (``rank=None``) their mean at each step; cached.

        The mean is over the ranks with a finite value at the step, so one rank's NaN does not blank the
        others' curve; the step is marked ``bad`` (drawn as a red cross), and a step where no rank is
        finite keeps the non-finite value (a gap in the line).
        """
        key = (tag, rank)
        if key in self._series:
            return self._series[key]
        by_rank = self._rows.get(tag)
        if not by_rank or (rank is not None and rank not in by_rank):
            return None
        t = self.scalars
        if rank is not None or len(by_rank) == 1:
            idx = by_rank[rank if rank is not None else next(iter(by_rank))]
            out = Series(self.key, rank, tag, t.step[idx], t.wall_time[idx], t.value[idx])
        else:
            idx = np.concatenate(list(by_rank.values()))
            steps, values, walls = t.step[idx], t.value[idx], t.wall_time[idx]
            uniq, inv = np.unique(steps, return_inverse=True)
            finite = np.isfinite(values)
            sums = np.bincount(inv, weights=np.where(finite, values, 0.0), minlength=uniq.size)
            counts = np.bincount(inv, weights=finite, minlength=uniq.size)
            with np.errstate(invalid="ignore", divide="ignore"):
                mean = sums / counts
            bad_rows = np.flatnonzero(~finite)
            bad = np.zeros(uniq.size, dtype=bool)
            bad[inv[bad_rows]] = True
            none = counts == 0
            mean[inv[bad_rows[none[inv[bad_rows]]]]] = values[bad_rows[none[inv[bad_rows]]]]  # no finite rank: the NaN/Inf itself
            first_wall = np.full(uniq.size, np.inf)
            np.minimum.at(first_wall, inv, np.where(np.isfinite(walls), walls, np.inf))
            first_wall[~np.isfinite(first_wall)] = np.nan
            out = Series(self.key, None, tag, uniq, first_wall, mean, bad)
        self._series[key] = out
        return out


FOLLOW_STEP_BYTES = 8 * 1024 * 1024
"""The most bytes one follow step reads from one file: a step, and so Stop, takes a fraction of a second."""


class BoardData:
    """The runs under one or several paths, in memory.

    Args:
        paths: files, run directories or trees of runs (every path must exist).
        verify: check record checksums while reading.
        tag: the loss tag the judge looks at, or its meaning.

    Raises:
        UsageError: no path given, or a path does not exist.
    """

    def __init__(self, paths, *, verify: bool = True, tag: str = "loss"):
        paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
        if not paths:
            raise UsageError("give at least one path (a run directory, a tree of runs, an event file or a log)")
        for p in paths:
            if not os.path.exists(local(p)):  # a bucket's prefix: its mirror (msnb.events.objects)
                raise UsageError(f"{p}: no such file or directory")
        self.paths = [str(p) for p in paths]
        self.tag = tag
        self._followers = [Follower(p, verify=verify, workers=None, jobs=True) for p in self.paths]  # one run per job
        self.runs: dict[str, RunData] = {}
        self.order: list[str] = []  # run keys in the order they appeared: their colours
        self.problems: list = []
        self.polls = 0
        self.labels: dict[str, str] = {}

    def _run_key(self, path: str, run: str) -> str:
        return run if len(self.paths) == 1 else run_key(run_root(path), run)

    def poll(self, *, final: bool = False, bounded: bool = False) -> list[str]:
        """Read what was added since the last poll; split out and judge again the runs that changed.

        Args:
            final: report a partial last record as truncated (a one-shot read) rather than wait for it.
            bounded: read at most :data:`FOLLOW_STEP_BYTES` of each file (a follow's step: a file growing at
                60 MB/s is caught up over several steps, and Stop never waits for a read of everything).

        Returns:
            The keys of the runs that are new or changed.
        """
        self.polls += 1
        changed: list[str] = []
        problems: list = []
        for path, follower in zip(self.paths, self._followers):
            follower.step_bytes = FOLLOW_STEP_BYTES if bounded else None
            news = follower.poll_files(final)
            result = follower.result
            problems.extend(result.problems)
            if self.polls > 1 and not any(not n.empty for n in news):
                continue
            for run, scalars, histograms in _split(result.scalars, result.histograms):
                key = self._run_key(path, run)
                old = self.runs.get(key)
                seen = tuple((r["path"], r["job"], r["line"]) for r in result.memory if r["run"] == run)
                if old is not None and len(old.scalars) == len(scalars) and len(old.histograms) == len(histograms) and old.memory_seen == seen:
                    continue
                self.runs[key] = data = RunData(key, _renamed(scalars, key), _renamed(histograms, key))
                data.memory_seen = seen
                if len(data.scalars):
                    origins = result.origins.get(run)
                    data.verdict = judge_run(data.scalars, key, tag=self.tag, explicit_tag=self.tag != "loss", origins=origins).said_from(
                        origins
                    )  # as msnb check judges it
                    data.memory = run_memory(result, run)
                    if data.memory is not None:
                        data.verdict.checks.extend(data.memory.checks())
                changed.append(key)
        self.problems = problems
        for key in sorted(changed):
            if key not in self.order:
                self.order.append(key)
        if changed:
            label = run_labeller(self.paths, sorted(self.runs))
            self.labels = {key: label(key) for key in self.runs}
        return changed

    def behind(self) -> bool:
        """Whether the last bounded poll left bytes unread (a file growing faster than the follow reads it)."""
        return any(state.cut for follower in self._followers for state in follower._states.values())

    def color(self, key: str) -> str:
        """The run's colour (fixed from the moment it appeared)."""
        return COLORS[self.order.index(key) % len(COLORS)] if key in self.order else "#7f7f7f"

    def label(self, key: str) -> str:
        return self.labels.get(key, key)

    def tag_names(self) -> list[str]:
        """What the tag picker offers: a meaning (``loss``) where a run's tag has one, else the tag itself.

        The usual panels come first, in their usual order; the rest follow sorted.
        """
        names = set()
        for data in self.runs.values():
            for tag in data.tags:
                names.add(meaning(tag) or tag)
        first = [m for m in DEFAULT_PANELS if m in names]
        return first + sorted(names - set(first))

    def default_tags(self) -> list[str]:
        names = self.tag_names()
        usual = [m for m in DEFAULT_PANELS if m in names]
        return usual or names[:4]

    def flags(self) -> list:
        """Every run's flags (the judge's :class:`~msnb.analysis.rules.RankFlag`), runs in board order, then by step."""
        return [f for key in self.order if key in self.runs and self.runs[key].verdict for f in self.runs[key].verdict.flags]

    def step_range(self) -> tuple[int, int] | None:
        ranges = [d.step_range for d in self.runs.values() if d.step_range]
        return (min(r[0] for r in ranges), max(r[1] for r in ranges)) if ranges else None

    def points(self) -> int:
        return sum(len(d.scalars) for d in self.runs.values())

    def histogram_tags(self) -> list[str]:
        return sorted({t for d in self.runs.values() if len(d.histograms) for t in d.histograms.tag.tolist()})


def _split(scalars: ScalarTable, histograms: HistogramTable):
    """(run, its scalars, its histograms) for every run of one follower's result."""
    parts: dict = {}
    for kind, table in (("s", scalars), ("h", histograms)):
        if not len(table):
            continue
        names, codes = _codes(table.run)
        for i, name in enumerate(names):
            parts.setdefault(str(name), {})[kind] = table.take(codes == i) if len(names) > 1 else table
    for run in sorted(parts):
        yield run, parts[run].get("s", ScalarTable()), parts[run].get("h", HistogramTable())


def _codes(col: np.ndarray) -> tuple[list, np.ndarray]:
    """The distinct values of an object column and each row's index into them, grouped by value.

    Every file read holds its own string objects, so one run or tag name may be several objects:
    grouping by object first (cheap) and then by value keeps them one group.
    """
    if not len(col):
        return [], np.zeros(0, dtype=np.int64)
    grouped = object_codes(col)
    if grouped is None:  # rows holding too many objects to group by address: group through the strings
        names, codes = np.unique(col.astype(str), return_inverse=True)
        return names.tolist(), codes
    objects, codes = grouped
    names = sorted(set(objects))
    at = {name: i for i, name in enumerate(names)}
    return names, np.array([at[o] for o in objects], dtype=np.int64)[codes]


def _renamed(table, key: str):
    """*table* with its run column set to the board's key for the run (no copy of the other columns)."""
    if not len(table):
        return table
    out = type(table)(**{c: getattr(table, c) for c in table.COLUMNS})
    runs = np.empty(len(table), dtype=object)
    runs.fill(key)
    out.run = runs
    return out
