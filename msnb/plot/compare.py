"""The figure of a precision comparison: both loss curves, their difference against the tolerance, lr and grad norm.

Panels, top to bottom: the loss of both runs (raw faint, TensorBoard-smoothed
solid); the candidate's relative difference from the baseline with the
tolerance band (the standard's, or the baseline reruns' own spread where that
is wider, drawn apart) and the first divergent step marked; the learning rates;
the global norms (the last two only when both sides have them).  Long curves
are drawn through the M4 downsampler, so 100,000 steps draw as fast as 2,000.
"""

from __future__ import annotations

import numpy as np

from ..analysis.smoothing import ema
from .downsample import m4

BASE_COLOR, CAND_COLOR, BAND_COLOR, RERUN_COLOR, MARK_COLOR = "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#cf222e"
_PIXELS = 2000


def _draw(ax, steps, values, color, label, smooth: float, width: float):
    """Raw faint and smoothed solid (or as written, for schedules); *width* keeps the baseline visible under the candidate."""
    x, y = _thin(steps, values)
    if smooth > 0 and values.size > 20:
        ax.plot(x, y, color=color, alpha=0.25, linewidth=0.8)
        sx, sy = _thin(steps, ema(values, smooth))
        ax.plot(sx, sy, color=color, linewidth=width, label=f"{label} (smoothed {smooth})")
    else:
        ax.plot(x, y, color=color, linewidth=width, label=label, marker="." if values.size <= 60 else None)


def _thin(steps, values):
    """At most about ``4 * _PIXELS`` finite points of a curve (M4: spikes kept)."""
    steps, values = np.asarray(steps), np.asarray(values, dtype=float)
    ok = np.isfinite(values)
    return m4(steps[ok], values[ok], _PIXELS)


def plot_compare(result, *, smooth: float = 0.6, figure=None):
    """Draw *result* (a :class:`msnb.analysis.compare_result.CompareResult`).

    Args:
        result: what :func:`msnb.compare` returned.
        smooth: TensorBoard's smoothing weight for the loss and grad-norm curves.
        figure: a matplotlib Figure to draw into (default: a new one).

    Returns:
        The matplotlib Figure.
    """
    from matplotlib.figure import Figure  # deferred: matplotlib, until a figure is drawn

    s = result.series
    panels = ["loss", "diff"] + [m for m in ("lr", "grad_norm") if f"baseline_{m}" in s and f"candidate_{m}" in s]
    fig = figure or Figure(figsize=(9, 2.6 * len(panels) + 0.6), layout="constrained")
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    d = result.first_divergence
    for ax, panel in zip(axes, panels):
        if panel == "diff":
            _diff_panel(ax, result)
        else:
            for side, color, width in (("baseline", BASE_COLOR, 3.0), ("candidate", CAND_COLOR, 1.2)):
                tag, steps, values = s[f"{side}_{panel}"]
                _draw(ax, steps, values, color, f"{side}: {tag}", 0.0 if panel == "lr" else smooth, width)
                bad = ~np.isfinite(values)
                if bad.any():
                    finite = values[np.isfinite(values)]
                    y = float(np.max(finite)) if finite.size else 0.0
                    ax.plot(steps[bad][:200], np.full(min(int(bad.sum()), 200), y), "x", color=MARK_COLOR, markersize=8, label=f"{side}: NaN/Inf")
            ax.set_title({"loss": "loss", "lr": "learning rate", "grad_norm": "global norm"}[panel], loc="left", fontsize=10)
            if panel == "lr":
                ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
            ax.legend(fontsize=8, loc="best")
        if d is not None:
            ax.axvline(d.step, color=MARK_COLOR, linestyle="--", linewidth=1.0)
        ax.grid(alpha=0.3)
    if d is not None:
        axes[0].annotate(
            f"left the baseline: step {d.step}",
            xy=(d.step, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(4, -12),
            textcoords="offset points",
            color=MARK_COLOR,
            fontsize=9,
        )
    axes[-1].set_xlabel("step (baseline numbering)")
    verdict = "ALIGNED" if result.passed else "NOT ALIGNED"
    failed = [c.name for c in result.checks if c.status == "fail"]
    fig.suptitle(f"msnb compare: {verdict}" + (f" ({', '.join(failed)})" if failed else "") + f", {result.common_steps:,} common steps", fontsize=11)
    return fig


def _diff_panel(ax, result):
    s = result.series
    common, b, o = s["common"], s["baseline_at"], s["candidate_at"]
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = 100.0 * (o - b) / np.abs(b)
    ok = np.isfinite(rel)
    steps, tol = s["tolerance"]
    with np.errstate(divide="ignore", invalid="ignore"):
        band = 100.0 * tol / np.abs(b[np.isfinite(b) & np.isfinite(o)])
    standard = 100.0 * result.tolerance["mean_rel"]
    tx, tb = _thin(steps, band)
    ax.fill_between(tx, -tb, tb, color=BAND_COLOR, alpha=0.15, linewidth=0, label="tolerance per step")
    if s.get("envelope") is not None:
        es, env = s["envelope"]
        with np.errstate(divide="ignore", invalid="ignore"):
            eb = 100.0 * env / np.abs(b[np.isfinite(b) & np.isfinite(o)])
        ex, ey = _thin(es, eb)
        ax.plot(ex, ey, color=RERUN_COLOR, linewidth=1.6, linestyle=":", label="baseline reruns' own spread", zorder=5)
        ax.plot(ex, -ey, color=RERUN_COLOR, linewidth=1.6, linestyle=":", zorder=5)
    if ok.any():
        x, y = _thin(common[ok], rel[ok])
        # each step a dot, not a line through them: a candidate a point above, then below, joined step to step was a
        # solid grey block; as dots it reads as the two levels it jumps between
        ax.plot(x, y, color="0.45", linestyle="none", marker=".", markersize=1.6, alpha=0.5, label="candidate - baseline per step", zorder=3)
        if ok.sum() > 20:
            sx, sy = _thin(common[ok], ema(rel[ok], 0.9))
            ax.plot(sx, sy, color="black", linewidth=1.3, label="candidate - baseline (smoothed)")
    ax.axhline(0.0, color="0.3", linewidth=0.6)
    ax.axhline(standard, color=BAND_COLOR, linewidth=0.8, linestyle="--")
    spread = result.tolerance.get("rerun_spread") or {}
    raised = " (the reruns' spread)" if spread.get("mean_rel", -1.0) >= result.tolerance["mean_rel"] else ""
    ax.axhline(-standard, color=BAND_COLOR, linewidth=0.8, linestyle="--", label=f"mean error limit \u00b1{standard:.2g} %{raised}")
    if ok.any():
        lim = max(3 * standard, float(np.nanpercentile(np.abs(rel[ok]), 99.5)) * 1.2)
        ax.set_ylim(-lim, lim)
    ax.set_title("relative difference of the loss (%)", loc="left", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
