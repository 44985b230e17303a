"""Scalar panels as TensorBoard and MindInsight draw them, as a matplotlib figure.

One panel per tag; raw values faint and the smoothed curve solid (noisy series
only: schedules such as the learning rate are drawn as they are); several runs
(and, with ``ranks=True``, several ranks) overlaid; x as step, wall-clock time
or time since the run started; NaN/Inf marked where they happened; the
judge's flags (:func:`msnb.analysis.judge.judge_run`: NaN/Inf, a rank whose
loss departed from the others, a jump that did not recover) drawn at the step
each began.  Series
are downsampled for drawing with M4 (spikes kept), never before smoothing.
Short series get point markers (one point drawn as a line is invisible), and a
step-time panel is scaled to the steady state with the compile step marked.

A panel stands for a meaning resolved run by run (``loss`` is one run's
``loss/auto`` and another's ``loss``); a run without it is named.  With many
lines a run keeps one colour (its ranks thin lines of it) and one entry in a
legend above the panels, so the legend never covers the data; a constant or
near-constant series is drawn flat on an axis that does not magnify rounding.
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass, field, replace

import numpy as np

from ..analysis import DEFAULT_RULES, find_nonfinite, nonfinite_ranges
from ..analysis.bands import BANDS_ABOVE, rank_bands
from ..analysis.judge import judge_run
from ..analysis.nonfinite import NonFiniteRange
from ..analysis.smoothing import ema
from ..errors import NothingReadable, UsageError
from ..events.msprobe import markers_of
from ..events.runs import run_labeller
from ..events.tables import ScalarTable
from ..events.tags import ALIASES, DEFAULT_PANELS, is_schedule, meaning, resolve, unit
from ..status import ResultView
from ..words import count
from .bands import MAX_LABELLED, draw_bands, line_color
from .downsample import m4
from .render import current_cell, figure_png, show_figure

MAX_NONFINITE_LINES = 10  # ranges of NaN/Inf listed in the text; report.nonfinite holds every one


@dataclass
class PlotReport(ResultView):
    """What was drawn: the figure plus the facts a reader of the plot should know.

    ``points`` counts the points read for the drawn tags; ``drawn_points`` the
    raw points that reached matplotlib (after averaging ranks and downsampling);
    ``smoothed_points`` those of the smoothed curves drawn over them; ``labels``
    the name each run has in the legend; ``panels`` the real tag each run was drawn from in each panel."""

    figure: object
    runs: list
    ranks: dict
    tags: list
    points: int
    drawn_points: int
    flags: list = field(default_factory=list)
    nonfinite: list = field(default_factory=list)
    smoothed_points: int = 0
    labels: dict = field(default_factory=dict)
    bands: list = field(default_factory=list)
    unbanded: list = field(default_factory=list)  # (run, tag) whose ranks were to be banded but share no step
    verdicts: list = field(default_factory=list)  # the judge's RunVerdict of each run, whose flags are drawn
    panels: list = field(default_factory=list)  # Panel: the real tag of each run in each panel, the runs with none
    passed = True  # a plot draws, it does not judge: its flags are shown, and ``msnb plot`` exits 0
    _shown_in: object = field(default=None, init=False, repr=False, compare=False)

    def as_dict(self) -> dict:
        return {
            "runs": self.runs,
            "ranks": self.ranks,
            "tags": self.tags,
            "points": self.points,
            "drawn_points": self.drawn_points,
            "flags": [f.as_dict() for f in self.flags],
            "nonfinite": self.nonfinite,
            "bands": bool(self.bands),
            "band_details": [b.as_dict() for b in self.bands],
            "unbanded": [{"run": run, "tag": tag} for run, tag in self.unbanded],
            "verdicts": [{"run": v.run, "passed": v.passed, "checks": [c.as_dict() for c in v.checks]} for v in self.verdicts],
            "panels": [p.as_dict() for p in self.panels],
            "missing": self.missing(),
        }

    def missing(self) -> list[dict]:
        """``{"panel", "run", "label"}`` for each run that has no tag of a drawn panel: listed, but with no curve there."""
        return [{"panel": p.title, "run": run, "label": self.labels.get(run, run)} for p in self.panels for run in p.missing]

    def notes(self) -> list[str]:
        """One line per panel that some runs have no tag for: ``no lr in run b (none of: lr, learning-rate, learning_rate)``."""
        out = []
        for p in self.panels:
            if p.missing:
                names = ", ".join(self.labels.get(run, run) for run in p.missing)
                spellings = ", ".join(ALIASES.get(meaning(p.title) or "", ())) or p.title
                out.append(f"no {p.title} in run{'s' if len(p.missing) > 1 else ''} {names} (none of: {spellings})")
        return out

    def format_text(self) -> str:
        lines = [self.summary_line()]
        name = self.labels.get
        for run in self.runs:
            ranks = self.ranks.get(run) or []
            lines.append(f"  run {name(run, run)}" + (f": ranks {_spans(ranks)}" if ranks else ""))
        for item in self.nonfinite[:MAX_NONFINITE_LINES]:
            lines.append(
                "  "
                + NonFiniteRange(item["run"], item["rank"], item["tag"], item["value"], item["step"], item["last_step"], item["steps"]).describe(
                    name(item["run"], item["run"])
                )
            )
        if len(self.nonfinite) > MAX_NONFINITE_LINES:
            more = len(self.nonfinite) - MAX_NONFINITE_LINES
            lines.append(f"  ... {count(more, 'more range')} of non-finite values (report.nonfinite lists every one)")
        for b in self.bands:
            q0, q1 = (round(100 * q) for q in b.quantiles)
            drawn = f"; drawn as lines: rank{'s' if len(b.outliers) > 1 else ''} {', '.join(map(str, b.outliers))}" if b.outliers else ""
            n_in = len(b.ranks) - len(b.outliers)
            over = f"{n_in} of {len(b.ranks)} ranks" if n_in else f"all {len(b.ranks)} ranks (every rank flagged)"
            lines.append(f"  bands of {b.tag}, run {name(b.run, b.run)}: {over} (min-max, {q0}-{q1} %, median){drawn}")
        for run, tag in self.unbanded:
            lines.append(f"  no bands of {tag}, run {name(run, run)}: its ranks share no step (drawn as lines)")
        for f in self.flags:
            lines.append(f"  FLAG run {name(f.run, f.run)}{f' rank {f.rank}' if f.rank >= 0 else ''} ({f.tag}) from step {f.step}: {f.reason}")
        return "\n".join(lines)

    def summary_line(self) -> str:
        """``read 242 points of loss, lr; drew 242 (and a smoothed curve of 200 over them)``: read first, then drawn."""
        tags = ", ".join(self.tags) or "no tags"
        line = f"read {self.points:,} points of {tags}; drew {self.drawn_points:,}"
        if self.drawn_points < self.points:
            line += " (ranks averaged or downsampled)"
        if self.smoothed_points:
            line += f", with smoothed curves through {self.smoothed_points:,} of them"
        return line

    def short_text(self) -> str:
        """What a notebook shows under the figure: the summary line, then NaN/Inf ranges and flags when there are any."""
        if not (self.flags or self.nonfinite):
            return self.summary_line()
        return self.format_text()

    def __repr__(self) -> str:
        return self.short_text()

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        """The figure as PNG and the short text, for ``display(report)`` and front ends without images."""
        return {"image/png": base64.b64encode(figure_png(self.figure)).decode("ascii"), "text/plain": self.short_text()}

    def show(self) -> None:
        """Display the figure and the short text under it (what ``%mfmon_plot`` shows), once for this cell."""
        show_figure(self.figure)
        print(self.short_text())
        self._shown_in = current_cell()

    def _ipython_display_(self) -> None:
        # %mfmon_plot already showed it in this cell: the cell's value adds nothing (no second figure, no repr)
        if self._shown_in is not None and self._shown_in == current_cell():
            return
        self.show()


def _spans(numbers) -> str:
    """``0-1023`` for a thousand consecutive ranks, ``0-3, 5, 7-9`` otherwise: a rank list stays one short line."""
    parts, numbers = [], sorted(numbers)
    i = 0
    while i < len(numbers):
        j = i
        while j + 1 < len(numbers) and numbers[j + 1] == numbers[j] + 1:
            j += 1
        parts.append(str(numbers[i]) if j == i else f"{numbers[i]}, {numbers[j]}" if j == i + 1 else f"{numbers[i]}-{numbers[j]}")
        i = j + 1
    return ", ".join(parts)


def _few(names, keep: int = 3) -> str:
    """``a, b, c +2``: a list that fits in a panel title."""
    names = list(names)
    return ", ".join(names[:keep]) + (f" +{len(names) - keep}" if len(names) > keep else "")


def resolve_tags(available, wanted=None) -> list[str]:
    """Tags to draw: the given names (exact, or through :data:`ALIASES`), or the usual panels present."""
    available = list(available)
    have = set(available)
    if wanted:
        out = []
        for name in wanted:
            if name in have:
                out.append(name)
                continue
            group = ALIASES.get(name) or next((g for g in ALIASES.values() if name in g), ())
            match = next((t for t in group if t in have), None)
            if match is None:
                raise UsageError(f"no tag {name!r} in the data; tags present: {', '.join(sorted(have)) or 'none'}")
            out.append(match)
        return out
    out = [next(t for t in ALIASES[p] if t in have) for p in DEFAULT_PANELS if any(t in have for t in ALIASES[p])]
    return out or sorted(have)[:6]


@dataclass
class Panel:
    """One panel: its title, the real tag each run is drawn from (its own spelling of the meaning), the runs without one."""

    title: str
    tags: dict  # run -> real tag
    missing: list

    def as_dict(self) -> dict:
        return {"panel": self.title, "tags": dict(self.tags), "missing": list(self.missing)}


def resolve_panels(tags_by_run: dict, wanted=None) -> list[Panel]:
    """Panels to draw, each name resolved run by run (:func:`msnb.events.tags.resolve`): ``loss`` is ``loss/auto`` in a
    MindSpore summary and ``loss`` in a mindformers log, and both are drawn in one panel.

    Args:
        tags_by_run: run -> the set of tags it logged.
        wanted: tags or meanings (default: the usual panels any run has, else the first six tags).

    Returns:
        The panels; two names that resolve to the same tags in every run (``loss``, ``loss/auto``) make one panel.

    Raises:
        UsageError: a wanted name matches no tag of any run.
    """
    every = set().union(*tags_by_run.values()) if tags_by_run else set()
    names = list(wanted) if wanted else [m for m in DEFAULT_PANELS if any(resolve(m, have) for have in tags_by_run.values())] or sorted(every)[:6]
    panels: list[Panel] = []
    for name in names:
        found = {run: t for run, have in tags_by_run.items() if (t := resolve(name, have)) is not None}
        if not found:
            raise UsageError(f"no tag {name!r} in the data; tags present: {', '.join(sorted(every)) or 'none'}")
        if any(p.tags == found for p in panels):
            continue  # the same curves under another spelling
        spelled = set(found.values())
        title = next(iter(spelled)) if len(spelled) == 1 else (meaning(name) or name)
        panels.append(Panel(title, found, [run for run in tags_by_run if run not in found]))
    return panels


def _x_values(kind: str, steps, walls, run_start: float):
    if kind == "step":
        return steps.astype(np.float64), "step"
    if kind == "wall":
        import matplotlib.dates as mdates  # deferred: matplotlib, until a figure is drawn

        return mdates.date2num(walls.astype("datetime64[us]") if walls.dtype.kind == "M" else (walls * 1e6).astype("datetime64[us]")), "wall-clock time"
    if kind == "relative":
        rel = walls - run_start
        span = np.nanmax(rel) if rel.size else 0
        if span > 3 * 3600:
            return rel / 3600, "hours since start"
        if span > 180:
            return rel / 60, "minutes since start"
        return rel, "seconds since start"
    raise UsageError(f"x must be step, wall or relative, not {kind!r}")


def smoothing_for(tag: str, smooth, no_smooth=()) -> float:
    """The smoothing weight for *tag*: a per-tag override, else none for schedules and counters, else the default.

    Args:
        tag: the real tag drawn.
        smooth: one weight for every noisy series, or a dict of per-tag weights
            (keys are real tags or meanings such as ``"lr"``; the key ``None`` or
            ``"*"`` sets the default, 0.6 when absent).
        no_smooth: tags (or meanings) drawn raw whatever the default.

    Returns:
        The weight in [0, 1) for :func:`~msnb.plot.ema`.
    """
    default, per_tag = _default_weight(smooth), (smooth if isinstance(smooth, dict) else {})
    for key in (tag, meaning(tag)):
        if key is not None and key in per_tag:
            return float(per_tag[key])
    wanted = {tag, meaning(tag)} - {None}
    if any(name in wanted or meaning(name) in wanted for name in no_smooth or ()):
        return 0.0
    return 0.0 if is_schedule(tag) else default


def _default_weight(smooth) -> float:
    return float(smooth.get("*", smooth.get(None, 0.6))) if isinstance(smooth, dict) else float(smooth)


CROWDED_ABOVE = 4  # lines per panel above which a run has one colour and one legend entry, the legend outside the panels
LEGEND_POINTS = 9.0  # legend and note text: 10 px at the report's 80 dpi, 12.5 px at 100
PANEL_SIZE = (5.6, 3.4)  # inches per panel: two columns are 896 px wide at 80 dpi, 1120 px at 100, shown unscaled in a page 1100 px wide
MARKER_BELOW = 30  # series with fewer points get a marker on each (a single point drawn as a line is invisible)
MIN_SMOOTHED = 5  # fewer points than this have no history to smooth over: drawn raw
COMPILE_RATIO = 3.0  # a first step this many times the steady median is the graph compiling


def _compile_outlier(steps, values):
    """(step, value) of a first step-time point far above the steady state, else None."""
    finite = np.isfinite(values)
    if finite.sum() < 3:
        return None
    first = int(np.flatnonzero(finite)[0])
    rest = values[first + 1 :][np.isfinite(values[first + 1 :])]
    steady = float(np.median(rest))
    if steady > 0 and values[first] > COMPILE_RATIO * steady:
        return float(steps[first]), float(values[first])
    return None


def _step_time_text(value: float, tag: str) -> str:
    """A compile step's time as a person reads it: ``32.0 s`` or ``640 ms`` for a tag in milliseconds, ``31,970`` otherwise
    (``3.197e+04`` was the old label)."""
    if tag.lower().endswith("ms"):
        return f"{value / 1000:.1f} s" if abs(value) >= 1000 else f"{value:.0f} ms"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def _scale_to_steady(ax, steady_values, outliers, xs_of, tag: str = "") -> None:
    """Limit a step-time panel to the steady state; mark each compile step at the top edge with its value."""
    from matplotlib.transforms import blended_transform_factory  # deferred: matplotlib, until a figure is drawn

    top = float(np.percentile(steady_values, 99.5))
    bottom = float(np.min(steady_values))
    pad = (top - bottom) * 0.15 or abs(top) * 0.1 or 1.0
    ax.set_ylim(max(0.0, bottom - pad) if bottom >= 0 else bottom - pad, top + pad * 2)
    trans = blended_transform_factory(ax.transData, ax.transAxes)
    for (step, value), color in outliers:
        x = xs_of(step)
        ax.plot(
            [x],
            [0.96],
            marker="^",
            color=color,
            linestyle="none",
            transform=trans,
            clip_on=False,
            label=f"compile step {int(step)}: {_step_time_text(value, tag)} (off scale)",
        )


def _series(table: ScalarTable, tag: str, per_rank: bool, *, idx=None, run_masks=None, only=None):
    """[(run, rank, steps, walls, values)] sorted by step; ranks averaged when not *per_rank*.

    Works on index arrays into the table's columns (no table copies: a
    million-point table is sliced once per series, not once per filter).
    *idx* (the rows of *tag*) and *run_masks* (run -> row mask over the table, only these runs) spare
    recomputing them; *only*, a set of (run, rank), keeps just those ranks' lines.
    """
    idx = np.flatnonzero(table.tag == tag) if idx is None else idx
    if run_masks is None:
        runs_here = table.run[idx]
        groups = [(run, idx[runs_here == run]) for run in sorted(set(runs_here.tolist()))]
    else:  # a mask of None: *idx* holds that run's rows only
        groups = [(run, idx if mask is None else idx[mask[idx]]) for run, mask in run_masks.items()]
    out = []
    for run, ridx in groups:
        if not ridx.size:
            continue
        rank_col = table.rank[ridx]
        ranks = np.unique(rank_col)
        if only is not None:
            ranks = np.array([r for r in ranks.tolist() if (run, r) in only], dtype=np.int64)
            if not ranks.size:
                continue
        by_rank = [(int(r), ridx[rank_col == r]) for r in ranks] if per_rank or ranks.size == 1 or only is not None else [(None, ridx)]
        for rank, gidx in by_rank:
            steps, walls, values = table.step[gidx], table.wall_time[gidx], table.value[gidx]
            if rank is None:
                # mean over ranks at each step; a NaN on any rank stays visible as NaN
                uniq, inv = np.unique(steps, return_inverse=True)
                finite = np.isfinite(values)
                sums = np.bincount(inv, weights=np.where(finite, values, 0.0), minlength=uniq.size)
                counts = np.bincount(inv, weights=finite.astype(float), minlength=uniq.size)
                bad = np.bincount(inv, weights=(~finite).astype(float), minlength=uniq.size) > 0
                with np.errstate(invalid="ignore", divide="ignore"):
                    mean = sums / counts
                firstbad = np.full(uniq.size, np.nan)
                bad_idx = np.flatnonzero(~finite)
                firstbad[inv[bad_idx]] = values[bad_idx]
                mean[bad] = firstbad[bad]
                wall = np.full(uniq.size, np.nan)
                np.fmin.at(wall, inv, walls)
                steps, walls, values = uniq, wall, mean
            elif steps.size > 1 and np.any(np.diff(steps) < 0):
                order = np.argsort(steps, kind="stable")
                steps, walls, values = steps[order], walls[order], values[order]
            out.append((run, rank, steps, walls, values))
    return out


def plot_scalars(
    scalars: ScalarTable,
    *,
    tags=None,
    smooth: float = 0.6,
    x: str = "step",
    ranks: bool = False,
    log: bool = False,
    max_points: int = 2000,
    divergence_threshold: float | None = None,
    figure=None,
    title: str | None = None,
    label_for_run=None,
    no_smooth=(),
    bands: bool | None = None,
    note_missing: bool = True,
    markers=None,
    origins: dict | None = None,
) -> PlotReport:
    """Draw *scalars* into a new (or the given) figure and return what was drawn.

    Args:
        scalars: the table to draw.
        tags: tags or panel names (default: the usual panels present).
        smooth: TensorBoard's smoothing weight for noisy series, or a dict of
            per-tag weights (see :func:`smoothing_for`); schedules and counters
            (learning rate, loss scale, batch size) are drawn raw unless a
            per-tag weight says otherwise.
        x: ``step``, ``wall`` or ``relative``.
        ranks: one line per rank instead of the mean over ranks.
        log: logarithmic y axis.
        max_points: points per line after M4 downsampling.
        divergence_threshold: how far a rank's loss may depart before it is flagged (relative: 0.2 is 20 %),
            overriding the judge's ``divergence_min_gap``.
        figure: draw into this figure instead of a new one.
        title: the figure's title.
        label_for_run: run name -> legend label.
        no_smooth: tags (or meanings) drawn raw.
        bands: draw each run's ranks as cross-rank bands (min-max, 10-90 %, median) with the flagged
            ranks as lines; None (the default) does so for runs of more than
            :data:`~msnb.analysis.bands.BANDS_ABOVE` ranks, True for every run of two ranks or more.
        note_missing: name, under a panel's title, the runs that have no tag for it (the report's
            ``missing`` lists them either way); off where each run is one source of one panel (the smoke's figure).
        markers: the read's :class:`~msnb.events.MarkerTable`: the points msprobe's own rules flagged
            (``anomaly.json``) are drawn on their series (x by step only: msprobe records no time).
        origins: ``ReadResult.origins``, so the judge reads every writer's copy and table as ``msnb check`` does.

    Returns:
        A :class:`PlotReport`.
    """
    import matplotlib  # deferred: matplotlib, until a figure is drawn

    _default_weight(smooth)  # a weight that is no number fails here, before anything is drawn
    shown = _shown(scalars, tags, bands, divergence_threshold, origins or {})
    runs, masks, rank_map, panels, band_runs = shown.runs, shown.masks, shown.rank_map, shown.panels, shown.band_runs
    n = max(1, len(panels))
    # many lines: one colour per run (its ranks thin lines of that colour), one legend entry per run, outside the panels
    crowded = sum(1 if run in band_runs or not ranks else max(1, len(rank_map[run])) for run in runs) > CROWDED_ABOVE
    fig, axes = _panel_grid(figure, n)
    figure_state = _Figure(
        scalars=scalars,
        runs=runs,
        masks=masks,
        rank_map=rank_map,
        flags=shown.flags,
        judged=shown.judged,
        band_runs=band_runs,
        line_labels=_line_labels(shown.flags, band_runs, shown.nonfinite_keys),
        crowded=crowded,
        cycle=matplotlib.rcParams["axes.prop_cycle"].by_key()["color"],
        starts=_run_starts(scalars, runs, masks),
        label_for_run=label_for_run or (lambda run: run),
        per_tag_smooth=smooth,
        no_smooth=no_smooth,
        x=x,
        ranks=ranks,
        log=log,
        max_points=max_points,
        markers=markers,
        note_missing=note_missing,
    )
    for ax, panel in zip(axes, panels):
        figure_state.draw_panel(ax, panel)
    if title:
        fig.suptitle(title)
    if crowded:
        _figure_legend(fig, [ax for ax in axes[:n]], resize=figure is None, run_names=figure_state.run_names)
    nonfinite = [r.as_dict() for r in nonfinite_ranges(scalars, shown.found)]  # the real rank, also when ranks were drawn averaged; ranges, not steps
    points = sum(int(np.count_nonzero(masks[run] & (scalars.tag == t))) for run, t in shown.drawn_pairs)  # read for the drawn tags, before any averaging
    return figure_state.report(fig, list(shown.tags), points, nonfinite, shown.verdicts, panels)


@dataclass
class _Shown:
    """What a figure of scalars shows, before anything is drawn: its runs, panels and tags, and the judge's word on each run."""

    runs: list  # the run names, sorted
    masks: dict  # run -> its rows of the table
    rank_map: dict  # run -> its ranks
    panels: list  # the panels drawn, each with the real tag of each run
    tags: list  # every real tag drawn, in panel order
    flags: list  # every flag the judge raised, run by run
    judged: dict  # run -> (its loss tag, the loss curves the judge built)
    verdicts: list  # the judge's verdict of each run
    drawn_pairs: set  # (run, tag) of every series drawn
    found: list  # the non-finite values on the drawn series
    nonfinite_keys: set  # (run, rank) with a non-finite value on the run's judged tag
    band_runs: list  # the runs drawn as cross-rank bands


def _shown(scalars: ScalarTable, tags, bands: bool | None, divergence_threshold, origins: dict) -> _Shown:
    """The runs, panels and tags *tags* asks for, each run's ranks and the judge's flags, and where values are not finite."""
    runs = sorted(set(scalars.run.tolist()))
    masks = {run: scalars.run == run for run in runs}
    panels = resolve_panels({run: set(scalars.tag[masks[run]].tolist()) for run in runs}, tags)
    tags = list(dict.fromkeys(t for p in panels for t in p.tags.values()))  # every real tag drawn, panel order
    rank_map = {run: sorted(int(r) for r in np.unique(scalars.rank[masks[run]]) if r >= 0) for run in runs}
    flags, judged, verdicts = _judged(scalars, runs, divergence_threshold, origins)
    drawn_pairs = {(run, t) for p in panels for run, t in p.tags.items()}
    found = [f for f in find_nonfinite(scalars, tags) if (f.run, f.tag) in drawn_pairs]
    nonfinite_keys = {(f.run, f.rank) for f in found if f.tag == judged[f.run][0]}
    band_runs = [run for run in runs if len(rank_map[run]) >= 2 and (bands or (bands is None and len(rank_map[run]) > BANDS_ABOVE))]
    return _Shown(runs, masks, rank_map, panels, tags, flags, judged, verdicts, drawn_pairs, found, nonfinite_keys, band_runs)


def _panel_grid(figure, n: int) -> tuple:
    """``(figure, axes)``: *n* panels in one column or two, in a new figure or the one given; spare axes hidden."""
    from matplotlib.figure import Figure  # deferred: matplotlib, until a figure is drawn

    cols = 1 if n == 1 else 2
    rows = (n + cols - 1) // cols
    fig = figure or Figure(figsize=(PANEL_SIZE[0] * cols, PANEL_SIZE[1] * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes


def _judged(scalars: ScalarTable, runs: list, divergence_threshold, origins: dict) -> tuple:
    """The judge's flags, run by run (the same as msnb check's): ``(flags, {run: (loss tag, curves)}, verdicts)``."""
    rules = DEFAULT_RULES if divergence_threshold is None else replace(DEFAULT_RULES, divergence_min_gap=math.log1p(divergence_threshold))
    flags, judged, verdicts = [], {}, []
    for run in runs:
        seen: dict = {}
        verdict = judge_run(scalars, run, rules=rules, seen=seen, origins=origins.get(run))
        verdicts.append(verdict)
        flags += verdict.flags
        judged[run] = (verdict.tag, seen.get("curves"))  # the loss curves it built: the bands reuse them
    return flags, judged, verdicts


def _run_starts(scalars: ScalarTable, runs: list, masks: dict) -> dict:
    """Each run's first wall time (0 when none: log lines without a timestamp), the origin of ``x="relative"``."""
    starts = {}
    for run in runs:
        walls = scalars.wall_time[masks[run]]
        walls = walls[np.isfinite(walls)]
        starts[run] = float(walls.min()) if walls.size else 0.0
    return starts


@dataclass
class _Figure:
    """What every panel of one :func:`plot_scalars` figure shares, and what the panels add up to."""

    scalars: ScalarTable
    runs: list
    masks: dict
    rank_map: dict
    flags: list
    judged: dict  # run -> (its loss tag, the loss curves the judge built)
    band_runs: list
    line_labels: dict
    crowded: bool
    cycle: list
    starts: dict
    label_for_run: object
    per_tag_smooth: object
    no_smooth: object
    x: str
    ranks: bool
    log: bool
    max_points: int
    markers: object
    note_missing: bool
    series_keys: list = field(default_factory=list)
    run_names: dict = field(default_factory=dict)  # a label spelling its tag -> the run's name alone (see _figure_legend)
    drawn_bands: list = field(default_factory=list)
    unbanded: list = field(default_factory=list)
    drawn: int = 0
    smoothed: int = 0

    def report(self, fig, tags: list, points: int, nonfinite: list, verdicts: list, panels: list) -> PlotReport:
        """What was drawn, once every panel is."""
        return PlotReport(
            fig,
            self.runs,
            {r: self.rank_map[r] for r in self.runs},
            tags,
            points,
            self.drawn,
            self.flags,
            nonfinite,
            smoothed_points=self.smoothed,
            labels={r: self.label_for_run(r) for r in self.runs},
            bands=self.drawn_bands,
            unbanded=self.unbanded,
            verdicts=verdicts,
            panels=panels,
        )

    def draw_panel(self, ax, panel) -> None:
        """One panel: each spelling's lines and bands, msprobe's markers, the judge's flags, then the axes."""
        first_tag = next(iter(panel.tags.values()))
        weight = smoothing_for(first_tag, self.per_tag_smooth, self.no_smooth)
        drawing = _Panel(ax, first_tag, weight, self.x, self.starts, self.max_points, [], [], [])
        spelled = len(set(panel.tags.values())) > 1  # runs spell the meaning differently: each label says which tag
        banded: set = set()
        labelled: set = set()  # runs whose legend entry this panel has (crowded figures: one per run)
        xlabel = "step"
        for tag in dict.fromkeys(panel.tags.values()):
            xlabel = self._draw_tag(drawing, panel, tag, spelled, banded, labelled, xlabel)
        if self.markers is not None and self.x == "step":
            _draw_msprobe_markers(ax, self.scalars, self.markers, panel.tags)
        self._draw_flags(ax, panel, banded)
        self.drawn += drawing.drawn
        self.smoothed += drawing.smoothed
        self._finish_axes(ax, panel, drawing, spelled, xlabel)

    def _name(self, run, tag: str, spelled: bool) -> str:
        if not spelled:
            return self.label_for_run(run)
        said = f"{self.label_for_run(run)} ({tag})"
        self.run_names[said] = self.label_for_run(run)  # the figure's legend names the run alone (the title says the spellings)
        return said

    def _key_index(self, key) -> int:
        if key not in self.series_keys:
            self.series_keys.append(key)
        return self.series_keys.index(key)

    def _draw_tag(self, drawing, panel, tag: str, spelled: bool, banded: set, labelled: set, xlabel: str) -> str:
        """The runs that spell this panel *tag*: a band per banded run, lines for the others; returns the x label."""
        scalars, runs = self.scalars, self.runs
        runs_here = [run for run in runs if panel.tags.get(run) == tag]
        tag_idx = np.flatnonzero(scalars.tag == tag)
        # a run is banded in this panel when its ranks share steps of this tag; else (one rank has it, no common step) lines
        every_band = [b for run in self.band_runs if run in runs_here for b in _bands_of(scalars, tag, run, self.flags, self.judged[run])]
        panel_bands = [b for b in every_band if b.steps.size]
        self.unbanded.extend((b.run, tag) for b in every_band if not b.steps.size)
        banded |= {b.run for b in panel_bands}
        line_runs = {run: self.masks[run] for run in runs_here if run not in banded}
        for run, rank, steps, walls, values in _series(scalars, tag, self.ranks, idx=tag_idx, run_masks=line_runs):
            index = self._key_index((run, rank))
            if self.crowded:
                color = self.cycle[runs.index(run) % len(self.cycle)]
                per_rank = rank is not None and rank >= 0 and self.ranks and len(self.rank_map[run]) > 1
                name = self._name(run, tag, spelled)
                label = f"_{name} rank {rank}" if per_rank and run in labelled else name + (f" ({count(len(self.rank_map[run]), 'rank')})" if per_rank else "")
                labelled.add(run)
            else:
                color = self.cycle[index % len(self.cycle)]
                label = self._name(run, tag, spelled) if rank is None or rank < 0 or not self.ranks else f"{self._name(run, tag, spelled)} rank {rank}"
            xlabel = _draw_line(drawing, run, steps, walls, values, color, label, thin=self.crowded and self.ranks)
        for b in panel_bands:
            xlabel = self._draw_band(drawing, b, tag, tag_idx, spelled)
        return xlabel

    def _draw_band(self, drawing, b, tag: str, tag_idx, spelled: bool) -> str:
        """One run's cross-rank band, its ranks' NaN/Inf marks and its flagged ranks as lines; returns the x label."""
        scalars, ax = self.scalars, drawing.ax
        self.drawn_bands.append(b)
        run_idx = tag_idx[self.masks[b.run][tag_idx]]
        index = self._key_index((b.run, None))
        color = self.cycle[(self.runs.index(b.run) if self.crowded else index) % len(self.cycle)]
        xs, xlabel = _x_values(self.x, b.steps, _step_walls(scalars, run_idx, b.steps), self.starts[b.run])
        drawing.xs_seen.append(xs[np.isfinite(xs)])
        self.drawn += draw_bands(ax, xs, b, color, self._name(b.run, tag, spelled) if len(self.runs) > 1 else "", self.max_points)
        stray = sorted((r, s) for r, s in b.nonfinite_steps.items() if r not in b.outliers)
        if stray:
            names = ", ".join(str(r) for r, _s in stray[:5]) + (f" +{len(stray) - 5}" if len(stray) > 5 else "")
            hit = np.unique(np.concatenate([s for _r, s in stray]))
            _mark_nonfinite(
                ax,
                _x_values(self.x, hit, _step_walls(scalars, run_idx, hit), self.starts[b.run])[0],
                f"NaN/Inf (rank{'s' if len(stray) > 1 else ''} {names})",
                spacing=_spacing(xs),
            )
        wanted = {(b.run, r) for r in b.outliers}
        for i, (run, rank, steps, walls, values) in enumerate(_series(scalars, tag, True, idx=run_idx, run_masks={b.run: None}, only=wanted)):
            text = self.line_labels.get((run, rank), f"rank {rank}")
            label = f"{self._name(run, tag, spelled)} {text}" if len(self.runs) > 1 else text
            _draw_line(drawing, run, steps, walls, values, line_color(i), label if i < MAX_LABELLED else None, f"NaN/Inf (rank {rank})")
        if len(b.outliers) > MAX_LABELLED:
            ax.plot([], [], color=line_color(MAX_LABELLED), label=f"+{len(b.outliers) - MAX_LABELLED} more flagged ranks (see the report)")
        return xlabel

    def _draw_flags(self, ax, panel, banded: set) -> None:
        """A dashed red line where the judge flagged a rank (or the run) on this panel's tag."""
        scalars = self.scalars
        for f in self.flags:
            if panel.tags.get(f.run) != f.tag:
                continue
            fx = f.step
            if self.x != "step":
                w = (scalars.where(run=f.run, rank=f.rank, step=f.step) if f.rank >= 0 else scalars.where(run=f.run, tag=f.tag, step=f.step)).wall_time
                fx = _x_values(self.x, np.array([f.step]), w[:1], self.starts[f.run])[0][0] if len(w) else None
            if fx is not None:
                named = f.run not in banded  # over bands the rank's own line carries its name
                ax.axvline(
                    fx,
                    color="red",
                    linestyle="--",
                    linewidth=1,
                    alpha=1.0 if named else 0.5,
                    label=f"{f'rank {f.rank}' if f.rank >= 0 else 'run'} flagged from step {f.step} ({self.label_for_run(f.run)})" if named else None,
                )

    def _finish_axes(self, ax, panel, drawing, spelled: bool, xlabel: str) -> None:
        """Title, x axis, y scale, the empty-panel note, grid and legend."""
        from matplotlib.ticker import MaxNLocator  # deferred: matplotlib, until a figure is drawn

        if drawing.outliers and drawing.steady:
            _scale_to_steady(ax, np.concatenate(drawing.steady), drawing.outliers, lambda step: step, next(iter(panel.tags.values()), ""))
        spellings = f" ({', '.join(sorted(set(panel.tags.values())))})" if spelled and self.crowded else ""
        missing = panel.missing and self.note_missing
        ax.set_title(panel.title + spellings + (f"\n(no {panel.title} in {_few(self.label_for_run(r) for r in panel.missing)})" if missing else ""))
        ax.set_xlabel(xlabel)
        units = {unit(t) for t in panel.tags.values()}
        if len(units) == 1 and None not in units:
            ax.set_ylabel(units.pop())  # one unit for every run's spelling: a panel of two units names none
        if self.x == "wall":
            ax.xaxis_date()
        elif self.x == "step":
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers: no 0.96-1.04 axis
            seen = np.concatenate(drawing.xs_seen) if drawing.xs_seen else np.array([])
            if seen.size and np.ptp(seen) < 2:
                ax.set_xlim(float(seen.min()) - 1, float(seen.max()) + 1)
        if self.log:
            ax.set_yscale("log")
        else:
            _fit_flat(ax, drawing)
        if not drawing.ys:
            ax.text(0.5, 0.5, f"nothing to draw: no finite value of {panel.title}", transform=ax.transAxes, ha="center", va="center", fontsize=LEGEND_POINTS)
            ax.set_yticks([])
        ax.grid(True, alpha=0.3)
        if not self.crowded:
            _legend(ax)


@dataclass
class _Panel:
    """One panel being drawn: its axes and settings, and what its lines added (for the step-time scale and the report)."""

    ax: object
    tag: str
    weight: float
    x: str
    starts: dict
    max_points: int
    steady: list
    outliers: list
    xs_seen: list
    drawn: int = 0
    smoothed: int = 0
    ys: list = field(default_factory=list)  # finite values drawn (for the y range of flat series)
    points: int = 0  # finite points drawn, before downsampling


FLAT_RELATIVE = 1e-6  # values this close are one value: float32 keeps 7 digits, a rate read from two files differs in the 8th

# legend entries that repeat once per series; several of a kind become one entry
_REPEATED = (("NaN/Inf", "NaN/Inf in {n} series (red x at the top)"), ("compile step", "compile steps of {n} series (off scale)"))


def _draw_msprobe_markers(ax, scalars: ScalarTable, markers, tags_by_run: dict) -> None:
    """msprobe's flagged points (its ``anomaly.json``) on the series they flag, one legend entry a panel."""
    flagged = markers_of(markers)
    total = 0
    for run, tag in tags_by_run.items():
        mine = flagged.take((flagged.run == run) & (flagged.tag == tag)) if len(flagged) else flagged
        if not len(mine):
            continue
        rows = np.flatnonzero((scalars.run == run) & (scalars.tag == tag))
        for rank in np.unique(mine.rank).tolist():
            here = rows[scalars.rank[rows] == rank]
            at = np.isin(scalars.step[here], mine.step[mine.rank == rank])
            ax.plot(scalars.step[here][at], scalars.value[here][at], "v", color="darkorange", markersize=6, linestyle="none",
                    label=None if total else "flagged by msprobe's rules")  # fmt: skip
            total += int(at.sum())


def _legend(ax) -> None:
    """A legend that names each line once: per-series NaN and compile-step markers are merged when there are several."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return
    kept, merged = [], {}
    for h, text in zip(handles, labels):
        kind = next((k for k, _ in _REPEATED if text.startswith(k)), None)
        if kind is None:
            kept.append((h, text))
        else:
            merged.setdefault(kind, []).append((h, text))
    for kind, wording in _REPEATED:
        items = merged.get(kind, [])
        if len(items) == 1:
            kept.append(items[0])
        elif items:
            kept.append((items[0][0], wording.format(n=len(items))))
    ax.legend([h for h, _ in kept], [t for _, t in kept], fontsize=LEGEND_POINTS)


def _figure_legend(fig, axes, *, resize: bool, run_names: dict | None = None) -> None:
    """One legend for the whole figure, above the panels (never over the data): each run once, each flag or mark once.

    Args:
        fig: the figure.
        axes: its panels.
        resize: make the figure taller by the legend's rows (a figure msnb created; a caller's figure keeps its size).
        run_names: a label that spells its tag ("healthy (lm-loss)") -> the run's name: one entry a run, not one a
            spelling ("healthy (lm-loss) (2 ranks)" beside "healthy (2 ranks)" named the same lines twice).
    """
    kept: dict = {}
    for ax in axes:
        for h, text in zip(*ax.get_legend_handles_labels()):
            said = next((k for k in run_names or {} if text == k or text.startswith(k + " ")), None)
            if said is not None:
                text = run_names[said] + text[len(said) :]
            kind = next((k for k, _ in _REPEATED if text.startswith(k)), None)
            if kind == "NaN/Inf":
                text = "NaN/Inf (red x; shaded if consecutive)"
            kept.setdefault(text, h)
    if not kept:
        return
    # columns that fit the figure's width: a text is about 0.6 em a character, plus the handle and the gap
    entry_inches = max(len(t) for t in kept) * 0.6 * LEGEND_POINTS / 72 + 0.7
    ncols = max(1, min(len(kept), 3, int(fig.get_size_inches()[0] // entry_inches)))
    if resize:
        w, h = fig.get_size_inches()
        fig.set_size_inches(w, h + 0.24 * math.ceil(len(kept) / ncols) + 0.1)
    legend = fig.legend(list(kept.values()), list(kept), loc="outside upper center", ncols=ncols, fontsize=LEGEND_POINTS, frameon=False)
    for line in legend.get_lines():  # a run's entry stands for thin rank lines: drawn bold enough to see its colour
        line.set_linewidth(max(line.get_linewidth(), 2.0))


def _fit_flat(ax, p: _Panel) -> None:
    """A y range that shows a flat series as flat: a constant (lr 1e-4 at every step) gets +-50 % of its value instead of
    matplotlib's +-1e-8 window and one tick that reads the value (``0.005``, never ``1e-10+4.9999999e-3``: the same
    rate written once as float32 and once as float64 differs in the 9th digit), a few points that differ by under 2 %
    (two step times, 66.4 and 66.5 ms) get +-5 %.  The panel says what it shows: ``constant 0.0001`` or ``1 point: ...``.
    A schedule (lr, loss scale) never gets an offset: ``+1e-3`` above its ticks reads as a second rate."""
    if not p.ys:
        return
    lo, hi = min(a for a, _ in p.ys), max(b for _, b in p.ys)
    center, scale = (lo + hi) / 2, max(abs(lo), abs(hi))
    if is_schedule(p.tag):
        ax.ticklabel_format(axis="y", useOffset=False)
    if hi - lo <= FLAT_RELATIVE * scale or scale == 0:
        half = abs(center) * 0.5 or 1.0
        text = f"1 point: {center:.4g}" if p.points == 1 else f"constant: {center:.4g} at all {p.points:,} points"
        ax.set_ylim(center - half, center + half)
        ax.set_yticks([center], [f"{center:.4g}"])
    elif p.points < MARKER_BELOW and hi - lo < 0.02 * scale and not p.outliers:
        half, text = 0.05 * abs(center), f"{p.points} points within {100 * (hi - lo) / scale:.2g} % of each other"
        ax.set_ylim(center - half, center + half)
        ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 4), useOffset=False)
    else:
        return
    ax.text(0.01, 0.03, text, transform=ax.transAxes, fontsize=LEGEND_POINTS, color="0.3", ha="left", va="bottom")


def _draw_line(p: _Panel, run, steps, walls, values, color, label, nonfinite_label=None, thin: bool = False) -> str:
    """One series: raw faint and smoothed solid (or raw alone), NaN/Inf marked; returns the x axis label."""
    ax = p.ax
    xs, xlabel = _x_values(p.x, steps, walls, p.starts[run])
    p.xs_seen.append(xs[np.isfinite(xs)])
    finite = np.isfinite(values) & np.isfinite(xs)
    step_time = meaning(p.tag) == "step_time"
    outlier = _compile_outlier(steps[finite], values[finite]) if step_time and p.x == "step" else None
    if outlier is not None:
        finite &= steps != outlier[0]  # drawn as a mark at the top edge, not as a spike that squashes the rest
        p.outliers.append((outlier, color))
    if finite.any():
        fx, fy = xs[finite], values[finite]
        if step_time:
            p.steady.append(fy)
        p.ys.append((float(fy.min()), float(fy.max())))
        p.points += fx.size
        marker = "o" if fx.size < MARKER_BELOW else None
        width = 0.9 if thin else 1.6
        if p.weight > 0 and fx.size >= MIN_SMOOTHED:
            rx, ry = m4(fx, fy, p.max_points)
            ax.plot(rx, ry, color=color, alpha=0.12 if thin else 0.25, linewidth=0.8, marker=marker, markersize=3)
            sx, sy = m4(fx, ema(fy, p.weight), p.max_points)
            ax.plot(sx, sy, color=color, linewidth=width, label=label)
            p.drawn += rx.size
            p.smoothed += sx.size
        else:
            rx, ry = m4(fx, fy, p.max_points)
            ax.plot(rx, ry, color=color, linewidth=0.9 if thin else 1.2, label=label, marker=marker, markersize=4)
            p.drawn += rx.size
    bad = ~np.isfinite(values)
    if bad.any():
        _mark_nonfinite(ax, xs[bad], nonfinite_label or f"NaN/Inf ({str(label).lstrip('_')})", spacing=_spacing(xs))
    return xlabel


def _line_labels(flags, band_runs, nonfinite_keys) -> dict:
    """(run, rank) -> the short legend text of a flagged rank drawn as a line over bands."""
    out: dict = {}
    for f in flags:
        key = (f.run, f.rank)
        if f.run in band_runs and f.rank >= 0 and key not in out:
            out[key] = f"rank {f.rank} ({'NaN/Inf' if key in nonfinite_keys else 'departs'} from step {f.step})"
    return out


def _spacing(xs) -> float:
    """The usual distance between neighbouring points of a series (its logging interval on the x axis)."""
    d = np.diff(np.unique(xs[np.isfinite(xs)]))
    return float(np.median(d)) if d.size else 1.0


def _mark_nonfinite(ax, xs, label: str, spacing: float = 1.0) -> None:
    """Where values were NaN/Inf (they have no height to draw at): a red cross at the top edge, and a light red span over
    each stretch of consecutive NaN/Inf points, so a hundred of them read as one stretch, not as a smeared red bar.

    The crosses' line holds every NaN/Inf x (its data); only each stretch's first is drawn (``markevery``).
    """
    from matplotlib.transforms import blended_transform_factory  # deferred: matplotlib, until a figure is drawn

    xs = np.unique(np.asarray(xs, dtype=np.float64)[np.isfinite(xs)])
    if not xs.size:
        return
    breaks = np.flatnonzero(np.diff(xs) > 1.5 * spacing) + 1
    first, last = np.r_[0, breaks], np.r_[breaks, xs.size] - 1
    for a, b in zip(first.tolist(), last.tolist()):
        if b > a:
            ax.axvspan(xs[a], xs[b], color="red", alpha=0.1, linewidth=0)
    trans = blended_transform_factory(ax.transData, ax.transAxes)
    ax.plot(xs, np.full(xs.size, 0.97), linestyle="none", marker="x", color="red", transform=trans, label=label, clip_on=False, markevery=first.tolist())


def _bands_of(scalars, tag: str, run: str, flags, judged) -> list:
    """Bands of one run, from the loss curves the judge already built when *tag* is the run's loss (*judged*: its tag and curves)."""
    loss_tag, loss_curves = judged
    curve_list = loss_curves if tag == loss_tag and loss_curves is not None else None
    return rank_bands(scalars, tag, flags=flags, run=run, curve_list=curve_list)


def _step_walls(table: ScalarTable, idx: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """The earliest wall time any of the rows *idx* (one run's rows of one tag) logged at each of *steps* (NaN where none did)."""
    uniq, inv = np.unique(table.step[idx], return_inverse=True)
    if not uniq.size:
        return np.full(len(steps), np.nan)
    wall = np.full(uniq.size, np.nan)
    np.fmin.at(wall, inv, table.wall_time[idx])
    at = np.minimum(np.searchsorted(uniq, steps), uniq.size - 1)
    return np.where(uniq[at] == steps, wall[at], np.nan)


def plot_read(result, paths, *, tags: str | None = None, **options) -> PlotReport:
    """What ``msnb plot`` and ``%mfmon_plot`` draw: the scalars of *result* (read from *paths*), runs named by
    the shortest distinct trailing part of their paths.

    Args:
        result: the :class:`~msnb.events.ReadResult` read from *paths* (``read_runs``).
        paths: the paths given, for the runs' names.
        tags: comma-separated tags (None: the default panels).
        **options: passed to :func:`plot_scalars` (``smooth``, ``x``, ``ranks``, ``log``, ``bands``).

    Returns:
        The :class:`PlotReport`.

    Raises:
        NothingReadable: no scalars were read.
    """
    if not len(result.scalars):
        raise NothingReadable(f"no scalars under {', '.join(map(str, paths))}")
    wanted = [t.strip() for t in tags.split(",")] if tags else None
    return plot_scalars(result.scalars, tags=wanted, label_for_run=run_labeller(paths, result.runs), markers=result.markers, origins=result.origins, **options)
