"""Heatmaps that show where a run went bad: parameters x steps, ranks x steps, first anomaly marked.

Each cell is a value relative to a reference (a parameter's own median, or the
median over ranks at that step), drawn as log10 of the ratio on a diverging
scale: 0 is ordinary, +1 is ten times larger.  Non-finite cells are black,
missing cells light grey.  The array is aggregated *before* drawing (at most
``max_cols`` x ``max_rows`` cells, keeping in each bin the cell that departs
most, and any non-finite one), and drawn as one image: thousands of
parameters x tens of thousands of steps cost about as much as a small one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..analysis.health import HealthReport
from ..errors import UsageError
from ..events import ReadResult
from ..events.tags import resolve
from .render import figure_png

NONFINITE = 1e30  # stands for non-finite cells after aggregation: above the colour range, drawn black
_DIGITS = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple:
    """Sort key that puts ``layers.2`` before ``layers.12`` (model order, not text order)."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in _DIGITS.split(name) if p)


@dataclass
class Heatmap:
    """A drawn heatmap: the figure, its rows (labels) and the step at each column's start."""

    figure: object
    rows: list
    steps: np.ndarray
    cells: np.ndarray  # what was drawn: log10 ratio, NaN missing, NONFINITE non-finite

    def __repr__(self) -> str:
        return f"<Heatmap: {len(self.rows)} rows x {len(self.steps)} columns drawn>"

    def _repr_png_(self):
        return figure_png(self.figure)


def _cube(scalars, tags: list, ranks: list):
    """ranks x tags x steps array (NaN where a series has no point) from a scalar table, and the steps."""
    t_index = {t: i for i, t in enumerate(tags)}
    t_all = np.fromiter((t_index.get(t, -1) for t in scalars.tag.tolist()), dtype=np.int64, count=len(scalars))  # no np.isin on strings: slow
    r_lookup = np.full(int(max(ranks)) + 2, -1, dtype=np.int64)
    r_lookup[np.asarray(ranks, dtype=np.int64) + 1] = np.arange(len(ranks))
    rank_ok = (scalars.rank >= -1) & (scalars.rank <= int(max(ranks)))
    r_all = np.where(rank_ok, r_lookup[np.clip(scalars.rank + 1, 0, len(r_lookup) - 1)], -1)
    mask = (t_all >= 0) & (r_all >= 0)
    t_idx, r_idx, val = t_all[mask], r_all[mask], scalars.value[mask]
    steps, s_idx = np.unique(scalars.step[mask], return_inverse=True)
    cube = np.full((len(ranks), len(tags), len(steps)), np.nan, dtype=np.float32)
    present = np.zeros(cube.shape, dtype=bool)
    cube[r_idx, t_idx, s_idx] = val
    present[r_idx, t_idx, s_idx] = True
    return cube, present, steps


def _nanmedian(a: np.ndarray, axis: int) -> np.ndarray:
    """Median ignoring NaN (keepdims); an all-NaN slice gives NaN.

    ``np.nanmedian`` goes through masked arrays on small slices; here slices
    without NaN (nearly all) take one ``np.median`` and the others one each.
    """
    moved = np.moveaxis(a, axis, -1)
    out = np.full(moved.shape[:-1], np.nan, dtype=np.float64)
    ok = ~np.isnan(moved).any(axis=-1)
    if ok.any():
        out[ok] = np.median(moved[ok], axis=-1)
    for idx in zip(*np.nonzero(~ok)):
        row = moved[idx]
        row = row[~np.isnan(row)]
        if row.size:
            out[idx] = np.median(row)
    return np.expand_dims(out, axis)


def _log_ratio(values: np.ndarray, reference: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log10(np.abs(values) / np.abs(reference))
    finite_ref = np.isfinite(out)
    out = np.where(finite_ref, out, np.nan).astype(np.float32)
    out[~np.isfinite(values)] = NONFINITE
    return out


def _bin(cells: np.ndarray, axis: int, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """At most *limit* bins along *axis*; each keeps its most departing cell (non-finite beats all). Returns (cells, first index of each bin)."""
    n = cells.shape[axis]
    if n <= limit:
        return cells, np.arange(n)
    width = int(np.ceil(n / limit))
    pad = (-n) % width
    if pad:
        shape = list(cells.shape)
        shape[axis] = pad
        cells = np.concatenate([cells, np.full(shape, np.nan, dtype=cells.dtype)], axis=axis)
    moved = np.moveaxis(cells, axis, -1)
    grouped = moved.reshape(moved.shape[:-1] + (moved.shape[-1] // width, width))
    score = np.where(np.isnan(grouped), -1.0, np.abs(grouped))
    pick = score.argmax(axis=-1)
    out = np.take_along_axis(grouped, pick[..., None], axis=-1)[..., 0]
    return np.moveaxis(out, -1, axis), np.arange(0, n, width)


def _draw(cells, row_labels, steps, *, title, anomaly_cell=None, anomaly_text="", vlim=1.0, max_labels=40, ax=None):
    """One RGBA image: the diverging scale for ordinary cells, black for non-finite, grey for missing."""
    # deferred: matplotlib, until a figure is drawn
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize
    from matplotlib.figure import Figure

    cmap = colormaps["RdBu_r"]
    norm = Normalize(-vlim, vlim)
    rgba = cmap(norm(np.nan_to_num(cells, nan=0.0, posinf=vlim, neginf=-vlim)), bytes=True)
    rgba[cells >= NONFINITE] = (0, 0, 0, 255)
    rgba[np.isnan(cells)] = (217, 217, 217, 255)
    if ax is None:
        height = min(10.0, 2.4 + 0.12 * min(len(row_labels), 60))
        fig = Figure(figsize=(11, height), layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    n_rows, n_cols = cells.shape
    last = float(steps[-1]) if n_cols > 1 else float(steps[0]) + 1
    ax.imshow(rgba, aspect="auto", interpolation="nearest", extent=(float(steps[0]), last, n_rows - 0.5, -0.5))
    cbar = fig.colorbar(ScalarMappable(norm, cmap), ax=ax, extend="both", pad=0.01)
    cbar.set_label("log10(value / reference)")
    every = max(1, int(np.ceil(n_rows / max_labels)))
    ax.set_yticks(range(0, n_rows, every))
    ax.set_yticklabels([row_labels[i] for i in range(0, n_rows, every)], fontsize=8 if n_rows > 20 else 9)  # 11 px and more at 100 dpi
    ax.set_xlabel("step  (black: NaN or Inf, grey: no point)")
    ax.set_title(title, fontsize=10)
    if anomaly_cell is not None:
        row, step = anomaly_cell
        ax.plot([step], [row], marker="o", markersize=14, markerfacecolor="none", markeredgecolor="#00c000", markeredgewidth=2.5)
        ax.axvline(step, color="#00c000", linewidth=0.8, linestyle="--")
        # the label on the side of the mark with room: left of it in the right half, above it in the lower half
        right = step > (float(steps[0]) + last) / 2
        low = row > (n_rows - 1) / 2
        ax.annotate(
            anomaly_text,
            (step, row),
            xytext=(-12 if right else 12, 12 if low else -12),
            textcoords="offset points",
            ha="right" if right else "left",
            va="bottom" if low else "top",
            color="#006000",
            fontsize=9,
            backgroundcolor=(1, 1, 1, 0.85),
            annotation_clip=True,
        )
    return fig


def steps_in_words(steps, columns: int) -> str:
    """What the columns are, truthfully: ``100 logged steps (0-1,980, every 20th)``, and when the logged steps were
    binned, ``in 1,200 columns of up to 5`` (each column keeps its most departing cell).

    Args:
        steps: every logged step (before binning).
        columns: the columns drawn.
    """
    steps = np.asarray(steps)
    n = len(steps)
    if not n:
        return "no steps"
    words = f"{n:,} logged step{'s' if n != 1 else ''}"
    if n > 1:
        gaps = np.unique(np.diff(steps))
        every = f", every {int(gaps[0]):,}th" if gaps.size == 1 and gaps[0] > 1 else ""
        words += f" ({int(steps[0]):,}-{int(steps[-1]):,}{every})"
    if columns < n:
        words += f", in {columns:,} columns of up to {int(np.ceil(n / columns)):,}"
    return words


def rank_label(rank: int) -> str:
    """``rank 3``; a file that names no rank (rank -1 inside msnb) is ``no rank``."""
    return f"rank {rank}" if rank >= 0 else "no rank"


def _rank_choice(rank, ranks_available) -> list:
    if rank in (None, "max"):
        return sorted(ranks_available)
    if rank not in ranks_available:
        raise UsageError(f"rank {rank} is not in the data (ranks: {', '.join(map(str, sorted(ranks_available)))})")
    return [rank]


def parameter_heatmap_from_cube(
    cube: np.ndarray,
    steps,
    params: list,
    *,
    rank="max",
    ranks=None,
    anomaly=None,
    prefix: str = "",
    present=None,
    detrend: bool = True,
    max_cols: int = 1200,
    max_rows: int = 400,
    ax=None,
) -> Heatmap:
    """Parameters x steps from a ranks x parameters x steps array (the fast path; see :func:`parameter_heatmap`).

    Args:
        cube: float array (ranks, parameters, steps).
        steps: step of each column.
        params: name of each parameter (rows are drawn in natural order).
        rank: a rank to draw, or ``"max"`` for the largest value over ranks at each cell (NaN anywhere wins).
        ranks: rank of each first index (default 0..n-1).
        anomaly: an :class:`~msnb.analysis.health.Anomaly` to mark.
        prefix: the tag family (``local_norm/``), for the title.
        present: bool array like *cube*, False where a series has no point (drawn grey); default: all present.
        detrend: remove what every parameter does at once (warm-up, decay: the median over parameters at each
            step), so one parameter leaving the others stands out.
        max_cols: at most this many columns drawn.
        max_rows: at most this many rows drawn.
        ax: draw into this Axes instead of a new figure.

    Returns:
        A :class:`Heatmap`.
    """
    ranks = list(range(cube.shape[0])) if ranks is None else list(ranks)
    order = sorted(range(len(params)), key=lambda i: natural_key(params[i]))
    if rank in (None, "max"):
        plane = cube.max(axis=0)  # NaN propagates: a parameter non-finite on any rank shows
        here = present.any(axis=0) if present is not None else None
        which = "max over ranks"
    else:
        plane = cube[ranks.index(rank)]
        here = present[ranks.index(rank)] if present is not None else None
        which = rank_label(rank)
    plane = plane[order]
    reference = _nanmedian(np.where(np.isfinite(plane), plane, np.nan), 1) if plane.size else plane
    cells = _log_ratio(plane, reference)
    if here is not None:
        cells[~here[order]] = np.nan
    if detrend and cells.shape[0] > 2:
        ordinary = np.where(cells >= NONFINITE, np.nan, cells)
        trend = np.nan_to_num(_nanmedian(ordinary, 0))
        cells = np.where(cells >= NONFINITE, cells, cells - trend)
    labels = [params[i] for i in order]
    cells, col_at = _bin(cells, 1, max_cols)
    cells, row_at = _bin(cells, 0, max_rows)
    steps = np.asarray(steps)
    row_labels = [labels[i] for i in row_at]
    mark = None
    text = ""
    shown = rank in (None, "max") or (anomaly is not None and anomaly.rank == rank)
    if shown and anomaly is not None and anomaly.tag.startswith(prefix) and anomaly.tag[len(prefix) :] in labels:
        row = labels.index(anomaly.tag[len(prefix) :])
        mark = (int(np.searchsorted(row_at, row, side="right") - 1), anomaly.step)
        where = f", rank {anomaly.rank}" if anomaly.rank >= 0 else ""
        text = f"first anomaly: {anomaly.tag[len(prefix) :]}{where}, step {anomaly.step:,}"
    against = "its own median, common trend removed" if detrend else "its own median"
    rows = f"{len(labels):,} parameters" + (f" in {cells.shape[0]:,} rows" if cells.shape[0] < len(labels) else "")
    title = f"{prefix}* ({which}): each parameter relative to {against}\n{rows} x {steps_in_words(steps, cells.shape[1])}"
    fig = _draw(cells, row_labels, steps[col_at], title=title, anomaly_cell=mark, anomaly_text=text, ax=ax)
    return Heatmap(fig, row_labels, steps[col_at], cells)


def parameter_heatmap(
    scalars, *, prefix: str = "local_norm/", rank="max", run=None, anomaly=None, detrend: bool = True, max_cols: int = 1200, max_rows: int = 400, ax=None
) -> Heatmap:
    """Parameters x steps: each parameter's value relative to its own median, rows in model (natural) order.

    Args:
        scalars: a :class:`~msnb.events.ScalarTable` (or a ReadResult).
        prefix: the per-parameter family to draw (``local_norm/``, ``adam_m_norm/``, ...).
        rank: a rank to draw, or ``"max"`` for the largest value over ranks.
        run: the run to draw (default: the only one, else the first).
        anomaly: an :class:`~msnb.analysis.health.Anomaly` (or a HealthReport) to mark.
        detrend: remove the common trend over parameters (see :func:`parameter_heatmap_from_cube`).
        max_cols: at most this many columns drawn (steps binned, keeping the most departing cell).
        max_rows: at most this many rows drawn.
        ax: draw into this Axes instead of a new figure.

    Returns:
        A :class:`Heatmap`.

    Raises:
        UsageError: no tag starts with *prefix*, or *rank* is not in the data.
    """
    scalars, anomaly = _inputs(scalars, anomaly)
    scalars = _one_run(scalars, run)
    tags = sorted({t for t in set(scalars.tag.tolist()) if t.startswith(prefix)})
    if not tags:
        raise UsageError(f"no tag starts with {prefix!r}")
    wanted = set(tags)
    all_ranks = sorted({r for r, t in zip(scalars.rank.tolist(), scalars.tag.tolist()) if t in wanted})
    ranks = _rank_choice(rank, all_ranks)
    cube, present, steps = _cube(scalars, tags, ranks)
    params = [t[len(prefix) :] for t in tags]
    which = "max" if rank in (None, "max") else rank
    return parameter_heatmap_from_cube(
        cube,
        steps,
        params,
        rank=which,
        ranks=ranks,
        anomaly=anomaly,
        prefix=prefix,
        present=present,
        detrend=detrend,
        max_cols=max_cols,
        max_rows=max_rows,
        ax=ax,
    )


def rank_heatmap(scalars, tag: str = "loss", *, relative: str = "ranks", run=None, anomaly=None, max_cols: int = 1200, ax=None) -> Heatmap:
    """Ranks x steps for one quantity, relative to the median over ranks at each step, or to each rank's own median.

    ``relative="ranks"`` shows a rank that leaves the others as its own
    coloured row; a value every rank shares (grad-norm after the all-reduce)
    needs ``relative="series"`` to show its growth.

    Args:
        scalars: a :class:`~msnb.events.ScalarTable` (or a ReadResult).
        tag: the quantity (a real tag or a meaning such as ``loss``).
        relative: ``"ranks"`` (median over ranks at each step) or ``"series"`` (each rank's own median).
        run: the run to draw (default: the only one, else the first).
        anomaly: an :class:`~msnb.analysis.health.Anomaly` (or a HealthReport) to mark when it is on this tag.
        max_cols: at most this many columns drawn.
        ax: draw into this Axes instead of a new figure.

    Returns:
        A :class:`Heatmap`.

    Raises:
        UsageError: the tag is not in the data.
    """
    scalars, anomaly = _inputs(scalars, anomaly)
    scalars = _one_run(scalars, run)
    real = resolve(tag, set(scalars.tag.tolist()))
    if real is None:
        raise UsageError(f"no tag {tag!r} in the data")
    ranks = sorted(set(scalars.rank[scalars.tag == real].tolist()))
    cube, present, steps = _cube(scalars, [real], ranks)
    plane = cube[:, 0, :]
    if relative not in ("ranks", "series"):
        raise UsageError(f"relative must be 'ranks' or 'series' (got {relative!r})")
    finite = np.where(np.isfinite(plane), plane, np.nan)
    reference = _nanmedian(finite, 0 if relative == "ranks" else 1)
    cells = _log_ratio(plane, reference)
    cells[~present[:, 0, :]] = np.nan
    cells, col_at = _bin(cells, 1, max_cols)
    labels = [rank_label(r) for r in ranks]
    mark, text = None, ""
    if anomaly is not None and anomaly.tag == real and anomaly.rank in ranks:
        mark = (ranks.index(anomaly.rank), anomaly.step)
        text = f"first anomaly: step {anomaly.step:,}"
    against = "the median over ranks at each step" if relative == "ranks" else "each rank's own median"
    title = f"{real} relative to {against}\n{len(ranks)} rank{'s' if len(ranks) != 1 else ''} x {steps_in_words(steps, cells.shape[1])}"
    fig = _draw(cells, labels, steps[col_at], title=title, anomaly_cell=mark, anomaly_text=text, ax=ax)
    return Heatmap(fig, labels, steps[col_at], cells)


def _inputs(scalars, anomaly):
    if isinstance(scalars, ReadResult):
        scalars = scalars.scalars  # add_scalars' head folders are already folded into their run by the reader
    if isinstance(anomaly, HealthReport):
        anomaly = anomaly.first
    return scalars, anomaly


def _one_run(scalars, run):
    runs = sorted(set(scalars.run.tolist()))
    if run is None:
        return scalars if len(runs) <= 1 else scalars.where(run=runs[0])
    if run not in runs:
        raise UsageError(f"no run {run!r} (runs: {', '.join(runs)})")
    return scalars.where(run=run)
