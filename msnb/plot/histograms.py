"""Histograms over steps (ridge lines or a heatmap) and the step-time distribution."""

from __future__ import annotations

import numpy as np

from ..errors import UsageError


def plot_histograms(histograms, tag: str | None = None, *, mode: str = "ridge", max_steps: int = 12, figure=None):
    """Draw one tag's histograms over steps; returns the figure."""
    from matplotlib.figure import Figure

    if not len(histograms):
        raise UsageError("no histograms to draw")
    tags = sorted(set(histograms.tag.tolist()))
    tag = tag or tags[0]
    h = histograms.where(tag=tag)
    if not len(h):
        raise UsageError(f"no histogram {tag!r}; present: {', '.join(tags)}")
    order = np.argsort(h.step, kind="stable")
    fig = figure or Figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.subplots()
    if mode == "ridge":
        pick = order[np.unique(np.linspace(0, order.size - 1, min(max_steps, order.size)).astype(int))]
        peak = max(float(np.max(h.counts[i] / np.maximum(h.right[i] - h.left[i], 1e-300))) for i in pick) or 1.0
        gap = 1.0 / max(len(pick), 1)
        for k, i in enumerate(pick):
            width = np.maximum(h.right[i] - h.left[i], 1e-300)
            density = h.counts[i] / width / peak
            centers = (h.left[i] + h.right[i]) / 2
            base = k * gap
            ax.fill_between(centers, base, base + density * gap * 2.5, alpha=0.35, color="C0")
            ax.plot(centers, base + density * gap * 2.5, color="C0", linewidth=0.8)
            ax.text(float(np.min(h.left[i])) if h.left[i].size else 0, base, f"step {int(h.step[i])}", fontsize="x-small", va="bottom")
        ax.set_yticks([])
        ax.set_xlabel("value")
    elif mode == "heatmap":
        lo = float(np.min([np.min(l) for l in h.left if l.size]))
        hi = float(np.max([np.max(r) for r in h.right if r.size]))
        edges = np.linspace(lo, hi, 61)
        grid = np.zeros((len(order), edges.size - 1))
        for row, i in enumerate(order):
            centers = (h.left[i] + h.right[i]) / 2
            grid[row], _ = np.histogram(centers, bins=edges, weights=h.counts[i])
        steps = h.step[order]
        ax.imshow(grid.T, aspect="auto", origin="lower", extent=(float(steps[0]), float(steps[-1]) + 1, lo, hi), cmap="viridis")
        ax.set_xlabel("step")
        ax.set_ylabel("value")
    else:
        raise UsageError(f"mode must be ridge or heatmap, not {mode!r}")
    ax.set_title(f"{tag} ({len(h)} histograms)")
    return fig


def plot_step_time(scalars, tag: str | None = None, *, skip_first: int = 1, figure=None):
    """Distribution of step times, the first *skip_first* (compilation) left out; returns (figure, stats)."""
    from matplotlib.figure import Figure

    from ..events.tags import ALIASES

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
