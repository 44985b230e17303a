"""Histograms over steps (ridge lines or a heatmap) and the step-time distribution."""

from __future__ import annotations

import numpy as np

from ..errors import UsageError
from ..events.tags import ALIASES
from ..words import count


def _weights_first(tags) -> list[str]:
    """Weights before biases and the rest: what a reader looks at first."""

    def rank(tag: str) -> tuple:
        low = tag.lower()
        return (0 if "weight" in low else 2 if "bias" in low else 1, tag)

    return sorted(tags, key=rank)


def _short_name(name: str, keep: int = 44) -> str:
    """A long parameter name on two lines, broken after a ``.`` or ``/``, so panel titles do not run into each other and
    both the layer (its start) and the parameter (its end) stay readable; a name longer than two lines loses its middle."""
    if len(name) <= keep:
        return name
    if len(name) > 2 * keep:
        half = keep - 1
        name = name[:half] + "\u2026" + name[-half:]
    cut = max((i + 1 for i, ch in enumerate(name[:keep]) if ch in "./" and len(name) - (i + 1) <= keep), default=None)
    if cut is None:  # no separator where it would do: halves
        cut = len(name) // 2
    return name[:cut] + "\n" + name[cut:]


GRID_BINS = 80  # ridge lines are resampled onto this many equal bins: writers' buckets are exponential near zero
LABEL_POINTS = 9  # step labels and notes: 10 px at the report's 80 dpi


def _resampled(h, i: int, edges: np.ndarray) -> np.ndarray:
    """Histogram *i*'s counts on *edges*, each bucket's count spread evenly over its width (its CDF interpolated).

    TensorBoard's buckets grow exponentially away from zero: drawn as density, a bucket 1e-12 wide near zero makes a
    needle that flattens everything else; on one equal grid each ridge shows the distribution's shape."""
    lo, hi = float(h.min[i]), float(h.max[i])
    left, right, counts = h.left[i], h.right[i], h.counts[i]
    if not counts.size:
        return np.zeros(edges.size - 1)
    bucket_edges = np.clip(np.concatenate([left[:1], right]).astype(np.float64), lo, hi) if np.isfinite([lo, hi]).all() else np.concatenate([left[:1], right])
    cdf = np.concatenate([[0.0], np.cumsum(counts, dtype=np.float64)])
    bucket_edges = np.maximum.accumulate(bucket_edges)
    return np.diff(np.interp(edges, bucket_edges, cdf, left=0.0, right=cdf[-1]))


def _ridge(ax, h, order, max_steps: int) -> None:
    from matplotlib.transforms import blended_transform_factory  # deferred: matplotlib, until a figure is drawn

    steps = h.step[order]
    order = order[np.r_[steps[1:] != steps[:-1], True]]  # one ridge per step: the last record of a step written twice
    pick = order[np.unique(np.linspace(0, order.size - 1, min(max_steps, order.size)).astype(int))]
    lo, hi = float(np.nanmin(h.min[pick])), float(np.nanmax(h.max[pick]))
    edges = np.linspace(lo, hi, GRID_BINS + 1)
    grids = [_resampled(h, i, edges) for i in pick]
    peak = max((float(g.max()) for g in grids), default=0.0) or 1.0
    gap = 1.0 / max(len(pick), 1)
    centers = (edges[:-1] + edges[1:]) / 2
    inside = blended_transform_factory(ax.transAxes, ax.transData)  # x in axes fractions: labels stay inside, in one column
    for k, (i, grid) in enumerate(zip(pick, grids)):
        base = k * gap
        top = base + grid / peak * gap * 2.5
        ax.fill_between(centers, base, top, alpha=0.35, color="C0")
        ax.plot(centers, top, color="C0", linewidth=0.8)
        ax.text(0.01, base, f"step {int(h.step[i])}", fontsize=LABEL_POINTS, va="bottom", ha="left", transform=inside, clip_on=True)
    ax.set_yticks([])
    ax.set_xlabel("value")


def _narrow(h, order) -> bool:
    """True when no histogram of the tag has a spread to draw: every one holds a single value (a bias still at its
    initial zeros) or its values span under 1e-6 of their size, so a ridge would be a triangle of one or two buckets."""
    lo, hi = h.min[order], h.max[order]
    scale = np.maximum(np.abs(lo), np.abs(hi))
    return bool(np.all(np.isfinite(lo) & np.isfinite(hi)) and np.all(hi - lo <= 1e-6 * np.maximum(scale, 1e-30)))


def _over_steps(ax, h, order) -> None:
    """A tag with nothing to draw as a distribution: its value (min..max, equal here) over steps, and a note saying why."""
    steps, lo, hi = h.step[order], h.min[order], h.max[order]
    ax.fill_between(steps, lo, hi, color="C0", alpha=0.3, linewidth=0)
    ax.plot(steps, (lo + hi) / 2, color="C0", marker="o" if steps.size < 30 else None, markersize=3, linewidth=1.2)
    center, scale = float(np.mean((lo + hi) / 2)), float(np.max(np.maximum(np.abs(lo), np.abs(hi))))
    if float(np.ptp((lo + hi) / 2)) <= 1e-9 * max(scale, 1e-30):
        half = abs(center) * 0.5 or 1.0
        ax.set_ylim(center - half, center + half)
    ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 4), useOffset=False)
    if float(np.ptp(lo)) == 0 and float(np.ptp(hi)) == 0:
        note = f"every value is {center:.4g} at every step\n(no distribution to draw)"
    else:
        note = "every value equal within a step:\nits value over steps (no distribution to draw)"
    text = ax.text(0.02, 0.96, note, transform=ax.transAxes, fontsize=LABEL_POINTS, va="top", ha="left", color="0.3")
    text.set_in_layout(False)  # a note inside the panel: the layout must not shrink the panel for it
    ax.set_xlabel("step")
    ax.set_ylabel("value")


def _heatmap(ax, h, order) -> None:
    lo = float(np.min([np.min(l) for l in h.left if l.size]))
    hi = float(np.max([np.max(r) for r in h.right if r.size]))
    edges = np.linspace(lo, hi, 61) if hi > lo else np.linspace(lo - 0.5, lo + 0.5, 61)
    grid = np.zeros((len(order), edges.size - 1))
    for row, i in enumerate(order):
        centers = (h.left[i] + h.right[i]) / 2
        grid[row], _ = np.histogram(centers, bins=edges, weights=h.counts[i])
    steps = h.step[order]
    image = ax.imshow(grid.T, aspect="auto", origin="lower", extent=(float(steps[0]), float(steps[-1]) + 1, float(edges[0]), float(edges[-1])), cmap="viridis")
    ax.figure.colorbar(image, ax=ax, label="count", pad=0.01, fraction=0.05)  # what a colour means
    ax.set_xlabel("step")
    ax.set_ylabel("value")


def plot_histograms(histograms, tag: str | None = None, *, mode: str = "ridge", max_steps: int = 12, max_panels: int = 6, figure=None):
    """Draw histograms over steps, one panel per tag (weights first).

    Args:
        histograms: a :class:`~msnb.events.tables.HistogramTable`.
        tag: draw only this tag (a string) or these tags (a list); default: every
            tag, up to *max_panels*.
        mode: ``ridge`` (one ridge line per step) or ``heatmap``.
        max_steps: ridge lines per panel (spread over the run).
        max_panels: panels at most when *tag* is not given.
        figure: draw into this figure instead of a new one.

    Returns:
        The matplotlib figure.
    """
    from matplotlib.figure import Figure  # deferred: matplotlib, until a figure is drawn

    if mode not in ("ridge", "heatmap"):
        raise UsageError(f"mode must be ridge or heatmap, not {mode!r}")
    if not len(histograms):
        raise UsageError("no histograms to draw")
    present = _weights_first(set(histograms.tag.tolist()))
    wanted = [tag] if isinstance(tag, str) else list(tag) if tag else present[:max_panels]
    missing = [t for t in wanted if t not in present]
    if missing:
        raise UsageError(f"no histogram {missing[0]!r}; present: {', '.join(present)}")
    n = len(wanted)
    cols = 1 if n == 1 else 2
    rows = (n + cols - 1) // cols
    fig = figure or Figure(figsize=(7 if cols == 1 else 11, (4.5 if rows == 1 else 3.4 * rows)), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax in axes[n:]:
        ax.set_visible(False)
    for ax, name in zip(axes, wanted):
        h = histograms.where(tag=name)
        order = np.argsort(h.step, kind="stable")
        if _narrow(h, order):
            _over_steps(ax, h, order)
        elif mode == "ridge":
            _ridge(ax, h, order, max_steps)
        else:
            _heatmap(ax, h, order)
        ax.set_title(f"{_short_name(name)} ({count(len(h), 'histogram')})")
    if len(present) > n and not tag:
        fig.suptitle(f"{n} of {len(present)} histogram tags (pass tag=[...] for others)", fontsize="small")
    return fig


def plot_step_time(scalars, tag: str | None = None, *, skip_first: int = 1, figure=None):
    """Distribution of step times, the first *skip_first* (compilation) left out; returns (figure, stats)."""
    from matplotlib.figure import Figure  # deferred: matplotlib, until a figure is drawn

    present = set(scalars.tags())
    tag = tag or next((t for t in ALIASES["step_time"] if t in present), None)
    if tag is None:
        raise UsageError(f"no step-time tag among {', '.join(sorted(present))}")
    steps, values = scalars.series(tag)
    order = np.argsort(steps, kind="stable")
    v = values[order][skip_first:]
    v = v[np.isfinite(v)]
    fig = figure or Figure(figsize=(6, 3.5), layout="constrained")
    ax = fig.subplots()
    stats = {"tag": tag, "count": int(v.size)}
    if v.size:
        stats.update(median=float(np.median(v)), p90=float(np.percentile(v, 90)), max=float(v.max()))
        ax.hist(v, bins=min(50, max(5, v.size // 4)), color="C2", alpha=0.8)
        ax.axvline(stats["median"], color="black", linestyle="--", linewidth=1, label=f"median {stats['median']:.3g}")
        ax.legend(fontsize="small")
    ax.set_title(f"{tag} (first {skip_first} left out)")
    ax.set_xlabel(tag)
    return fig, stats
