"""Drawing the board's state: a :class:`View` (what the controls say) over :class:`~msnb.dashboard.model.BoardData`.

One panel per chosen tag, one colour per run (the swatch's), raw values
faint under TensorBoard's debiased moving average (schedules such as the
learning rate drawn raw, as the plots do), x as step or time, the judge's
flags on the loss panel, NaN/Inf as red crosses at the top edge.  Ranks are
averaged, drawn one line each, or drawn as cross-rank bands with the flagged
ranks as lines.  Everything is cut to the step range before it is smoothed
for drawing and downsampled with M4, so a zoom shows detail and a million
points cost a few thousand drawn.

Every line carries a ``gid`` naming what it is: ``raw|RUN|RANK|TAG`` (RANK is
``mean`` for the mean over ranks) and ``smooth|...`` for a series, with
``focus|`` before RUN for a chosen flag's rank and ``median`` as RANK for
the bands' median; ``band|RUN|TAG`` for the bands' fills; ``flag|RUN|RANK|STEP`` and ``nonfinite|...``
for the judge's marks.  Tests and power users find a run's lines by it,
without relying on colours or legend order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ..analysis.bands import rank_bands
from ..analysis.smoothing import ema
from ..events.tags import meaning
from ..plot.bands import draw_bands
from ..plot.downsample import m4
from ..plot.render import MAX_TEXT_CHARS
from ..plot.scalars import LEGEND_POINTS, MIN_SMOOTHED, smoothing_for
from .model import BoardData, Series

RANK_MODES = ("mean", "all", "bands")
X_KINDS = ("step", "relative", "wall")
OUTLIER_PERCENTILES = (2.0, 98.0)  # "ignore outliers": the y range holds these percentiles of what is drawn
MAX_POINTS = 1500  # M4 buckets per drawn line: about the figure's width in pixels
MAX_RANK_LINES = 64  # ranks of one run drawn as lines in "all" mode, at most
MAX_PANELS = 24  # panels drawn at once: 300 took 15 s to draw, 10,000 ran out of memory; the rest are named as left out
TICKS = 6  # ticks per axis at most: each is a line and a text to build and draw at every redraw
FLAG_LABEL = "flagged step (dashed)"  # the legend's entry for a flag's dashed line
MAX_LEGEND = 12  # legend entries besides the runs' names at most (bands, medians, flagged ranks, NaN of the runs shown)
LEFT_IN = 0.8  # inches left of a left-column panel: its y labels ("0.0001", "1e-05") drawn whole
TOP_LEGEND_IN = 0.3  # inches above the panels for the runs' legend
MAX_RUN_LEGEND = 12  # runs named in the figure's legend at most (the run list names them all)
MIN_POINTS = 150  # ... when a panel holds many lines (they overlap: each needs less detail), down to this
LINES_AT_FULL = 6  # lines a panel draws at full detail; past that the buckets shrink in proportion


@dataclass(frozen=True)
class View:
    """What the controls say; :func:`render` draws it.

    Attributes:
        runs: the checked runs (keys of :attr:`BoardData.runs`).
        tags: panel names (meanings such as ``loss``, or real tags), one panel each.
        smoothing: TensorBoard's smoothing weight in [0, 1).
        x: ``step``, ``relative`` or ``wall``.
        log: logarithmic y.
        ranks: ``mean`` (over ranks), ``all`` (a line per rank) or ``bands`` (spread over ranks, flagged ranks as lines).
        steps: the step range drawn (inclusive), or None for all.
        ignore_outliers: fit y to the central percentiles instead of the extremes.
        focus: ``(run, rank, step)`` of a chosen flag: that rank drawn out and the step marked.
    """

    runs: tuple = ()
    tags: tuple = ()
    smoothing: float = 0.6
    x: str = "step"
    log: bool = False
    ranks: str = "mean"
    steps: tuple | None = None
    ignore_outliers: bool = False
    focus: tuple | None = None

    def __str__(self) -> str:
        """The view in words, one setting after another (what ``print(board.view())`` shows)."""
        ranks = {"mean": "the mean over ranks", "all": "one line per rank", "bands": "bands over ranks"}.get(self.ranks, self.ranks)
        parts = [
            f"runs {', '.join(map(str, self.runs)) or 'none'}",
            f"tags {', '.join(map(str, self.tags)) or 'none'}",
            f"smoothing {self.smoothing:.2f}",
            f"x axis {self.x}",
            f"{'log' if self.log else 'linear'} y",
            f"ranks as {ranks}",
            "all steps" if self.steps is None else f"steps {self.steps[0]}-{self.steps[1]}",
        ]
        if self.ignore_outliers:
            parts.append("outliers ignored")
        if self.focus is not None:
            run, rank, step = self.focus
            parts.append(f"zoomed on {run}{'' if rank is None or rank < 0 else f' rank {rank}'} at step {step}")
        return "; ".join(parts)

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(str(self))  # a notebook shows the words, not the dataclass's one long line


def _x_of(x: str, steps, walls, start: float):
    """x values and the axis label (times in seconds, minutes or hours since the run began, or dates)."""
    if x == "step":
        return steps.astype(np.float64), "step"
    if x == "wall":
        import matplotlib.dates as mdates  # deferred: matplotlib, until the first draw

        ok = np.isfinite(walls)
        out = np.full(walls.size, np.nan)
        out[ok] = mdates.date2num((walls[ok] * 1e6).astype("datetime64[us]"))
        return out, "wall-clock time"
    rel = walls - start
    span = float(np.nanmax(rel)) if rel.size and np.isfinite(rel).any() else 0.0
    if span > 3 * 3600:
        return rel / 3600, "hours since start"
    if span > 180:
        return rel / 60, "minutes since start"
    return rel, "seconds since start"


def _in_range(steps, view: View) -> np.ndarray | slice:
    if view.steps is None:
        return slice(None)
    lo, hi = view.steps
    return slice(int(np.searchsorted(steps, lo, "left")), int(np.searchsorted(steps, hi, "right")))


class _Panel:
    """One panel being drawn, with the finite y values it drew (for the outlier-proof y range)."""

    def __init__(self, ax, name: str, view: View):
        self.ax = ax
        self.name = name
        self.view = view
        self.ys: list = []
        self.xlabel = "step"
        self.drawn = 0
        self.buckets = MAX_POINTS

    def line(
        self, run, series, color: str, label: str | None, *, gid: str, width: float = 1.6, faint: bool = True, zorder: float = 2, run_name: str | None = None
    ) -> None:
        """Raw faint and smoothed solid (or raw alone), NaN/Inf marked at the top edge (named after *run_name*)."""
        cut = _in_range(series.steps, self.view)
        steps, walls, values = series.steps[cut], series.walls[cut], series.values[cut]
        xs, self.xlabel = _x_of(self.view.x, steps, walls, run.start)
        finite = np.isfinite(values) & np.isfinite(xs)
        weight = smoothing_for(series.tag, self.view.smoothing)
        fx, fy = xs[finite], values[finite]
        if fx.size:
            marker = "o" if fx.size < 30 else None
            rx, ry = m4(fx, fy, self.buckets)
            self.ys.append(ry)
            self.drawn += rx.size
            if weight > 0 and fx.size >= MIN_SMOOTHED:
                if faint:
                    (raw,) = self.ax.plot(rx, ry, color=color, alpha=0.25, linewidth=0.8, marker=marker, markersize=3, zorder=zorder)
                    raw.set_gid(f"raw|{gid}")
                smooth = self._smoothed(series, weight, cut, finite)
                sx, sy = m4(fx, smooth, self.buckets)
                (line,) = self.ax.plot(sx, sy, color=color, linewidth=width, label=label, zorder=zorder + 0.5)
                line.set_gid(f"smooth|{gid}")
                self.drawn += sx.size
            else:
                (line,) = self.ax.plot(rx, ry, color=color, linewidth=width * 0.75, label=label, marker=marker, markersize=4, zorder=zorder)
                line.set_gid(f"raw|{gid}")
        bad = series.bad[cut]
        if bad.any():
            starts = bad & ~np.r_[False, bad[:-1]]  # one cross where each stretch of NaN/Inf begins, not a wall of them
            first = int(steps[starts][0])
            # named by run (a rank's own line and the run's mean show the same NaN: one legend entry, not two)
            self.nonfinite(xs[starts], f"NaN/Inf from step {first} ({run_name or label or gid.split('|')[0]})", gid)

    def _smoothed(self, series, weight: float, cut, finite) -> np.ndarray:
        """The moving average over the whole series (a zoom shows part of the curve, not a new one), at the points drawn.

        Kept per weight on the series, so moving the slider back, or changing the range, x or scale, costs nothing.
        """
        full = series.smoothed.get(weight)
        if full is None:
            ok = np.isfinite(series.values)
            full = np.full(series.values.size, np.nan)
            full[ok] = ema(series.values[ok], weight)
            if len(series.smoothed) >= 4:
                series.smoothed.pop(next(iter(series.smoothed)))
            series.smoothed[weight] = full
        return full[cut][finite]

    def nonfinite(self, xs, label: str, gid: str) -> None:
        from matplotlib.transforms import blended_transform_factory  # deferred: matplotlib, until the first draw

        trans = blended_transform_factory(self.ax.transData, self.ax.transAxes)
        (marks,) = self.ax.plot(xs, np.full(len(xs), 0.97), linestyle="none", marker="x", color="red", transform=trans, label=label, clip_on=False)
        marks.set_gid(f"nonfinite|{gid}")


def render(data: BoardData, view: View, figure=None):
    """Draw *view* of *data* into a new (or the given, cleared) matplotlib Figure.

    Args:
        data: the runs in memory.
        view: what to draw.
        figure: a Figure to draw into (cleared first); None makes one.

    Returns:
        The Figure.
    """
    # deferred: matplotlib, until the first draw
    from matplotlib.figure import Figure

    names = list(view.tags) or data.default_tags()
    left_out = max(0, len(names) - MAX_PANELS)  # 10,000 tags chosen at once ended in std::bad_alloc after 155 s
    names = names[:MAX_PANELS]
    n = max(1, len(names))
    cols = 1 if n == 1 else 2
    rows = (n + cols - 1) // cols
    size = (6.0 * cols, 3.1 * rows)
    if figure is None:
        figure = Figure(figsize=size)
    else:
        figure.clear()
        figure.set_size_inches(*size)
    # fixed margins: a constrained layout would cost more than the drawing itself at every redraw; the left one holds
    # a log axis's labels ("0.0001"), the top one the runs' legend (one row above the panels, where it covers no curve)
    grid = figure.add_gridspec(
        rows, cols, left=LEFT_IN / size[0], right=1 - 0.35 / size[0], bottom=0.5 / size[1], top=1 - (0.35 + TOP_LEGEND_IN) / size[1], wspace=0.3, hspace=0.55
    )
    axes = [figure.add_subplot(grid[i // cols, i % cols]) for i in range(n)]  # no hidden axes to build for an odd panel
    if left_out:
        figure.text(
            0.01, 0.01, f"{left_out:,} more chosen tags not drawn: at most {MAX_PANELS} panels at once", color="grey", fontsize="small", parse_math=False
        )
    runs = [key for key in data.order if key in view.runs and key in data.runs]
    if not names or not runs:
        axes[0].text(0.5, 0.5, "no run checked" if not runs else "no tag chosen", ha="center", va="center", transform=axes[0].transAxes, parse_math=False)
        axes[0].set_axis_off()
        return figure
    run_names = [data.label(k) for k in runs]
    run_legend: dict = {}
    said: dict = {}  # what the panels' lines say beyond the runs' names (bands, medians, flagged ranks, NaN), once each
    for ax, name in zip(axes, names):
        panel = _Panel(ax, name, view)
        lines = sum(len(data.runs[k].ranks_of(t)) if view.ranks == "all" else 1 for k in runs if (t := data.runs[k].real_tag(name)))
        panel.buckets = int(np.clip(LINES_AT_FULL * MAX_POINTS / max(lines, 1), MIN_POINTS, MAX_POINTS))  # 192 lines of 6,000 points took a second
        shown = []
        for key in runs:
            run = data.runs[key]
            tag = run.real_tag(name)
            if tag is None:
                continue
            shown.append(tag)
            _draw_run(panel, data, run, tag, view)
        _dress_axes(ax, panel, name, shown, view)
        _split_legend(ax, run_names, run_legend, said)
    _figure_legend(figure, grid, size, run_names, run_legend, said)
    return figure


def _figure_legend(figure, grid, size, run_names: list, run_legend: dict, said: dict) -> None:
    """One legend above the panels: the runs, then what the panels' lines say (bands, medians, flagged ranks, NaN).

    Inside a panel the legend covered the curves it explained (a drifting rank rises at the right, under the upper
    right corner); above the panels it covers nothing, and each entry is said once for every panel.  The figure grows
    by the legend's rows.
    """
    shown = [t for t in run_names if t in run_legend][:MAX_RUN_LEGEND]
    # what needs the user's eye first (the chosen flag's rank, NaN, flagged ranks), then the bands and medians
    urgent = sorted(
        said.items(), key=lambda item: not ("(chosen flag)" in item[0] or "(flagged)" in item[0] or item[0] == FLAG_LABEL or item[0].startswith("NaN/Inf"))
    )
    entries = [(run_legend[t], t) for t in shown] + [(h, t) for t, h in urgent[:MAX_LEGEND]]
    if not entries:
        return
    longest = max(len(t) for _, t in entries)
    ncols = max(1, min(len(entries), 6 if longest <= 16 else int(size[0] // (0.075 * longest + 0.5))))
    rows = -(-len(entries) // ncols)
    legend_in = max(TOP_LEGEND_IN, 0.22 * rows + 0.08)
    height = size[1] + legend_in - TOP_LEGEND_IN
    figure.set_size_inches(size[0], height)
    grid.update(bottom=0.5 / height, top=1 - (0.35 + legend_in) / height)
    for ax in figure.axes:  # the grid's new margins reach axes already made only when asked
        ax.set_position(ax.get_subplotspec().get_position(figure))
    legend = figure.legend(
        [h for h, _ in entries],
        [_plain(t) for _, t in entries],
        loc="upper center",
        bbox_to_anchor=(0.5, 1.0),
        ncols=ncols,
        fontsize=LEGEND_POINTS,  # 9 pt: "small" (8.3 pt) read as 7 px once the figure shrank to the cell
        frameon=False,
        handlelength=1.5,
        columnspacing=1.2,
    )
    for text in legend.get_texts():
        text.set_parse_math(False)


def _dress_axes(ax, panel, name: str, shown: list, view: View) -> None:
    """A panel's title (with the spellings its runs use), axes, scales, y range and its note when no run has the tag."""
    from matplotlib.ticker import MaxNLocator  # deferred: matplotlib, until the first draw

    ax.set_title(_plain(name if set(shown) <= {name} else f"{name} ({', '.join(sorted(set(shown)))})"), parse_math=False)
    ax.set_xlabel(panel.xlabel)
    if view.log:
        ax.set_yscale("log")
        _plain_log_labels(ax)
    if view.x == "wall":
        _clock_ticks(ax)
    elif view.x == "step":
        ax.xaxis.set_major_locator(MaxNLocator(nbins=TICKS, integer=True))
    if not view.log:
        ax.yaxis.set_major_locator(MaxNLocator(nbins=TICKS))
    if view.x == "step":
        if view.steps is not None:
            lo, hi = view.steps
            ax.set_xlim(lo - 0.5, hi + 0.5) if hi - lo < 2 else ax.set_xlim(lo, hi)
    if view.ignore_outliers and panel.ys:
        _fit_y(ax, np.concatenate(panel.ys), view.log)
    if not shown:
        ax.text(0.5, 0.5, _plain(f"no {name} in the checked runs"), ha="center", va="center", transform=ax.transAxes, color="grey", parse_math=False)
    ax.grid(True, alpha=0.3)


def _split_legend(ax, run_names: list, run_legend: dict, said: dict) -> None:
    """A panel's entries to the figure's legend: the runs' names to *run_legend*, the rest to *said*, each text once."""
    for h, t in zip(*ax.get_legend_handles_labels()):
        (run_legend if t in run_names else said).setdefault(t, h)


def _clock_ticks(ax) -> None:
    """Wall-clock ticks a person reads at a glance, as fine as the ticks' spacing needs: ``10:41``, ``10:41:05``, or for
    a span under a few seconds the seconds past a minute the axis label names (``5.25`` ... ``5.40`` past ``10:41``), the
    day once in the axis label; not ``39:58.800000`` at every tick (matplotlib's default, whose labels ran into each other)
    nor ``12.6 ... 12.9`` with the hour in an offset half cut at the figure's edge."""
    import matplotlib.dates as mdates  # deferred: matplotlib, until the first draw
    from matplotlib.ticker import FuncFormatter  # deferred: matplotlib, until the first draw

    locator = mdates.AutoDateLocator(minticks=3, maxticks=TICKS)
    ax.xaxis.set_major_locator(locator)
    lo, hi = ax.get_xlim()
    ticks = locator.tick_values(mdates.num2date(lo), mdates.num2date(hi))
    spacing = float(np.min(np.diff(ticks))) * 86400 if len(ticks) > 1 else (hi - lo) * 86400
    start = mdates.num2date(lo)
    day = start.strftime("%Y-%m-%d")
    end = mdates.num2date(hi).strftime("%Y-%m-%d")
    days = day if end == day else f"{day} to {end}"
    if spacing >= 1:
        pattern = "%H:%M" if spacing >= 60 else "%H:%M:%S"
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: mdates.num2date(x).strftime(pattern)))
        ax.set_xlabel(f"wall-clock time (UTC, {days})")
    else:  # a span of seconds: the seconds past the first tick's minute, as many decimals as the ticks' spacing needs
        digits = min(3, max(1, math.ceil(-math.log10(max(spacing, 1e-3)) - 1e-9)))
        minute = math.floor(lo * 1440) / 1440
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: f"{(x - minute) * 86400:.{digits}f}"))
        ax.set_xlabel(f"wall-clock time: seconds past {mdates.num2date(minute):%H:%M} (UTC, {days})")


def _plain_log_labels(ax) -> None:
    """A log axis labelled ``0.5``, ``2``, ``1e-05`` in plain text: matplotlib's ``3x10^0`` are wider than the margin."""
    from matplotlib.ticker import LogFormatter  # deferred: matplotlib, until the first draw

    class PlainLog(LogFormatter):  # which ticks get a label: matplotlib's choice; the label: three digits at most
        def _num_to_string(self, x, vmin, vmax):
            return f"{x:.3g}"

    ax.yaxis.set_major_formatter(PlainLog(labelOnlyBase=False))
    ax.yaxis.set_minor_formatter(PlainLog(labelOnlyBase=False, minor_thresholds=(1, 0.4)))


def _plain(text: str) -> str:
    """A name from a file as it may be drawn: cut at :data:`~msnb.plot.render.MAX_TEXT_CHARS`, lone surrogates as ``?``.

    (What :func:`~msnb.plot.render.plain_text` does to a whole figure, done here to the few texts that hold names:
    walking every artist of the figure cost more than drawing it.)
    """
    if len(text) > MAX_TEXT_CHARS:
        text = text[: MAX_TEXT_CHARS - 1] + "\u2026"
    return text.encode("utf-8", "replace").decode("utf-8")


def _draw_run(panel: _Panel, data: BoardData, run, tag: str, view: View) -> None:
    """One run's lines in one panel, as the rank mode says; the chosen flag's rank drawn out, the run's flags marked."""
    color = data.color(run.key)
    label = data.label(run.key)
    ranks = run.ranks_of(tag)
    mode = view.ranks if len([r for r in ranks if r >= 0]) > 1 else "mean"
    flags = run.verdict.flags if run.verdict else []
    if mode == "bands":
        bands = _bands(run, tag, flags)
        if bands is not None and bands.steps.size:
            _draw_bands(panel, data, run, bands, color, label)
        else:
            mode = "mean"  # ranks that share no step have no spread to draw
    if mode == "mean":
        series = run.series(tag, None)
        if series is not None:
            panel.line(run, series, color, label, gid=f"{run.key}|mean|{tag}")
    elif mode == "all":
        drawn = _rank_lines(ranks, flags)
        for i, rank in enumerate(drawn):
            series = run.series(tag, rank)
            panel.line(run, series, color, label if i == 0 else None, gid=f"{run.key}|{rank}|{tag}", width=1.0, run_name=label)
        if len(drawn) < len(ranks):
            (note,) = panel.ax.plot([], [], color=color, linewidth=1.0, label=f"{label}: {len(drawn)} of {len(ranks)} ranks drawn (bands show them all)")
            note.set_gid(f"note|{run.key}|{tag}")
    focus = view.focus
    if focus is not None and focus[0] == run.key and focus[1] in ranks and len(ranks) > 1:
        series = run.series(tag, focus[1])
        if view.x != "step" and mode != "all":
            series = _on_run_clock(run, series)  # beside the run's mean, not at the rank's own clock: one run, one place
        panel.line(
            run,
            series,
            "#d62728",
            f"{label} rank {focus[1]} (chosen flag)",
            gid=f"focus|{run.key}|{focus[1]}|{tag}",
            width=2.2,
            faint=False,
            zorder=4,
            run_name=label,
        )
    if meaning(tag) == "loss" or tag == (run.verdict.tag if run.verdict else None):
        for f in flags:
            if f.tag != tag:
                continue
            at = _flag_x(panel, run, f)
            if at is not None:
                focused = focus is not None and focus[0] == run.key and focus[2] == f.step
                line = panel.ax.axvline(at, color="red", linestyle="--", linewidth=1.4 if focused else 0.9, alpha=1.0 if focused else 0.6, label=FLAG_LABEL)
                line.set_gid(f"flag|{run.key}|{f.rank}|{f.step}")


def _on_run_clock(run, series):
    """*series* (one rank's) with the wall times of its run's mean at the same steps: on a time axis the chosen flag's
    rank then lies on its run's line, not beside it where that rank's own clock (it wrote later) put it."""
    mean = run.series(series.tag, None)
    if series is None or mean is None or not mean.steps.size:
        return series
    ok = np.isfinite(mean.walls)
    if not ok.any():
        return series
    walls = np.interp(series.steps, mean.steps[ok], mean.walls[ok].astype(np.float64))
    return replace(series, walls=walls.astype(series.walls.dtype) if series.walls.dtype.kind == "f" else walls)


def _rank_lines(ranks: list, flags) -> list:
    """The ranks drawn one line each: all of them up to :data:`MAX_RANK_LINES`, else the flagged ones and others spread evenly.

    A thousand lines draw for seconds and read as a smear; the bands are the view for that many.
    """
    if len(ranks) <= MAX_RANK_LINES:
        return ranks
    flagged = sorted({f.rank for f in flags if f.rank in ranks})[:MAX_RANK_LINES]
    others = [r for r in ranks if r not in flagged]
    room = MAX_RANK_LINES - len(flagged)
    spread = [others[int(i)] for i in np.linspace(0, len(others) - 1, room)] if room > 0 else []
    return sorted(set(flagged) | set(spread))


def _flag_x(panel: _Panel, run, flag) -> float | None:
    """Where a flag's step lies on the x axis (None outside the step range, or with no time for it)."""
    view = panel.view
    if view.steps is not None and not view.steps[0] <= flag.step <= view.steps[1]:
        return None
    if view.x == "step":
        return float(flag.step)
    # on a time axis the step's time on the line drawn: the flagged rank's when it is drawn out, else the mean's (the
    # flagged rank's own clock put the line beside the data when that rank wrote later than the others)
    focus = view.focus
    own = view.ranks == "all" and len(run.ranks_of(flag.tag)) > 1  # in "all" the chosen rank keeps its own clock
    drawn_out = own and focus is not None and focus[0] == run.key and focus[1] == flag.rank and flag.rank in run.ranks_of(flag.tag)
    series = run.series(flag.tag, flag.rank if drawn_out else None)
    if series is None or not series.steps.size:
        return None
    xs, _ = _x_of(view.x, series.steps, series.walls, run.start)
    ok = np.isfinite(xs)
    if not ok.any() or not series.steps[ok][0] <= flag.step <= series.steps[ok][-1]:
        return None
    return float(np.interp(flag.step, series.steps[ok], xs[ok]))


def _bands(run, tag: str, flags):
    """The run's cross-rank bands of *tag*, cached on the run (they depend on the data, not on the view)."""
    cache = run.cache.setdefault("bands", {})
    if tag not in cache:
        found = rank_bands(run.scalars, tag, flags=flags, run=run.key)
        cache[tag] = found[0] if found else None
    return cache[tag]


def _draw_bands(panel: _Panel, data: BoardData, run, bands, color: str, label: str) -> None:
    """The spread over ranks as filled bands, the median as a line smoothed like every other, the flagged ranks as lines."""
    view = panel.view
    median = _median_series(run, bands)
    cut = _in_range(bands.steps, view)
    steps = bands.steps[cut]
    if not steps.size:
        return
    xs, panel.xlabel = _x_of(view.x, steps, median.walls[cut], run.start)
    part = _cut_bands(bands, cut)
    before = len(panel.ax.collections)
    lines_before = len(panel.ax.lines)
    panel.drawn += draw_bands(panel.ax, xs, part, color, label, panel.buckets)
    for coll in panel.ax.collections[before:]:
        coll.set_gid(f"band|{run.key}|{bands.tag}")
    for line in panel.ax.lines[lines_before:]:
        line.remove()  # the median is drawn below as a series: faint raw, solid smoothed
    panel.line(run, median, color, f"{label}: median", gid=f"{run.key}|median|{bands.tag}", run_name=label)
    for value in (part.low, part.high):
        panel.ys.append(value[np.isfinite(value)])
    focus = view.focus
    for i, rank in enumerate(bands.outliers):
        series = run.series(bands.tag, rank)
        if focus is not None and focus[0] == run.key and focus[1] == rank:
            continue  # the chosen flag's rank is drawn out as its own line, named once
        if series is not None:
            panel.line(
                run,
                series,
                "#d62728" if i == 0 else "#9467bd",
                f"{label} rank {rank} (flagged)",
                gid=f"{run.key}|{rank}|{bands.tag}",
                width=1.2,
                run_name=label,
            )


def _median_series(run, bands):
    """The bands' median as a :class:`~msnb.dashboard.model.Series` (its wall times from the mean's), cached with the bands."""
    cache = run.cache.setdefault("medians", {})
    if bands.tag not in cache:
        walls = np.full(bands.steps.size, np.nan)
        mean = run.series(bands.tag, None)
        if mean is not None and mean.steps.size:
            at = np.minimum(np.searchsorted(mean.steps, bands.steps), mean.steps.size - 1)
            walls = np.where(mean.steps[at] == bands.steps, mean.walls[at], np.nan)
        cache[bands.tag] = Series(run.key, None, bands.tag, bands.steps, walls, bands.median, np.zeros(bands.steps.size, dtype=bool))
    return cache[bands.tag]


def _cut_bands(bands, cut):
    """The bands over the steps in range only (same object shape, arrays sliced)."""
    return replace(
        bands,
        steps=bands.steps[cut],
        low=bands.low[cut],
        q_low=bands.q_low[cut],
        median=bands.median[cut],
        q_high=bands.q_high[cut],
        high=bands.high[cut],
    )


def _fit_y(ax, ys: np.ndarray, log: bool) -> None:
    """Fit y to the central percentiles of what was drawn, with a margin (spikes run off the top, labelled by the axis)."""
    ys = ys[np.isfinite(ys)]
    if log:
        ys = ys[ys > 0]
    if ys.size < 2:
        return
    lo, hi = np.percentile(ys, OUTLIER_PERCENTILES)
    if log:
        lo, hi = np.log10(lo), np.log10(hi)
        pad = (hi - lo) * 0.1 or 0.1
        ax.set_ylim(10 ** (lo - pad), 10 ** (hi + pad))
    else:
        pad = (hi - lo) * 0.1 or abs(hi) * 0.1 or 1.0
        ax.set_ylim(lo - pad, hi + pad)
